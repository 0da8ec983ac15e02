#!/usr/bin/env bash
# privdiff run, end to end: a tiny DPDM run on the tiny Fashion-MNIST fixture with noise
# calibrated to the target; checks the run directory and that the ledger matches the plan.
# Usage: private_run_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
cat > "$tmp/r.toml" <<TOML
[run]
seed = 1
private_diagnostics = true
[privacy]
epsilon = 5.0
delta = 1e-5
accountant = "rdp"
report = ["prv"]
[data]
path = "$fixtures/data/tiny-fashion-mnist"
$tiny_model
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 3
ema = 0.9
secure_noise = false
[sampler]
type = "edm_heun"
steps = 3
guidance = 0.5
TOML
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/run" 2>&1) || fail "run failed: $out"
echo "$out"
grep -q "calibrated stage 'stage0' noise multiplier" <<<"$out" || fail "no calibration line"
grep -q "step 3/3" <<<"$out" || fail "no progress line"
grep -q "engine: vectorised, chunks of logical batch; norms .*ghost" <<<"$out" || fail "no engine line"
grep -q "warning: stage 'stage0': ema 0.9 averages over ~10 steps but the stage has 3" <<<"$out" || fail "no EMA warning"
grep -q "samples: .*samples.png (100 images" <<<"$out" || fail "no sample grid line"
# 20 records, batch 4, 3 steps: the pre-flight says the noise will swamp any signal (issue 29).
grep -q "stage 'stage0': 20 private records, expected batch 4, 3 steps, sigma .*: noise-to-signal" <<<"$out" \
  || fail "no noise-to-signal line: $out"
grep -q "warning: stage 'stage0': the privacy noise is .* times the largest signal" <<<"$out" || fail "no small-data warning"
# With private_diagnostics (this recipe) the console shows the loss and the realised examples/s.
grep -q "step 3/3  loss .*  eps .* ex/s" <<<"$out" || fail "no diagnostics on the progress line"
python3 - "$tmp/run/samples.png" <<'PY' || fail "samples.png is not a 298x298 PNG"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (10 * 28 + 9 * 2, 10 * 28 + 9 * 2), (width, height)
PY
for f in recipe.toml ledger.json privacy.json metrics.jsonl samples.png; do [ -s "$tmp/run/$f" ] || fail "no $f"; done
python3 - "$tmp/run" <<'PY' || fail "run directory contents"
import json, sys
d = sys.argv[1]
ledger = json.load(open(f"{d}/ledger.json"))
entry = ledger["entries"][0]
assert entry["type"] == "self_composed" and entry["count"] == 3, entry
assert abs(entry["event"]["sampling_rate"] - 4 / 20) < 1e-12, entry
report = json.load(open(f"{d}/privacy.json"))
eps = {r["accountant"]: r["epsilon"] for r in report["results"]}
assert eps["rdp"] <= 5.0 + 1e-9 and eps["rdp"] > 4.9, eps
assert eps["prv"] <= eps["rdp"], eps
lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
assert [l["step"] for l in lines] == [1, 2, 3], lines
# A reproducible run's engine plan follows the shapes (nothing timed): vectorised, whole batches.
assert lines[0]["engine"]["path"] == "vectorised" and lines[0]["engine"]["chunk"] == "logical batch", lines[0]
assert "seconds_per_example" not in lines[0]["engine"] and "ghost" in lines[0]["engine"]["norm_strategies"], lines[0]
# Provenance: what made the run.
summary = json.load(open(f"{d}/summary.json"))
p = summary["provenance"]
assert p["privdiff"].startswith("0.") and "torch=" in p["build"] and " run " in p["command"], p
assert {"kind": "mechanism", "id": "dpdm"}.items() <= next(c for c in p["components"] if c["id"] == "dpdm").items(), p
assert all("library" in c and "version" in c for c in p["components"]), p
assert summary["data"].startswith("tiny-fashion-mnist (train)|N=20|") and "|hash=" in summary["data"], summary["data"]
assert summary["calibration_accountant"] == "rdp", summary
PY
# Reproducible noise is an opt-in with a caveat wherever the privacy is reported.
python3 - "$tmp/run" <<'PY' || fail "caveats of a reproducible run"
import json, sys
d = sys.argv[1]
caveats = json.load(open(f"{d}/privacy.json"))["caveats"]
assert any("secure_noise = false" in c for c in caveats), caveats
assert any("private_diagnostics" in c for c in caveats), caveats
assert json.load(open(f"{d}/summary.json"))["caveats"] == caveats
PY
grep -q "CAVEAT.*seed stays secret" <<<"$out" || fail "no caveat in the end-of-run summary"
acc=$("$privdiff" account "$tmp/run" --json 2>&1) || fail "account RUN: $acc"
python3 -c "import json,sys; c=json.loads(sys.argv[1])['caveats']; assert any('seed stays secret' in x for x in c), c" "$acc" \
  || fail "no caveat in account --json: $acc"
"$privdiff" account "$tmp/run" | grep -q "CAVEAT: reproducible noise" || fail "no caveat in account's table"
# The default: noise and batches from the OS CSPRNG — two runs of one recipe differ, no caveat,
# and no per-step loss, batch size or time of private steps in metrics.jsonl.
sed -e '/^secure_noise = false$/d' -e '/^private_diagnostics = true$/d' "$tmp/r.toml" > "$tmp/secure.toml"
"$privdiff" run "$tmp/secure.toml" --out "$tmp/s1" >/dev/null 2>&1 || fail "secure run 1 failed"
"$privdiff" run "$tmp/secure.toml" --out "$tmp/s2" >/dev/null 2>&1 || fail "secure run 2 failed"
cmp -s "$tmp/s1/samples.png" "$tmp/s2/samples.png" && fail "two secure runs gave the same model"
python3 - "$tmp/s1" <<'PY' || fail "secure run reports"
import json, sys
d = sys.argv[1]
assert json.load(open(f"{d}/privacy.json"))["caveats"] == [], "caveat on a secure run"
lines = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
for j in lines:  # (per-step seconds would tell the realised batch size: issue 36)
    assert "examples" not in j and "loss" not in j and "seconds" not in j, j
# The engine's plan, measured before the first step, is on the first line only.
engine = lines[0]["engine"]
assert engine["path"] in ("vectorised", "micro_batch") and int(engine["chunk"]) >= 1, engine
# The chunks timed: from the smallest up, until one is clearly slower (how far depends on the timings,
# so on the machine's load: only the first is certain); a vectorised chunk chosen is one of them.
timed = engine["seconds_per_example"]
assert "micro_batch" in timed and "vectorised/1 " in timed, engine
assert engine["path"] == "micro_batch" or f"vectorised/{engine['chunk']} " in timed, engine
assert all("engine" not in j for j in lines[1:]), lines
PY
# The same recipe and seed give the same run (initial weights, batches, noise, loss draws).
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/again" 2>&1) || fail "second run failed: $out"
python3 - "$tmp/run" "$tmp/again" <<'PY' || fail "the same seed gave a different run"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f"{d}/metrics.jsonl")] for d in sys.argv[1:3])
assert a == b, (a, b)
PY
# ...bit for bit, whatever the machine's load: a reproducible run does not follow the load with its
# thread count (which changes the order of floating-point sums).
cmp -s "$tmp/run/samples.png" "$tmp/again/samples.png" || fail "the same seed gave different samples"
# Interrupted and resumed = uninterrupted: two stages, stopped mid-stage and again across the
# stage boundary, resumed each time (checkpoints every 2 steps, so one stop is off a checkpoint).
cat >> "$tmp/r.toml" <<TOML
[[stage]]
name = "second"
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 3
noise_multiplier = 8.0
ema = 0.9
secure_noise = false
TOML
sed -i 's/^seed = 1$/seed = 1\nthreads = 1\ncheckpoint_every = 2/' "$tmp/r.toml"
"$privdiff" run "$tmp/r.toml" --out "$tmp/whole" >/dev/null 2>&1 || fail "two-stage run failed"
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/parts" --stop-after-steps 1 2>&1); code=$?
[ $code -eq 3 ] || fail "stop-after-steps exit code $code: $out"
grep -q "continue with: privdiff run --resume $tmp/parts" <<<"$out" || fail "no resume hint: $out"
[ -s "$tmp/parts/checkpoint.pt" ] || fail "no checkpoint at the stop"
# A damaged ledger.json refuses the resume as bad input, naming the file (issue 69).
cp -r "$tmp/parts" "$tmp/badledger" && truncate -s 40 "$tmp/badledger/ledger.json"
out=$("$privdiff" run --resume "$tmp/badledger" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "badledger/ledger.json" <<<"$out" || fail "resume with a damaged ledger.json: exit $code: $out"
out=$("$privdiff" run --resume "$tmp/parts" --stop-after-steps 3 2>&1); code=$?
[ $code -eq 3 ] || fail "second stop exit code $code: $out"
grep -q "resuming at stage 0, step 1" <<<"$out" || fail "no resume line: $out"
out=$("$privdiff" run --resume "$tmp/parts" 2>&1) || fail "final resume failed: $out"
grep -q "resuming at stage 1, step 1" <<<"$out" || fail "no second resume line: $out"
cmp -s "$tmp/whole/samples.png" "$tmp/parts/samples.png" || fail "resumed model samples differ from the uninterrupted run's"
cmp -s "$tmp/whole/ledger.json" "$tmp/parts/ledger.json" || fail "resumed ledger differs"
cmp -s "$tmp/whole/privacy.json" "$tmp/parts/privacy.json" || fail "resumed privacy report differs"
python3 - "$tmp/whole" "$tmp/parts" <<'PY' || fail "resumed metrics differ"
import json, sys
def lines(d):
    out = []
    for l in open(f"{d}/metrics.jsonl"):
        j = json.loads(l); j.pop("seconds", None); out.append(j)
    return out
a, b = lines(sys.argv[1]), lines(sys.argv[2])
assert len(a) == 6 and a == b, (a, b)
PY
# Each stage's speed counts its time in every session: a stage finished in an earlier session, or
# resumed mid-way, still has its examples/s.
python3 - "$tmp/parts" <<'PY' || fail "a resumed run's stages lack their speed"
import json, sys
stages = json.load(open(f"{sys.argv[1]}/summary.json"))["stages"]
assert len(stages) == 2 and all(s["seconds"] > 0 and s["examples_per_second"] > 0 for s in stages), stages
PY
# A run directory never under-reports: a kill between the checkpoint and ledger.json writes (left
# here by emptying ledger.json) is repaired from the checkpoint's ledger, with a note.
cp -r "$tmp/parts" "$tmp/torn"
echo '{"format": "privdiff-ledger", "version": 1, "entries": []}' > "$tmp/torn/ledger.json"
want=$("$privdiff" account "$tmp/parts" --json 2>/dev/null) || fail "account of the finished run"
got=$("$privdiff" account "$tmp/torn" --json 2>"$tmp/note") || fail "account of the torn run: $(cat "$tmp/note")"
python3 -c "import json,sys; a,b=(json.loads(x)['results'] for x in sys.argv[1:3]); assert a == b and a[0]['epsilon'] > 0, (a, b)" \
  "$want" "$got" || fail "account under-reported a torn run: $got"
grep -q "checkpoint.pt records 6 step(s) more than ledger.json" "$tmp/note" || fail "no torn-ledger note: $(cat "$tmp/note")"
out=$("$privdiff" sample "$tmp/torn" --count 10 --out "$tmp/torn/s" 2>&1) || fail "sample of the torn run: $out"
grep -q "note: checkpoint.pt records 6 step(s)" <<<"$out" || fail "sample did not note the torn ledger: $out"
# Fewer samples than a grid row: the grid it says it wrote exists (one row).
out=$("$privdiff" sample "$tmp/torn" --count 2 --out "$tmp/two" 2>&1) || fail "sample --count 2: $out"
grep -q "$tmp/two-grid.png" <<<"$out" && [ -s "$tmp/two-grid.png" ] || fail "sample --count 2 names a grid it did not write: $out"
# A resumed run is the run that was started: an edited recipe is refused; a run without a checkpoint
# yet (killed before its first one) starts over in place.
"$privdiff" run "$tmp/r.toml" --out "$tmp/edited" --stop-after-steps 1 >/dev/null 2>&1
sed -i 's/^steps = 3$/steps = 4/' "$tmp/edited/recipe.toml"
out=$("$privdiff" run --resume "$tmp/edited" 2>&1); code=$?
[ $code -eq 2 ] || fail "resumed an edited recipe: exit $code (want 2: bad input)"
grep -q "recipe.toml changed since the checkpoint" <<<"$out" || fail "no edited-recipe message: $out"
mkdir -p "$tmp/empty" && cp "$tmp/r.toml" "$tmp/empty/recipe.toml"
out=$("$privdiff" run --resume "$tmp/empty" 2>&1) || fail "a run without a checkpoint did not start over: $out"
grep -q "no checkpoint yet: the run starts over in place" <<<"$out" || fail "no start-over message: $out"
[ -s "$tmp/empty/summary.json" ] || fail "the restarted run did not finish"
head -c 1000 "$tmp/parts/checkpoint.pt" > "$tmp/edited/checkpoint.pt"
cp "$tmp/parts/recipe.toml" "$tmp/edited/recipe.toml"
out=$("$privdiff" run --resume "$tmp/edited" 2>&1); code=$?
[ $code -eq 2 ] || fail "resumed from a truncated checkpoint: exit $code (want 2: bad input)"
grep -q "checkpoint.pt: not a readable privdiff checkpoint" <<<"$out" || fail "no corrupt-checkpoint message: $out"
out=$("$privdiff" sample "$tmp/edited" --count 10 --out "$tmp/s" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "not a readable privdiff checkpoint" <<<"$out" || fail "sample of a truncated checkpoint: exit $code: $out"
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/whole" 2>&1) && fail "ran into a non-empty directory"
grep -q "privdiff run --resume $tmp/whole" <<<"$out" || fail "no resume suggestion: $out"
# A finished run resumes to nothing (issue 37): no re-sampling, no file rewritten.
before=$(cd "$tmp/whole" && sha256sum summary.json privacy.json samples.png ledger.json metrics.jsonl)
out=$("$privdiff" run --resume "$tmp/whole" 2>&1) || fail "resume of a finished run: $out"
grep -q "finished (summary.json): nothing to resume, nothing changed" <<<"$out" || fail "no finished message: $out"
[ "$(cd "$tmp/whole" && sha256sum summary.json privacy.json samples.png ledger.json metrics.jsonl)" = "$before" ] \
  || fail "resuming a finished run rewrote it"
# A finished run that lost its model or its summary is refused as sample and export refuse it (issue 69).
cp -r "$tmp/whole" "$tmp/nomodel" && rm "$tmp/nomodel/checkpoint.pt"
out=$("$privdiff" run --resume "$tmp/nomodel" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "its checkpoint.pt is gone" <<<"$out" || fail "finished run without its model: exit $code: $out"
cp -r "$tmp/whole" "$tmp/badsummary" && truncate -s 10 "$tmp/badsummary/summary.json"
out=$("$privdiff" run --resume "$tmp/badsummary" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "its summary.json is damaged" <<<"$out" || fail "finished run, damaged summary: exit $code: $out"
# A plan without stages trains no model: finished, it resumes to nothing without a checkpoint.pt.
"$privdiff" run "$fixtures/../../examples/recipes/privacy_plan.toml" --out "$tmp/plan" > "$tmp/log" 2>&1 || fail "the plan: $(cat "$tmp/log")"
out=$("$privdiff" run --resume "$tmp/plan" 2>&1) || fail "resume of a finished plan: $out"
grep -q "nothing to resume" <<<"$out" || fail "a finished plan did not resume to nothing: $out"

# Data the model cannot take (issue 29): refused by validate and run alike, exit 2, one line, no
# run directory — channels, size, and labels beyond num_classes.
for setting in "model.image_channels=3|holds 1x28x28 images (channels x height x width), but the model takes 3x28x28" \
               "model.image_size=16|but the model takes 1x16x16" \
               "model.num_classes=3|has labels up to 9, but the model has num_classes = 3 (set [model] num_classes to 10"; do
  for command in validate run; do
    out=$("$privdiff" $command "$tmp/r.toml" --set "${setting%%|*}" $([ $command = run ] && echo --out "$tmp/mismatch") 2>&1); code=$?
    [ $code -eq 2 ] && grep -qF "${setting#*|}" <<<"$out" || fail "$command --set ${setting%%|*}: exit $code: $out"
    [ "$(grep -c '^error' <<<"$out")" = 1 ] || fail "$command --set ${setting%%|*}: not one error line: $out"
    [ ! -e "$tmp/mismatch" ] || fail "a refused run left a directory"
  done
done

# Over budget: refuses to start and says by how much; nothing is trained or spent.
out=$("$privdiff" run "$tmp/r.toml" --set stage.0.noise_multiplier=0.5 --out "$tmp/run2" 2>&1); code=$?
[ $code -eq 2 ] || fail "over-budget run: exit code $code (want 2): $out"
grep -q "over the target 5 by" <<<"$out" || fail "no over-budget message: $out"
[ ! -e "$tmp/run2" ] || fail "a refused run left a run directory"
# A batch larger than the dataset (20 examples) is refused with the numbers, not capped to q = 1.
out=$("$privdiff" run "$tmp/r.toml" --set stage.0.batch_size=100 --out "$tmp/run3" 2>&1); code=$?
[ $code -eq 2 ] || fail "batch > N: exit code $code (want 2): $out"
grep -q "stage\[0\] 'stage0': batch_size 100 is larger than the dataset (20 examples)" <<<"$out" || fail "no batch message: $out"
[ ! -e "$tmp/run3" ] || fail "a refused run left a run directory"
echo "1 passed, 0 failed"
