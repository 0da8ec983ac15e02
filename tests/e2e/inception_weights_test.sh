#!/usr/bin/env bash
# Inception weights as privdiff eval, run and validate meet them (issue 37): FIDs are comparable
# with published ones only on pytorch-fid's weights, so anything else is bad input (exit code 2,
# one line naming the file and what it is) when the evaluator is made — before any data is read
# or any training step is taken:
#  1. eval: a missing file, a PNG, a privdiff checkpoint, an empty or truncated file, the legacy
#     format, and the width/16 test network without allow_unverified_weights (by key and by
#     $PRIVDIFF_INCEPTION_WEIGHTS);
#  2. run and validate with such weights in [[eval]]: refused before training, no run directory;
#  3. eval with allow_unverified_weights = true: scored, and every report says not comparable
#     (metric names, provenance, caveats).
# Usage: inception_weights_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny_data="$fixtures/data/tiny-fashion-mnist"
cifar="$fixtures/cifar10/cifar-10-batches-bin"
tiny_weights="$fixtures/inception/tiny_fid_inception.pth"
passed=0

# A tiny run (its checkpoint.pt and samples.png are wrong kinds of weights), and 12 RGB 32x32
# samples with labels to score against the CIFAR-10 fixture.
cat > "$tmp/r.toml" <<TOML
[run]
seed = 3
[privacy]
epsilon = 5.0
delta = 1e-5
[data]
path = "$tiny_data"
$tiny_model
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 2
[sampler]
type = "edm_heun"
steps = 2
TOML
"$privdiff" run "$tmp/r.toml" --out "$tmp/run" >/dev/null 2>&1 || fail "tiny run failed"
[ -s "$tmp/run/checkpoint.pt" ] && [ -s "$tmp/run/samples.png" ] || fail "the tiny run wrote no checkpoint.pt or samples.png"
python3 - "$tmp" <<'PY'
import random, struct, sys
random.seed(1)
n = 12
with open(f"{sys.argv[1]}/s-images-idx3-ubyte", "wb") as f:
    f.write(struct.pack(">IIIII", 0x0804, n, 3, 32, 32) + bytes(random.randrange(256) for _ in range(n * 3 * 32 * 32)))
with open(f"{sys.argv[1]}/s-labels-idx1-ubyte", "wb") as f:
    f.write(struct.pack(">II", 0x0801, n) + bytes(random.randrange(10) for _ in range(n)))
PY
: > "$tmp/empty.pth"
head -c 500000 "$tiny_weights" > "$tmp/truncated.pth"

# refused WEIGHTS EXPECTED [ENV...]: privdiff eval with inception.weights=WEIGHTS (or, for "-", none
# and the environment given) exits 2 with one line holding EXPECTED.
refused() {
  local weights=$1 expected=$2 out code
  shift 2
  if [ "$weights" = - ]; then
    out=$(env "$@" "$privdiff" eval "$tmp/s-images-idx3-ubyte" --real cifar10 --real-path "$cifar" --evaluator inception 2>&1)
  else
    out=$("$privdiff" eval "$tmp/s-images-idx3-ubyte" --real cifar10 --real-path "$cifar" --evaluator inception \
          --set inception.weights="$weights" 2>&1)
  fi
  code=$?
  [ $code -eq 2 ] || fail "eval with weights $weights $*: exit $code (want 2): $out"
  [ "$(wc -l <<<"$out")" -eq 1 ] || fail "eval with weights $weights $*: not one line: $out"
  grep -qF -- "$expected" <<<"$out" || fail "eval with weights $weights $*: no '$expected' in: $out"
}

# 1. privdiff eval
refused "$tmp/absent.pth" "inception.weights: $tmp/absent.pth is not a file"
refused "$tmp/run/samples.png" "$tmp/run/samples.png: a PNG image, not Inception weights (expected pytorch-fid's pt_inception-2015-12-05-6726825d.pth converted by scripts/convert_inception_weights.py)"
refused "$tmp/run/checkpoint.pt" "$tmp/run/checkpoint.pt: a LibTorch archive of modules (torch::save; a privdiff checkpoint.pt is one), not Inception weights"
refused "$tmp/empty.pth" "$tmp/empty.pth: an empty file, not Inception weights"
refused "$tmp/truncated.pth" "$tmp/truncated.pth: an unreadable or damaged torch.save file"
refused "$fixtures/inception/legacy_format_state.pth" "legacy_format_state.pth: a pickle in torch.save's legacy format (torch < 1.6, as pytorch-fid's pt_inception-2015-12-05-6726825d.pth is), which LibTorch cannot read; convert it once with: /usr/bin/python3 scripts/convert_inception_weights.py"
width16="$tiny_weights: tensor 'Conv2d_1a_3x3.conv.weight' has shape [2, 3, 3, 3], expected [32, 3, 3, 3]: a width/16 Inception-V3 (a test network), not pytorch-fid's pt_inception-2015-12-05-6726825d.pth; FIDs on it are not comparable with published ones (for tests, allow_unverified_weights = true accepts them"
refused "$tiny_weights" "$width16"
refused - "$width16" PRIVDIFF_INCEPTION_WEIGHTS="$tiny_weights"
passed=$((passed + 1))

# 2. run and validate: refused before training, nothing written.
for weights in "$tmp/absent.pth" "$tiny_weights" "$tmp/run/checkpoint.pt"; do
  printf '[[eval]]\nsamples = 20\nevaluators = ["inception"]\n[eval.inception]\nweights = "%s"\n' "$weights" \
    | cat "$tmp/r.toml" - > "$tmp/r-eval.toml"
  out=$("$privdiff" run "$tmp/r-eval.toml" --out "$tmp/refused-run" 2>&1); code=$?
  [ $code -eq 2 ] || fail "run with [eval.inception] weights $weights: exit $code (want 2): $out"
  [ ! -e "$tmp/refused-run" ] || fail "run with [eval.inception] weights $weights wrote $tmp/refused-run"
  validate=$("$privdiff" validate "$tmp/r-eval.toml" 2>&1); code=$?
  [ $code -eq 2 ] || fail "validate with [eval.inception] weights $weights: exit $code (want 2): $validate"
  for o in "$out" "$validate"; do
    # A recipe's refusal: one line at the key's place in the file, then the count ("1 error").
    [ "$(wc -l <<<"$o")" -eq 2 ] && [ "$(tail -1 <<<"$o")" = "1 error" ] || fail "[eval.inception] weights $weights: not one error: $o"
    grep -qF "r-eval.toml:26:11: eval[0].inception.weights: $weights" <<<"$o" || fail "[eval.inception] weights $weights: not placed at its key in: $o"
  done
done
passed=$((passed + 1))

# 3. With the opt-in: scored, and labelled not comparable in eval.json's metrics, provenance and caveats.
json=$("$privdiff" eval "$tmp/s-images-idx3-ubyte" --real cifar10 --real-path "$cifar" --evaluator inception \
       --set inception.weights="$tiny_weights" --set inception.allow_unverified_weights=true --set inception.is_splits=2 \
       --json 2>"$tmp/log") || fail "eval with allow_unverified_weights: $(cat "$tmp/log")"
python3 - "$json" <<'PY' || fail "eval with allow_unverified_weights: $json"
import json, sys
r = json.loads(sys.argv[1])
ev = r["evaluators"]["inception"]
assert list(ev["metrics"]) == sorted(m + "_not_comparable" for m in
    ["fid", "fid_floor", "inception_score", "inception_score_std", "precision", "recall"]), ev["metrics"]
assert ev["provenance"].startswith("NOT COMPARABLE with published FIDs: "), ev["provenance"]
assert "UNVERIFIED weights tiny_fid_inception.pth (tensor 'Conv2d_1a_3x3.conv.weight'" in ev["provenance"], ev["provenance"]
assert ev["caveats"][0].startswith("not comparable with published FIDs: the Inception weights tiny_fid_inception.pth"), ev
assert any(c.startswith("inception: not comparable with published FIDs") for c in r["caveats"]), r["caveats"]
PY
grep -q "NOT COMPARABLE: FID" "$tmp/log" || fail "the log does not say not comparable: $(cat "$tmp/log")"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
