#!/usr/bin/env bash
# Speed of a text-conditioned DP step (#68) on 512 captioned 32x32 RGB images, expected batch 64, STEPS
# steps each, one after another; prints a markdown table of examples per second (summary.json) and each
# one's ratio to the non-private step.
#   compvis (default): the txt2img-layout LDM of tests/fixtures/text/compvis_txt2img (CompVis's UNet with
#     SpatialTransformers attending to a 2-layer BERTEmbedder), three ways: non-private, DP-SGD of the
#     SpatialTransformers and the text encoder (train = "attention", DP-LDM's text-to-image selection),
#     and DP-SGD of everything but the autoencoder.
#   sd: Stable Diffusion's layout, the fixture pipeline tests/fixtures/weights/diffusers/sd_tiny (its
#     UNet2DConditionModel on the frozen CLIP text encoder), LoRA rank 4 on every transformer's attention:
#     non-private, DP-SGD of the LoRA (DP-LoRA), and DP-SGD of the transformers (train = "attention").
# Usage: bench/txt2img_step_speed.sh [STEPS] [compvis|sd]   (default 20 compvis; PRIVDIFF = the binary,
# default build/bin/privdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
privdiff=${PRIVDIFF:-build/bin/privdiff}
steps=${1:-20}
layout=${2:-compvis}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp/images" <<'PY'
import json, os, random, struct, sys, zlib
d = sys.argv[1]
os.makedirs(d)
random.seed(0)
words = ["woman", "man", "smiling", "wavy hair", "a hat", "glasses", "young", "old", "a beard", "lipstick"]
def png(path, pixels):
    chunk = lambda t, b: struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
    rows = b"".join(b"\0" + pixels[r * 96:(r + 1) * 96] for r in range(32))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
with open(f"{d}/metadata.jsonl", "w") as f:
    for i in range(512):
        png(f"{d}/{i:04d}.png", bytes(random.randrange(256) for _ in range(32 * 32 * 3)))
        f.write(json.dumps({"file_name": f"{i:04d}.png", "text": "a photo of a " + " with ".join(random.sample(words, 3))}) + "\n")
PY
ldm=tests/fixtures/text/compvis_txt2img/model.safetensors
sd=$PWD/tests/fixtures/weights/diffusers/sd_tiny
if [ "$layout" = sd ]; then
  init_from=$sd/unet
  model=$(printf '[model]\ntype = "diffusers_unet"\nconfig = "%s/unet"\nautoencoder = "%s/vae"\ntext_encoder = "%s/text_encoder"\ntokenizer = "%s/tokenizer"\nimage_size = 32\nbeta_schedule = "scaled_linear"\nbeta_start = 0.00085\nbeta_end = 0.012\n[adapter]\ntype = "lora"\nrank = 4\ntargets = '"'"'attn[12]\\.(to_q|to_k|to_v|to_out\\.0)$'"'"'' "$sd" "$sd" "$sd" "$sd")
  variants="nonprivate dp-lora dp-attention"
else
  init_from=$ldm
  model=$(printf '[model]\ntype = "compvis_ldm"\nconfig = "%s"\ntokenizer = "tests/fixtures/text/bert_vocab.txt"\nimage_size = 32' "$ldm")
  variants="nonprivate dp-attention dp-all"
fi
cat > "$tmp/recipe.toml" <<TOML
[run]
init_from = "$init_from"
init_from_disjoint = true
checkpoint_every = 0
[privacy]
epsilon = 50.0
delta = 1e-5
accountant = "rdp"
[data]
dataset = "image_folder"
path = "$tmp/images"
layout = "flat"
channels = 3
image_size = 32
captions = "table"
caption_path = "$tmp/images/metadata.jsonl"
$model
[[stage]]
mechanism = "dpsgd"
batch_size = 64
steps = $steps
[sampler]
type = "ddim"
steps = 1
TOML
run() {  # NAME [--set ...]: prints "trainable examples/s" of the stage
  local name=$1
  shift
  "$privdiff" run "$tmp/recipe.toml" --out "$tmp/$name" "$@" > "$tmp/$name.log" 2>&1 || { tail -5 "$tmp/$name.log" >&2; exit 1; }
  python3 -c 'import json,sys; t=json.load(open(sys.argv[1]))["stages"][-1]; print(t["trainable_parameters"], t["examples_per_second"])' "$tmp/$name/summary.json"
}
echo "| stage | trainable parameters | examples/s | vs non-private |"
echo "|---|---|---|---|"
base=""
for variant in $variants; do
  trained=$([ "$layout" = sd ] && echo adapter || echo attention)  # what the non-private stage trains
  case $variant in
    nonprivate) out=$(run "$variant" --set 'stage.0.mechanism="nonprivate"' --set "stage.0.train=\"$trained\"" --set data.public=true) ;;
    dp-lora) out=$(run "$variant" --set 'stage.0.train="adapter"' --set stage.0.secure_noise=false) ;;
    dp-attention) out=$(run "$variant" --set 'stage.0.train="attention"' --set stage.0.secure_noise=false) ;;
    dp-all) out=$(run "$variant" --set stage.0.secure_noise=false) ;;
  esac
  read -r trainable speed <<< "$out"
  [ -z "$base" ] && base=$speed
  python3 -c 'import sys; v,t,s,b=sys.argv[1:]; print(f"| {v} | {int(t):,} | {float(s):.1f} | {float(s)/float(b):.2f}x |")' "$variant" "$trainable" "$speed" "$base"
done
