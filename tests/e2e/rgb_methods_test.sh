#!/usr/bin/env bash
# Every method on colour data (issue 37), end to end and tiny, in both colour formats: the CIFAR-10
# binary fixture and the same images as an image folder of RGB PNGs. DPDM; DP-FETA (mean and mode
# central images, a warm-up on the release, DP-SGD), killed after its release and resumed (one
# release on the ledger); DP-LDM (autoencoder and UNet pretrained on public colour images, attention
# fine-tuned privately); fine-tuning from a public run (attention, LoRA, IA3); every sampler through
# privdiff sample; every evaluator through privdiff eval. Proves the plumbing on 32x32x3, not numbers.
# Usage: rgb_methods_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
cifar="$fixtures/cifar10/cifar-10-batches-bin"
weights="$fixtures/inception/tiny_fid_inception.pth"  # width/16: scored only as unverified (not comparable)
# The CIFAR fixture's training images as RGB PNGs (one folder per class), and 20 public colour
# images of other patterns (two per class) for pretraining.
python3 - "$cifar" "$tmp" <<'PY'
import os, random, struct, sys, zlib
cifar, tmp = sys.argv[1:3]
def png(path, rgb):  # rgb: 32*32*3 bytes, row-major pixels
    chunk = lambda t, b: struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
    rows = b"".join(b"\0" + rgb[r * 96:(r + 1) * 96] for r in range(32))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 32, 32, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
i = 0
for b in range(1, 6):
    data = open(f"{cifar}/data_batch_{b}.bin", "rb").read()
    for r in range(len(data) // 3073):
        record = data[r * 3073:(r + 1) * 3073]
        planes = record[1:]
        rgb = bytes(planes[c * 1024 + p] for p in range(1024) for c in range(3))
        os.makedirs(f"{tmp}/folder/c{record[0]}", exist_ok=True)
        png(f"{tmp}/folder/c{record[0]}/{i:03d}.png", rgb); i += 1
random.seed(4)
for k in range(20):
    os.makedirs(f"{tmp}/public/c{k % 10}", exist_ok=True)
    colour = [random.randrange(256) for _ in range(3)]
    rgb = bytes(min(255, colour[c] + 60 * ((x // 4 + y // 4) % 2)) for y in range(32) for x in range(32) for c in range(3))
    png(f"{tmp}/public/c{k % 10}/{k:02d}.png", rgb)
PY
[ "$(find "$tmp/folder" -name '*.png' | wc -l)" = 40 ] || fail "the image folder holds $(find "$tmp/folder" -name '*.png' | wc -l) images, not 40"
cifar_data="dataset = \"cifar10\"
path = \"$cifar\""
folder_data="dataset = \"image_folder\"
path = \"$tmp/folder\"
image_size = 32
channels = 3"
public_data="dataset = \"image_folder\"
path = \"$tmp/public\"
image_size = 32
channels = 3
public = true"
pixel_model='[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [16]
image_size = 32
image_channels = 3
num_classes = 10
[sampler]
type = "edm_heun"
steps = 2'
privacy='[privacy]
epsilon = 8.0
delta = 1e-5'
dpdm_stage='[[stage]]
name = "train"
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 2'
run_ok() {  # NAME RECIPE_FILE [ARGS...]: runs it into $tmp/NAME, fails naming NAME
  local name=$1 file=$2
  shift 2
  out=$("$privdiff" run "$file" --out "$tmp/$name" "$@" 2>&1) || fail "$name: $out"
  [ -s "$tmp/$name/samples.png" ] || fail "$name: no samples.png"
}
passed=0

# 1. DPDM in both formats.
for format in cifar folder; do
  data=$([ $format = cifar ] && echo "$cifar_data" || echo "$folder_data")
  printf '%s\n[data]\n%s\n%s\n%s\n' "$privacy" "$data" "$pixel_model" "$dpdm_stage" > "$tmp/dpdm-$format.toml"
  run_ok "dpdm-$format" "$tmp/dpdm-$format.toml"
done
passed=$((passed + 1))

# 2. DP-FETA in both formats, mean and mode central images.
feta() {  # FILE DATA STATISTIC
  printf '%s\n[data]\n%s\n%s\n' "$privacy" "$2" "$pixel_model" > "$1"
  cat >> "$1" <<TOML
[[stage]]
name = "central"
mechanism = "central_images"
statistic = "$3"
queries = 2
sampling_rate = 0.5
noise_multiplier = 5.0
[[stage]]
name = "warmup"
mechanism = "nonprivate"
data = "central"
batch_size = 10
steps = 2
augment_ops = 2
$dpdm_stage
TOML
}
for format in cifar folder; do
  data=$([ $format = cifar ] && echo "$cifar_data" || echo "$folder_data")
  for statistic in mean mode; do
    feta "$tmp/feta-$format-$statistic.toml" "$data" $statistic
    run_ok "feta-$format-$statistic" "$tmp/feta-$format-$statistic.toml"
    grep -q "released 20 images as data 'central'" <<<"$out" || fail "feta $format $statistic: no release: $out"
  done
done
# Killed right after its release, then resumed: the release is reused, never queried again.
PRIVDIFF_TEST_KILL_AT=released "$privdiff" run "$tmp/feta-cifar-mean.toml" --out "$tmp/feta-killed" > "$tmp/kill.log" 2>&1
[ $? -eq 137 ] || fail "kill after the release: $(tail -3 "$tmp/kill.log")"
out=$("$privdiff" run --resume "$tmp/feta-killed" 2>&1) || fail "resume after the release: $out"
grep -q "reusing" <<<"$out" || fail "the resumed run did not reuse its release: $out"
python3 - "$tmp/feta-killed" "$tmp/feta-cifar-mean" <<'PY' || fail "the resumed DP-FETA run's ledger differs from an uninterrupted one's"
import json, sys
killed, whole = (json.load(open(f"{d}/ledger.json"))["entries"] for d in sys.argv[1:3])
assert killed == whole, (killed, whole)
PY
passed=$((passed + 1))

# 3. DP-LDM: autoencoder and UNet pretrained on public colour images, attention fine-tuned privately.
for format in cifar folder; do
  data=$([ $format = cifar ] && echo "$cifar_data" || echo "$folder_data")
  cat > "$tmp/ldm-$format.toml" <<TOML
$privacy
[data.public]
$public_data
[data.private]
$data
[model]
type = "latent_unet"
image_size = 32
image_channels = 3
num_classes = 10
autoencoder_channels = 8
autoencoder_channel_mult = [1, 2]
latent_channels = 2
channels = 8
channel_mult = [1, 2]
attention_resolutions = [16, 8]
[sampler]
type = "edm_heun"
steps = 2
[[stage]]
name = "autoencoder"
mechanism = "nonprivate"
data = "public"
train = "autoencoder"
batch_size = 8
steps = 2
ema = 0
[[stage]]
name = "pretrain"
mechanism = "nonprivate"
data = "public"
batch_size = 8
steps = 2
[[stage]]
name = "finetune"
mechanism = "dpsgd"
data = "private"
train = "attention"
batch_size = 4
steps = 2
TOML
  run_ok "ldm-$format" "$tmp/ldm-$format.toml"
done
passed=$((passed + 1))

# 4. Fine-tuning from a public colour run: attention only, LoRA, IA3.
printf '[data]\n%s\n%s\n[[stage]]\nmechanism = "nonprivate"\nbatch_size = 8\nsteps = 2\n' "$public_data" "$pixel_model" \
  > "$tmp/pretrain.toml"
run_ok pretrain "$tmp/pretrain.toml"
for format in cifar folder; do
  data=$([ $format = cifar ] && echo "$cifar_data" || echo "$folder_data")
  for way in attention lora ia3; do
    adapter=$([ $way = attention ] || printf '[adapter]\ntype = "%s"\n' $way)
    train=$([ $way = attention ] && echo attention || echo adapter)
    printf '%s\n[run]\ninit_from = "%s"\n[data]\n%s\n%s\n%s\n[[stage]]\nmechanism = "dpsgd"\ntrain = "%s"\nbatch_size = 4\nsteps = 2\n' \
      "$privacy" "$tmp/pretrain" "$data" "$pixel_model" "$adapter" "$train" > "$tmp/ft-$format-$way.toml"
    run_ok "ft-$format-$way" "$tmp/ft-$format-$way.toml"
  done
done
passed=$((passed + 1))

# 5. Every sampler on a colour run, and every evaluator on its samples (against CIFAR-10's test split).
for sampler in ddpm ddim edm_heun edm_churn; do
  out=$("$privdiff" sample "$tmp/dpdm-cifar" --sampler $sampler --set sampler.steps=2 --count 20 --out "$tmp/s-$sampler" 2>&1) \
    || fail "sample --sampler $sampler: $out"
  [ -s "$tmp/s-$sampler-grid.png" ] || fail "sampler $sampler wrote no grid"
done
json=$("$privdiff" eval "$tmp/s-edm_heun-images-idx3-ubyte.gz" --run "$tmp/dpdm-cifar" --real cifar10 --real-path "$cifar" \
       --evaluator dpdm_classifiers,feature_cnn,benchmark_classifiers,inception --set inception.weights="$weights" \
       --set inception.allow_unverified_weights=true --set inception.is_splits=2 \
       --set 'benchmark_classifiers.networks=["resnet"]' --set benchmark_classifiers.batch_size=8 \
       --classifiers logreg --epochs 1 --json 2>"$tmp/log") || fail "eval of colour samples: $(cat "$tmp/log")"
python3 - "$json" <<'PY' || fail "colour eval: $json"
import json, sys
r = json.loads(sys.argv[1])
assert set(r["evaluators"]) == {"dpdm_classifiers", "feature_cnn", "benchmark_classifiers", "inception"}, r
assert r["counts"]["samples"] == 20 and r["reference"] == "test", r
assert "fid_not_comparable" in r["evaluators"]["inception"]["metrics"], r  # the width/16 test weights
PY
passed=$((passed + 1))
echo "$passed passed, 0 failed"
