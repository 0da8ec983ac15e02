#!/usr/bin/env bash
# Crash safety of a private run: kill -9 at random moments (mid-step, mid-checkpoint, mid-ledger
# write: the run checkpoints every step) never leaves a run directory that `privdiff run --resume`
# cannot continue, the finished run has every step once in metrics.jsonl and a ledger that covers
# at least all of them (steps redone after a kill are spent again, never dropped); a write failure
# (a file-size limit gives EFBIG as a full disk gives ENOSPC) ends the run with a clear message and
# exit code 1, leaving the previous checkpoint intact, and the run then resumes to the end.
# Usage: crash_safety_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
steps=40
cat > "$tmp/r.toml" <<TOML
[run]
seed = 3
checkpoint_every = 1
[privacy]
epsilon = 5.0
delta = 1e-5
accountant = "rdp"
[data]
path = "$fixtures/data/tiny-fashion-mnist"
$tiny_model
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = $steps
[sampler]
type = "edm_heun"
steps = 2
TOML
check_finished() {  # RUN_DIR
  python3 - "$1" "$steps" <<'PY' || fail "finished run $1 is inconsistent"
import json, os, sys
d, steps = sys.argv[1], int(sys.argv[2])
lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
assert [l["step"] for l in lines] == list(range(1, steps + 1)), [l["step"] for l in lines]
ledger = json.load(open(f"{d}/ledger.json"))
spent = sum(e.get("count", 1) for e in ledger["entries"])
assert spent >= steps, (spent, steps)
assert json.load(open(f"{d}/summary.json")), "no summary"
assert not [f for f in os.listdir(d) if ".tmp." in f], os.listdir(d)
print(f"{d}: {steps} steps in metrics, {spent} spent in the ledger")
PY
}
passed=0

# 1. Random kill -9, then resume, until the run finishes.
run="$tmp/killed"
"$privdiff" run "$tmp/r.toml" --out "$run" > "$tmp/log" 2>&1 &
pid=$!
kills=0
RANDOM=7
while :; do
  sleep "$(printf '0.%03d' $((RANDOM % 1000)))"
  sleep $((RANDOM % 2))
  if ! kill -0 "$pid" 2> /dev/null; then
    wait "$pid" || fail "run or resume failed on its own: $(tail -5 "$tmp/log")"
    break
  fi
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  kills=$((kills + 1))
  [ -s "$run/ledger.json" ] && { python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$run/ledger.json" \
    || fail "ledger.json unreadable after kill $kills"; }
  if [ -s "$run/checkpoint.pt" ]; then  # ledger.json is written first: never behind the checkpoint
    note=$("$privdiff" account "$run" 2>&1 > /dev/null) || fail "account after kill $kills: $note"
    echo "$note" | grep -q "more than ledger.json" && fail "ledger.json behind the checkpoint after kill $kills: $note"
  fi
  if [ "$kills" -ge 15 ] && [ -s "$run/recipe.toml" ]; then  # enough kills: let it finish
    "$privdiff" run --resume "$run" > "$tmp/log" 2>&1 || fail "final resume failed: $(tail -5 "$tmp/log")"
    break
  fi
  if [ -s "$run/recipe.toml" ]; then
    # Whatever the kill interrupted (even before the first checkpoint), --resume continues.
    "$privdiff" run --resume "$run" > "$tmp/log" 2>&1 &
  else  # killed before the run wrote anything (loading plugins, pre-flight): start it again
    # (at most the temporary file of an interrupted first write, which a new run clears)
    leftovers=$(ls -A "$run" 2> /dev/null | grep -Ev '^[a-z_.]+\.tmp\.[0-9]+$')
    [ -z "$leftovers" ] || fail "a run directory without recipe.toml holds more than temporary files: $(ls -A "$run")"
    "$privdiff" run "$tmp/r.toml" --out "$run" > "$tmp/log" 2>&1 &
  fi
  pid=$!
done
echo "killed $kills times"
[ "$kills" -ge 3 ] || fail "only $kills kills: the run is too fast for this test"
check_finished "$run"
passed=$((passed + 1))

# 2. A write failure ends the run cleanly and keeps the previous checkpoint.
run="$tmp/full"
out=$("$privdiff" run "$tmp/r.toml" --out "$run" --stop-after-steps 3 2>&1); rc=$?
[ "$rc" = 3 ] || fail "stop after 3: rc $rc: $out"
before=$(sha256sum "$run/checkpoint.pt" | cut -d' ' -f1)
limit=$(( $(stat -c %s "$run/checkpoint.pt") / 2048 ))  # KiB: half the checkpoint
out=$(trap '' XFSZ; ulimit -f "$limit"; "$privdiff" run --resume "$run" 2>&1); rc=$?
[ "$rc" = 1 ] || fail "write failure: rc $rc (want 1): $out"
echo "$out" | grep -q "checkpoint.pt: File too large" || fail "no clear message: $out"
[ "$(sha256sum "$run/checkpoint.pt" | cut -d' ' -f1)" = "$before" ] || fail "the previous checkpoint changed"
"$privdiff" run --resume "$run" > "$tmp/log" 2>&1 || fail "resume after the write failure: $(tail -5 "$tmp/log")"
check_finished "$run"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
