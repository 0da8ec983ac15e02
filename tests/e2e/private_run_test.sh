#!/usr/bin/env bash
# privdiff run, end to end: a tiny DPDM run on the tiny Fashion-MNIST fixture with noise
# calibrated to the target; checks the run directory and that the ledger matches the plan.
# Usage: private_run_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
cat > "$tmp/r.toml" <<TOML
[run]
seed = 1
[privacy]
epsilon = 5.0
delta = 1e-5
accountant = "rdp"
report = ["prv"]
[data]
path = "$fixtures/data/tiny-fashion-mnist"
[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [14]
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 3
ema = 0.9
[sampler]
type = "edm_heun"
steps = 3
guidance = 0.5
TOML
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/run" 2>&1) || fail "run failed: $out"
echo "$out"
grep -q "calibrated stage 'stage0' noise multiplier" <<<"$out" || fail "no calibration line"
grep -q "step 3/3" <<<"$out" || fail "no progress line"
grep -q "samples: .*samples.png (100 images" <<<"$out" || fail "no sample grid line"
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
PY
# The same recipe and seed give the same run (initial weights, batches, noise, loss draws).
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/again" 2>&1) || fail "second run failed: $out"
python3 - "$tmp/run" "$tmp/again" <<'PY' || fail "the same seed gave a different run"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f"{d}/metrics.jsonl")] for d in sys.argv[1:3])
assert a == b, (a, b)
PY
# Over budget: refuses to start and says by how much; nothing is trained or spent.
out=$("$privdiff" run "$tmp/r.toml" --set stage.0.noise_multiplier=0.5 --out "$tmp/run2" 2>&1) && fail "over-budget run started"
grep -q "over the target 5 by" <<<"$out" || fail "no over-budget message: $out"
python3 -c "import json,sys; assert json.load(open('$tmp/run2/ledger.json'))['entries'] == []" || fail "ledger not empty"
echo "1 passed, 0 failed"
