#!/usr/bin/env bash
# privdiff weights import: DPDM's network (a tiny one built by DPDM's own code and converted as a
# published checkpoint is) is recognised, its architecture read off the weights, and the recipe tables
# it prints start a DP fine-tuning run; the weights written by --out and the DPDM-layout file itself
# (init_from reads its NIN layers transposed) train to the same model, bit for bit.
# Usage: weights_import_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
dpdm="$fixtures/weights/dpdm/ncsnpp_classes/model.safetensors"
out=$("$privdiff" weights inspect "$dpdm" 2>&1) || fail "inspect failed: $out"
grep -q "architecture: DPDM's NCSN++ network (all_modules.\*), which privdiff's dpdm_ncsnpp model runs" <<<"$out" \
  || fail "DPDM's network not recognised: $out"
out=$("$privdiff" weights import "$dpdm" 2>&1); code=$?
[ "$code" = 2 ] || fail "import without the image size: exit $code, not 2"
grep -q "give --image-size" <<<"$out" || fail "the refusal does not say what to give: $out"
out=$("$privdiff" weights import "$dpdm" --image-size 28 -o "$tmp/imported" 2>&1) || fail "import failed: $out"
grep -q "nf 8, ch_mult \[1, 2, 2\], 2 blocks per level, attention at \[7\], 3 classes" <<<"$out" \
  || fail "the architecture read off the weights is wrong: $out"
grep -q "every tensor loads by name and shape" <<<"$out" || fail "no load check: $out"
[ -s "$tmp/imported/model.safetensors" ] || fail "--out wrote no model.safetensors"
# The printed tables, completed with data, a stage and a sampler, are a recipe that runs.
sed -n '/^\[run\]/,$p' <<<"$out" > "$tmp/import.toml"
cat >> "$tmp/import.toml" <<TOML
[privacy]
epsilon = 5.0
delta = 1e-5
accountant = "rdp"
[data]
path = "$fixtures/data/tiny-fashion-mnist"
classes = [0, 1, 2]
[[stage]]
mechanism = "dpsgd"
train = "attention"
batch_size = 4
steps = 2
secure_noise = false
[sampler]
type = "ddim"
steps = 2
TOML
out=$("$privdiff" run "$tmp/import.toml" --out "$tmp/from-import" 2>&1) || fail "the printed recipe did not run: $out"
grep -q "CAVEAT      init_from: weights from outside privdiff" <<<"$out" || fail "no imported-weights caveat: $out"
out=$("$privdiff" run "$tmp/import.toml" --out "$tmp/from-dpdm-file" --set "run.init_from=\"$dpdm\"" 2>&1) \
  || fail "init_from the DPDM-layout file failed: $out"
for run in from-import from-dpdm-file; do
  "$privdiff" weights export "$tmp/$run" -o "$tmp/$run-export" > /dev/null 2>&1 || fail "export of $run failed"
done
python3 - "$tmp/from-import-export/model.safetensors" "$tmp/from-dpdm-file-export/model.safetensors" <<'PY' \
  || fail "the imported weights and the DPDM-layout file trained to different models"
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    return header, raw[8 + n:]
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a[0] == b[0] and a[1] == b[1]
PY
out=$("$privdiff" weights import "$fixtures/weights/diffusers/autoencoder_kl_small" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "a diffusers AutoencoderKL, which no privdiff model plugin runs yet" <<<"$out" \
  || fail "an AutoencoderKL import: exit $code: $out"
echo "weights import: all checks passed"
