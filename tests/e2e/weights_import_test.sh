#!/usr/bin/env bash
# privdiff weights import: DPDM's network (a tiny one built by DPDM's own code and converted as a
# published checkpoint is) is recognised, its architecture read off the weights, and the recipe tables
# it prints sample the model (privdiff sample RECIPE) and start a DP fine-tuning run; the weights written by --out and the DPDM-layout file itself
# (init_from reads its NIN layers transposed) train to the same model, bit for bit. The same for a
# CompVis latent diffusion model with its config.
# Usage: weights_import_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
# same_tensors A B: the two safetensors files hold the same tensors, bit for bit (metadata aside).
same_tensors() {
  python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    return header, raw[8 + n:]
sys.exit(0 if tensors(sys.argv[1]) == tensors(sys.argv[2]) else 1)
PY
}
# trains_alike RECIPE SOURCE NAME: the recipe (its init_from the imported copy) and the same recipe
# started from SOURCE itself both fine-tune under DP with the imported-weights caveat, and export the
# same tensors, bit for bit.
trains_alike() {
  local recipe=$1 source=$2 name=$3 run out
  out=$("$privdiff" run "$recipe" --out "$tmp/$name-from-copy" 2>&1) || fail "$name: the recipe did not run: $out"
  grep -q "CAVEAT      init_from: weights from outside privdiff" <<<"$out" || fail "$name: no imported-weights caveat: $out"
  out=$("$privdiff" run "$recipe" --out "$tmp/$name-from-source" --set "run.init_from=\"$source\"" 2>&1) \
    || fail "$name: init_from $source failed: $out"
  for run in from-copy from-source; do
    "$privdiff" weights export "$tmp/$name-$run" -o "$tmp/$name-$run-export" > /dev/null 2>&1 || fail "export of $name-$run failed"
  done
  same_tensors "$tmp/$name-from-copy-export/model.safetensors" "$tmp/$name-from-source-export/model.safetensors" \
    || fail "$name: the imported copy and $source trained to different models"
}
dpdm="$fixtures/weights/dpdm/ncsnpp_classes/model.safetensors"
out=$("$privdiff" weights inspect "$dpdm" 2>&1) || fail "inspect failed: $out"
grep -q "architecture: DPDM's NCSN++ network (all_modules.\*), which privdiff's dpdm_ncsnpp model runs" <<<"$out" \
  || fail "DPDM's network not recognised: $out"
out=$("$privdiff" weights import "$dpdm" 2>&1); code=$?
[ "$code" = 2 ] || fail "import without the image size: exit $code, not 2"
grep -q "give --image-size" <<<"$out" || fail "the refusal does not say what to give: $out"
out=$("$privdiff" weights import "$dpdm" --image-size 28 -o "$tmp/imported" --recipe "$tmp/import.toml" 2>&1) \
  || fail "import failed: $out"
grep -q "nf 8, ch_mult \[1, 2, 2\], 2 blocks per level, attention at \[7\], 3 classes" <<<"$out" \
  || fail "the architecture read off the weights is wrong: $out"
grep -q "every tensor loads by name and shape" <<<"$out" || fail "no load check: $out"
[ -s "$tmp/imported/model.safetensors" ] || fail "--out wrote no model.safetensors"
# The recipe it wrote samples the model without training (a published checkpoint's samples).
out=$(cd "$tmp" && "$privdiff" sample "$tmp/import.toml" -n 6 --set sampler.steps=2 2>&1) || fail "sample RECIPE failed: $out"
[ -s "$tmp/samples/import/ddim-6-images-idx3-ubyte.gz" ] || fail "sample RECIPE wrote no images: $out"
grep -q "note: weights from outside privdiff" <<<"$out" || fail "sample RECIPE says nothing of the weights' privacy: $out"
grep -v init_from "$tmp/import.toml" > "$tmp/no-weights.toml"
out=$("$privdiff" sample "$tmp/no-weights.toml" -n 6 2>&1); code=$?
[ "$code" = 2 ] && grep -q "has no \[run\] init_from naming the weights" <<<"$out" || fail "sample of a recipe without weights: exit $code: $out"
# Completed with data and a stage, the recipe fine-tunes it under DP.
sed -i 's/^steps = 50$/steps = 2/' "$tmp/import.toml"
attention_finetune_tables "path = \"$fixtures/data/tiny-fashion-mnist\"" "classes = [0, 1, 2]" >> "$tmp/import.toml"
trains_alike "$tmp/import.toml" "$dpdm" dpdm
out=$("$privdiff" weights import "$fixtures/weights/diffusers/autoencoder_kl_small" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "a diffusers AutoencoderKL, which privdiff runs only as a latent UNet.s autoencoder" <<<"$out" \
  || fail "an AutoencoderKL import: exit $code: $out"

# A CompVis latent diffusion model (DP-LDM's kind, built by CompVis's code): imported with its config,
# sampled, fine-tuned attention-only under DP on colour images; the converted file itself (its
# schedule buffers skipped) trains to the same model as the imported copy.
ldm="$fixtures/weights/compvis/ldm_dpldm/model.safetensors"
out=$("$privdiff" weights inspect "$ldm" 2>&1) || fail "inspect of the LDM failed: $out"
grep -q "and its config (ldm.config), which privdiff's compvis_ldm model runs" <<<"$out" || fail "the LDM is not recognised: $out"
out=$("$privdiff" weights import "$ldm" --image-size 32 -o "$tmp/ldm-imported" --recipe "$tmp/ldm.toml" 2>&1) \
  || fail "import of the LDM failed: $out"
grep -q "CompVis latent diffusion (UNet 32 channels, SpatialTransformers; KL autoencoder, 3 latent channels; 4 classes)" <<<"$out" \
  || fail "the LDM's architecture is wrong: $out"
[ -s "$tmp/ldm-imported/config.json" ] || fail "--out wrote no config.json for the LDM"
out=$(cd "$tmp" && "$privdiff" sample "$tmp/ldm.toml" -n 4 --set sampler.steps=2 2>&1) || fail "sampling the LDM failed: $out"
[ -s "$tmp/samples/ldm/ddim-4-images-idx3-ubyte.gz" ] || fail "no LDM samples: $out"
sed -i 's/^steps = 50$/steps = 2/' "$tmp/ldm.toml"
attention_finetune_tables 'dataset = "cifar10"' "path = \"$fixtures/cifar10/cifar-10-batches-bin\"" \
  "classes = [0, 1, 2, 3]" >> "$tmp/ldm.toml"
trains_alike "$tmp/ldm.toml" "$ldm" ldm
echo "weights import: all checks passed"
