#!/usr/bin/env bash
# DP-LoRA on Stable Diffusion's layout (issue 68): a diffusers StableDiffusionPipeline folder (the tiny
# fixture, tests/fixtures/weights/diffusers/sd_tiny) imported as a recipe whose UNet2DConditionModel
# cross-attends to its frozen CLIP text encoder; LoRA on every transformer's attention fine-tuned under
# DP-SGD on a captioned folder; check-mechanism audits x's caption alone; the run samples from public
# prompts and refuses a private caption; exported to diffusers with the LoRA folded in and the guarantee
# in the metadata (diffusers loads it, strictly, where it is installed); the SD 1.5 recipe validates on
# the fixture's layout.
# Usage: stable_diffusion_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
export PRIVDIFF_RECORD_KEY="$tmp/record.key"
passed=0
sd="$fixtures/weights/diffusers/sd_tiny"

# 1. The pipeline imports: every tensor of its UNet loads, its text encoder and tokenizer are named.
out=$("$privdiff" weights import "$sd" --recipe "$tmp/base.toml" 2>&1) || fail "import: $out"
grep -q "UNet2DConditionModel (config.json) in an AutoencoderKL's latent space, on its pipeline's CLIP text encoder" <<<"$out" ||
  fail "import did not say what it read: $out"
grep -q "^text_encoder = \"$sd/text_encoder\"" "$tmp/base.toml" && grep -q "^tokenizer = \"$sd/tokenizer\"" "$tmp/base.toml" ||
  fail "the recipe does not name the text side: $(cat "$tmp/base.toml")"
passed=$((passed + 1))

# 2. A captioned folder of 16x16 faces-to-be, DP-LoRA on the transformers' attention at epsilon 10.
captioned_faces "$tmp/faces" 16
{ sed 's/^steps = 50/steps = 2/' "$tmp/base.toml"; cat <<TOML
$(captioned_faces_tables "$tmp/faces" 16)
[adapter]
type = "lora"
rank = 2
targets = 'attn[12]\.(to_q|to_k|to_v|to_out\.0)$'
[[stage]]
mechanism = "dpsgd"
train = "adapter"
batch_size = 2
steps = 2
secure_noise = false
TOML
} > "$tmp/sd.toml"
out=$("$privdiff" validate "$tmp/sd.toml" 2>&1) || fail "validate: $out"
out=$("$privdiff" run "$tmp/sd.toml" --out "$tmp/run" 2>&1) || fail "run: $out"
python3 - "$tmp/run" <<'PY' || fail "the run's record"
import json, sys
rdp = [r for r in json.load(open(f"{sys.argv[1]}/summary.json"))["privacy"] if r["accountant"] == "rdp"][0]
assert 0 < rdp["epsilon"] <= 10.0 + 1e-9, rdp
unit = json.load(open(f"{sys.argv[1]}/privacy.json"))["privacy_unit"]
assert "caption" in unit, unit
PY
passed=$((passed + 1))

# 3. The check sees the caption: a record is an image and its caption.
out=$("$privdiff" check-mechanism "$tmp/sd.toml" --no-audit --replays 4 2>&1) || fail "check-mechanism: $out"
grep -q "a record there is an image and its caption" <<<"$out" || fail "check-mechanism did not caption: $out"
passed=$((passed + 1))

# 4. Public prompts sample; a private caption is refused before anything is drawn.
out=$("$privdiff" sample "$tmp/run" --prompt "a woman in a red coat" --count 2 --out "$tmp/s/p" 2>&1) || fail "public prompt: $out"
[ -s "$tmp/s/p-prompts.txt" ] || fail "no prompts beside the samples"
out=$("$privdiff" sample "$tmp/run" --prompt "the man is SMILING" --count 2 --out "$tmp/s/q" 2>&1); code=$?
[ $code = 2 ] && grep -q "is one of the private captions" <<<"$out" || fail "private prompt: exit $code: $out"
passed=$((passed + 1))

# 5. Exported to diffusers: the base model's names only (the LoRA folded in), the guarantee in the metadata.
out=$("$privdiff" weights export "$tmp/run" --format diffusers -o "$tmp/export" 2>&1) || fail "export: $out"
python3 - "$tmp/export" "$sd/unet/diffusion_pytorch_model.safetensors" <<'PY' || fail "the export's tensors"
import json, struct, sys
def header(path):
    raw = open(path, "rb").read()
    return json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
mine, base = header(f"{sys.argv[1]}/diffusion_pytorch_model.safetensors"), header(sys.argv[2])
meta = mine.pop("__metadata__"); base.pop("__metadata__", None)
assert set(mine) == set(base), sorted(set(mine) ^ set(base))[:5]
assert all(mine[k]["shape"] == base[k]["shape"] for k in base)
assert float(meta["privdiff.epsilon"]) <= 10.0 + 1e-9 and meta["privdiff.delta"] == "1e-05", meta.get("privdiff.epsilon")
assert json.load(open(f"{sys.argv[1]}/config.json"))["_class_name"] == "UNet2DConditionModel"
assert "UNet2DConditionModel.from_pretrained" in open(f"{sys.argv[1]}/README.md").read()
PY
if python3 -c "import diffusers" 2> /dev/null; then
  python3 "$(dirname "$0")/../../scripts/weights_fixtures/check_diffusers_export.py" "$tmp/export" ||
    fail "diffusers does not load the export"
else
  echo "skipped: the diffusers load check (python3 has no diffusers; scripts/weights_fixtures/check_diffusers_export.py runs it)"
fi
passed=$((passed + 1))

# 6. The SD 1.5 recipe validates on the fixture's layout (a pipeline folder and MM-CelebA-HQ-style captions).
mkdir -p "$tmp/mm/CelebA-HQ-img" "$tmp/mm/celeba-caption"
for i in 0 1 2 3 4 5; do
  cp "$tmp/faces/$i.png" "$tmp/mm/CelebA-HQ-img/$i.png"
  printf 'The person %s has feature one.\nThe person %s has feature two.\n' $i $i > "$tmp/mm/celeba-caption/$i.txt"
done
recipe="$(dirname "$0")/../../examples/recipes/dplora_sd15_celebahq_eps10.toml"
out=$("$privdiff" validate "$recipe" --set run.init_from="$sd/unet" --set model.config="$sd/unet" \
  --set model.autoencoder="$sd/vae" --set model.text_encoder="$sd/text_encoder" --set model.tokenizer="$sd/tokenizer" \
  --set data.path="$tmp/mm/CelebA-HQ-img" --set data.caption_path="$tmp/mm/celeba-caption" --set data.image_size=16 --set model.image_size=16 \
  --set stage.0.batch_size=2 --set stage.0.physical_batch_size=1 2>&1) || fail "the SD 1.5 recipe on its layout: $out"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
