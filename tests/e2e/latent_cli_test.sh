#!/usr/bin/env bash
# DP-LDM end to end and tiny: one recipe trains a latent_unet's autoencoder and UNet on public glyphs,
# then fine-tunes its attention blocks privately on the tiny Fashion-MNIST fixture. Checks the
# reconstruction and sample grids, that the ledger covers only the private stage, and that the
# private stage leaves the autoencoder and the rest of the UNet bit-identical (against the same
# recipe stopped before it). Then a standalone autoencoder run reused by run.init_from, and the
# refusals a researcher may meet.
# Usage: latent_cli_test.sh PRIVDIFF CHECKPOINT_DIFF FIXTURE_DIR
set -u
privdiff=$1 checkpoint_diff=$2 fixtures=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
codec='image_size = 28
autoencoder_channels = 8
autoencoder_channel_mult = [1, 2]
latent_channels = 2'
data="[data.public]
dataset = \"glyphs\"
characters = \"ABCDEFGHIJ\"
per_class = 3
cache = \"$tmp/glyph-cache\"
[data.private]
path = \"$fixtures/data/tiny-fashion-mnist\""
model="[model]
type = \"latent_unet\"
$codec
channels = 8
channel_mult = [1, 2]
attention_resolutions = [14, 7]
[sampler]
type = \"edm_heun\"
steps = 2"
autoencoder_stage='[[stage]]
name = "autoencoder"
mechanism = "nonprivate"
data = "public"
train = "autoencoder"
batch_size = 8
steps = 3
ema = 0'
pretrain_stage='[[stage]]
name = "pretrain"
mechanism = "nonprivate"
data = "public"
batch_size = 8
steps = 2
ema = 0.5'
private_stage='[[stage]]
name = "finetune"
mechanism = "dpsgd"
data = "private"
train = "attention"
batch_size = 4
steps = 3
max_grad_norm = 0.01
ema = 0.5'
privacy='[privacy]
epsilon = 5.0
delta = 1e-5'
# A fixed thread count: privdiff otherwise follows the machine's load (fewer threads when other processes
# run), and another count sums in another order, so the two runs' public stages would differ by rounding.
threads='[run]
threads = 2'
printf '%s\n' "$threads" "$privacy" "$data" "$model" "$autoencoder_stage" "$pretrain_stage" "$private_stage" > "$tmp/dpldm.toml"
printf '%s\n' "$threads" "$data" "$model" "$autoencoder_stage" "$pretrain_stage" > "$tmp/public-only.toml"
printf '%s\n' "$threads" "$privacy" "$data" "$model" "$pretrain_stage" "$private_stage" > "$tmp/from-autoencoder.toml"

out=$("$privdiff" params "$tmp/dpldm.toml" 2>&1) || fail "params failed: $out"
echo "$out" | grep -q "^  autoencoder .* autoencoder$" || fail "params lacks the autoencoder group: $out"
echo "$out" | grep -Eq "^  attention +[0-9]+ +7 " || fail "params lacks DP-LDM's attention number 7: $out"

out=$("$privdiff" run "$tmp/dpldm.toml" --out "$tmp/dpldm" 2>&1) || fail "the latent run failed: $out"
echo "$out" | grep -q "reconstructions: .*autoencoder-reconstructions.png" || fail "no reconstruction line: $out"
[ -s "$tmp/dpldm/autoencoder-reconstructions.png" ] || fail "no reconstruction grid"
[ -s "$tmp/dpldm/samples.png" ] || fail "no sample grid"
[ ! -e "$tmp/dpldm/finetune-reconstructions.png" ] || fail "a private stage showed reconstructions of private data"
python3 - "$tmp/dpldm" <<'PY' || fail "latent run reports"
import json, sys
run = sys.argv[1]
privacy = json.load(open(run + "/privacy.json"))
assert sum(e["count"] for e in privacy["ledger"]["entries"]) == 3, privacy["ledger"]  # the private stage's 3 steps only
summary = json.load(open(run + "/summary.json"))
assert [s["name"] for s in summary["stages"]] == ["autoencoder", "pretrain", "finetune"], summary["stages"]
assert summary["model"]["type"] == "latent_unet"
PY
# The same recipe without its private stage: the weights the private stage started from.
out=$("$privdiff" run "$tmp/public-only.toml" --out "$tmp/public-only" 2>&1) || fail "the public-only run failed: $out"
frozen=$("$checkpoint_diff" "$tmp/public-only/checkpoint.pt" "$tmp/dpldm/checkpoint.pt" '!_attn|class_embedding') \
  || fail "checkpoint_diff (frozen) failed"
[ "$frozen" = 0 ] || fail "the private stage moved frozen weights (largest change $frozen)"
trained=$("$checkpoint_diff" "$tmp/public-only/checkpoint.pt" "$tmp/dpldm/checkpoint.pt" '_attn|class_embedding') \
  || fail "checkpoint_diff (trained) failed"
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$trained" || fail "the attention blocks did not train"
"$privdiff" sample "$tmp/dpldm" --count 10 --out "$tmp/samples" > /dev/null 2>&1 || fail "sampling the latent run failed"
[ -s "$tmp/samples-grid.png" ] || fail "privdiff sample wrote no grid"

# A standalone autoencoder run, reused by a latent_unet run through run.init_from.
printf '[data]\ndataset = "glyphs"\ncharacters = "ABCDEFGHIJ"\nper_class = 3\ncache = "%s"\n[model]\ntype = "autoencoder"\n%s\n[[stage]]\nmechanism = "nonprivate"\nbatch_size = 8\nsteps = 3\nema = 0\n' \
  "$tmp/glyph-cache" "$codec" > "$tmp/autoencoder.toml"
out=$("$privdiff" run "$tmp/autoencoder.toml" --out "$tmp/autoencoder" 2>&1) || fail "the autoencoder run failed: $out"
ls "$tmp"/autoencoder/*-reconstructions.png > /dev/null 2>&1 \
  || fail "the autoencoder run showed no reconstructions: $(ls "$tmp/autoencoder")"
out=$("$privdiff" run "$tmp/from-autoencoder.toml" --out "$tmp/from-autoencoder" \
  --set "run.init_from=\"$tmp/autoencoder\"" 2>&1) || fail "the latent run from the autoencoder run failed: $out"
echo "$out" | grep -q "init_from: the autoencoder run's weights fill its part of this latent_unet" || fail "no part line: $out"
"$privdiff" sample "$tmp/from-autoencoder" --count 10 --out "$tmp/samples2" > /dev/null 2>&1 || fail "sampling failed"

# Refusals: a pixel model cannot start from an autoencoder run; one stage cannot train both parts;
# a UNet stage needs a trained autoencoder.
cat > "$tmp/pixel.toml" <<TOML
[data]
path = "$fixtures/data/tiny-fashion-mnist"
public = true
[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [14]
[[stage]]
mechanism = "nonprivate"
batch_size = 4
steps = 1
TOML
out=$("$privdiff" run "$tmp/pixel.toml" --out "$tmp/pixel" --set "run.init_from=\"$tmp/autoencoder\"" 2>&1) \
  && fail "a pixel_unet started from an autoencoder run"
echo "$out" | grep -q "trained a autoencoder model; this recipe's \[model\] is pixel_unet" || fail "pixel refusal: $out"
out=$("$privdiff" validate "$tmp/dpldm.toml" --set 'stage.0.train_roles=["autoencoder", "attention"]' 2>&1) \
  && fail "a stage training both the autoencoder and the UNet was accepted"
echo "$out" | grep -q "stage\[0\] 'autoencoder': .*separate stages" || fail "mixed-selection refusal: $out"
out=$("$privdiff" run "$tmp/from-autoencoder.toml" --out "$tmp/untrained" 2>&1) && fail "a UNet trained on an untrained autoencoder"
echo "$out" | grep -q "scale factor has not been fitted" || fail "untrained-autoencoder refusal: $out"

# The shipped DP-LDM quickstart and its ceiling validate, and the ceiling differs from the quickstart only
# where it must: the run's name, Fashion-MNIST declared public, the fine-tuning stage non-private and so
# without its DP keys. A drift (other steps, lr, model) would make the side-by-side of docs/methods/dp-ldm.md unfair.
examples="$fixtures/../../examples/recipes"
python3 - "$examples/dpldm_quickstart.toml" "$examples/dpldm_quickstart_ceiling.toml" <<'PY' || fail "ceiling recipe drifted"
import sys, tomllib
private, ceiling = (tomllib.load(open(p, "rb")) for p in sys.argv[1:])
private["run"]["name"] += "-ceiling"
private["data"]["private"]["public"] = True
stage = private["stage"][2]
stage["mechanism"] = "nonprivate"
del stage["max_grad_norm"], stage["noise_multiplier"]
assert private == ceiling, (private, ceiling)
PY
for r in dpldm_quickstart dpldm_quickstart_ceiling; do
  out=$("$privdiff" validate "$examples/$r.toml" 2>&1) || fail "validate $r: $out"
done
echo "1 passed, 0 failed"
