#!/usr/bin/env bash
# privdiff run --nproc 2 (and the torchrun form), end to end on loopback Gloo: the same model
# (within float tolerance) and exactly the same ledger as one process for K = 1 and K > 1; resume
# on another number of ranks; a killed rank ends the run (exit 1, the rank named) and --resume
# completes it; a single-process mechanism is refused.
# Usage: multi_process_test.sh PRIVDIFF CHECKPOINT_DIFF FIXTURE_DIR
set -u
privdiff=$1 checkpoint_diff=$2 fixtures=$3
source "$(dirname "$0")/common.sh"
recipe() {  # recipe MECHANISM K STEPS
  cat <<TOML
[run]
seed = 1
threads = 1
checkpoint_every = 2
[privacy]
epsilon = 8.0
delta = 1e-5
[data]
path = "$fixtures/data/tiny-fashion-mnist"
$tiny_model
[[stage]]
mechanism = "$1"
$( [ "$2" -gt 1 ] && echo "noise_multiplicity = $2" )
batch_size = 8
physical_batch_size = 3
steps = $3
ema = 0.9
secure_noise = false
[sampler]
type = "edm_heun"
steps = 2
TOML
}
same_run() {  # same_run DIR_A DIR_B WHAT
  cmp -s "$1/ledger.json" "$2/ledger.json" || fail "$3: the ledgers differ: $(diff "$1/ledger.json" "$2/ledger.json")"
  local d
  d=$("$checkpoint_diff" "$1/checkpoint.pt" "$2/checkpoint.pt") || fail "$3: checkpoints not comparable"
  awk -v d="$d" 'BEGIN { exit !(d < 1e-5) }' || fail "$3: the models differ by $d"
  echo "$3: same ledger, models within $d"
}

# 1 process vs 2 processes, K = 1 (dpsgd) and K = 2 (dpdm).
for case in "dpsgd 1" "dpdm 2"; do
  set -- $case
  recipe "$1" "$2" 4 > "$tmp/$1.toml"
  "$privdiff" run "$tmp/$1.toml" --out "$tmp/$1-1" > "$tmp/log" 2>&1 || fail "$1 on 1 process: $(cat "$tmp/log")"
  out=$("$privdiff" run "$tmp/$1.toml" --out "$tmp/$1-2" --nproc 2 2>&1) || fail "$1 on 2 processes: $out"
  [ "$(grep -c "run directory:" <<<"$out")" = 1 ] || fail "not one report (rank 0's): $out"
  same_run "$tmp/$1-1" "$tmp/$1-2" "$1, K = $2, 1 vs 2 processes"
done

# A non-private stage (public data): the gradients meet in the same all-reduce, without noise.
recipe dpsgd 1 4 | sed -e 's/^\[data\]$/[data]\npublic = true/' -e 's/"dpsgd"/"nonprivate"/' -e '/^secure_noise/d' \
  > "$tmp/public.toml"
"$privdiff" run "$tmp/public.toml" --out "$tmp/public-1" > "$tmp/log" 2>&1 || fail "public, 1 process: $(cat "$tmp/log")"
"$privdiff" run "$tmp/public.toml" --out "$tmp/public-2" --nproc 2 > "$tmp/log" 2>&1 || fail "public, 2: $(cat "$tmp/log")"
same_run "$tmp/public-1" "$tmp/public-2" "nonprivate, 1 vs 2 processes"

# The torchrun form: the ranks started by someone else, with torchrun's variables.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for rank in 0 1; do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$privdiff" run "$tmp/dpdm.toml" --out "$tmp/torchrun" > "$tmp/rank$rank.log" 2>&1 &
done
wait %1 || fail "torchrun form, rank 0: $(cat "$tmp/rank0.log")"
wait %2 || fail "torchrun form, rank 1: $(cat "$tmp/rank1.log")"
same_run "$tmp/dpdm-1" "$tmp/torchrun" "torchrun variables"
# Every rank must run rank 0's run: a rank started with another --set is refused, on every rank,
# before anything is written.
for rank in 0 1; do
  extra=(); [ $rank = 1 ] && extra=(--set stage.0.steps=5)
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$privdiff" run "$tmp/dpdm.toml" --out "$tmp/mixed" "${extra[@]}" > "$tmp/mixed$rank.log" 2>&1 &
done
code0=0 code1=0
wait %1 || code0=$?
wait %2 || code1=$?
[ "$code0" = 2 ] && [ "$code1" = 2 ] || fail "mixed recipes: exit $code0/$code1: $(cat "$tmp"/mixed*.log)"
grep -q "rank 1: its recipe (with --set) or its data differ from rank 0's" "$tmp/mixed1.log" \
  || fail "rank 1 does not say why: $(cat "$tmp/mixed1.log")"
[ ! -e "$tmp/mixed" ] || fail "a refused multi-process run wrote its directory"
# A group of one (torchrun --nproc-per-node 1): through the collectives, the same run.
RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$privdiff" run "$tmp/dpdm.toml" --out "$tmp/one" \
  > "$tmp/log" 2>&1 || fail "a group of one: $(cat "$tmp/log")"
same_run "$tmp/dpdm-1" "$tmp/one" "a process group of one"
# A port no socket has is refused by name, not tried (issue 69).
out=$(RANK=0 WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=99999 timeout 120 "$privdiff" run "$tmp/dpdm.toml" \
  --out "$tmp/badport" 2>&1); code=$?
[ "$code" = 1 ] || [ "$code" = 2 ] || fail "MASTER_PORT=99999: exit $code: $out"
grep -qF "MASTER_PORT=99999: expected an integer in [1, 65535]" <<<"$out" || fail "MASTER_PORT=99999 not named: $out"

# Stopped on 2 processes, resumed on 1: the run it would have been.
code=0
"$privdiff" run "$tmp/dpdm.toml" --out "$tmp/parts" --nproc 2 --stop-after-steps 2 > "$tmp/log" 2>&1 || code=$?
[ "$code" = 3 ] || fail "stop on 2 processes: exit $code: $(cat "$tmp/log")"
"$privdiff" run --resume "$tmp/parts" > "$tmp/log" 2>&1 || fail "resume on 1 process: $(cat "$tmp/log")"
same_run "$tmp/dpdm-1" "$tmp/parts" "2 processes, then resumed on 1"

# A rank killed mid-run: the run ends (exit 1, naming it), the checkpoint stays good, --resume
# (on 2 processes again) completes the run with every step in the ledger.
# (50 steps: long enough to kill a rank mid-run after the first checkpoint, at step 2)
recipe dpdm 2 50 > "$tmp/long.toml"
"$privdiff" run "$tmp/long.toml" --out "$tmp/killed" --nproc 2 > "$tmp/killed.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do [ -s "$tmp/killed/checkpoint.pt" ] && break; sleep 0.1; done
[ -s "$tmp/killed/checkpoint.pt" ] || fail "no checkpoint within 60 s: $(cat "$tmp/killed.log")"
victim=""
for pid in $(pgrep -P "$launcher"); do
  tr '\0' '\n' < "/proc/$pid/environ" | grep -qx "RANK=1" && victim=$pid
done
[ -n "$victim" ] || fail "no rank 1 among the launcher's children"
kill -9 "$victim"
code=0
wait "$launcher" || code=$?
[ "$code" = 1 ] || fail "a killed rank: exit $code, not 1: $(cat "$tmp/killed.log")"
grep -q "rank 1 of 2 was killed by signal 9" "$tmp/killed.log" || fail "the killed rank is not named: $(cat "$tmp/killed.log")"
out=$("$privdiff" run --resume "$tmp/killed" --nproc 2 2>&1) || fail "resume after the kill: $out"
[ -s "$tmp/killed/summary.json" ] || fail "the resumed run did not finish"
python3 - "$tmp/killed/ledger.json" <<'PY' || fail "the resumed run's ledger does not cover its 50 steps"
import json, sys
ledger = json.load(open(sys.argv[1]))
steps = sum(e.get("count", 1) for e in ledger["entries"])
sys.exit(0 if steps >= 50 else 1)
PY
echo "killed rank: exit 1, named; resumed to the end"

# The launcher killed (kill -9): the ranks stop together with a checkpoint instead of running on
# unseen, and --resume completes the run.
"$privdiff" run "$tmp/long.toml" --out "$tmp/orphan" --nproc 2 > "$tmp/orphan.log" 2>&1 &
launcher=$!
for _ in $(seq 600); do [ -s "$tmp/orphan/checkpoint.pt" ] && break; sleep 0.1; done
[ -s "$tmp/orphan/checkpoint.pt" ] || fail "no checkpoint within 60 s: $(cat "$tmp/orphan.log")"
command -v pgrep > /dev/null || fail "this check needs pgrep (procps)"
kill -9 "$launcher"
wait "$launcher" 2> /dev/null
for _ in $(seq 300); do pgrep -f "$tmp/orphan" > /dev/null || break; sleep 0.1; done
pgrep -f "$tmp/orphan" > /dev/null && fail "the ranks outlived their killed launcher by 30 s"
grep -q "^stopped after" "$tmp/orphan.log" || fail "the ranks did not stop with a checkpoint: $(tail -3 "$tmp/orphan.log")"
out=$("$privdiff" run --resume "$tmp/orphan" --nproc 2 2>&1) || fail "resume after the launcher's kill: $out"
[ -s "$tmp/orphan/summary.json" ] || fail "the run resumed after the launcher's kill did not finish"
echo "killed launcher: the ranks stopped with a checkpoint; resumed to the end"

# A mechanism that runs in one process only is refused up front (exit 2, nothing written).
cat > "$tmp/feta.toml" <<TOML
$(recipe dpsgd 1 2 | sed '/^\[\[stage\]\]/,$d')
[[stage]]
mechanism = "central_images"
statistic = "mean"
queries = 1
TOML
code=0
out=$("$privdiff" run "$tmp/feta.toml" --out "$tmp/feta" --nproc 2 2>&1) || code=$?
[ "$code" = 2 ] || fail "central_images on 2 processes: exit $code: $out"
grep -q "runs in one process only" <<<"$out" || fail "no one-process message: $out"
[ ! -e "$tmp/feta/ledger.json" ] || fail "a refused run wrote a ledger"
# Refusals are said once, not by every rank: a used --out (rank 0's check), a backend this build lacks.
code=0
out=$("$privdiff" run "$tmp/dpdm.toml" --out "$tmp/dpdm-2" --nproc 2 2>&1) || code=$?
[ "$code" = 2 ] || fail "a used --out on 2 processes: exit $code: $out"
[ "$(grep -c . <<<"$out")" = 1 ] && grep -q "already exists and is not empty" <<<"$out" || fail "not one message: $out"
code=0
out=$("$privdiff" run "$tmp/dpdm.toml" --out "$tmp/nccl" --nproc 2 --set 'run.backend="nccl"' --set 'run.device="cpu"' 2>&1) || code=$?
[ "$code" = 2 ] && [ "$(grep -c . <<<"$out")" = 1 ] && grep -q 'backend = "nccl"' <<<"$out" || fail "nccl on the CPU: exit $code: $out"
echo "1 passed, 0 failed"
