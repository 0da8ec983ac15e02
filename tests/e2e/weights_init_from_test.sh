#!/usr/bin/env bash
# [run] init_from from safetensors weights: a privdiff export of a public pretraining run, and the same
# weights with privdiff's metadata stripped (weights from outside privdiff). Neither records what it
# trained on, so a private run starts from them only with the user's statement
# (init_from_disjoint = true); then its epsilon equals that of the same run started from the source
# run directory, and the imported weights' caveat is in privacy.json, summary.json and account.
# Usage: weights_init_from_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny_glyph_pretraining "$tmp/glyph-cache" > "$tmp/pretrain.toml"
tiny_dp_recipe "$fixtures" 5.0 'train = "attention"' 'steps = 3' > "$tmp/finetune.toml"
out=$("$privdiff" run "$tmp/pretrain.toml" --out "$tmp/pretrain" 2>&1) || fail "pretraining failed: $out"
out=$("$privdiff" weights export "$tmp/pretrain" -o "$tmp/export" 2>&1) || fail "export failed: $out"
grep -q "privacy: none (no private stage)" <<<"$out" || fail "a public run's export claims a guarantee: $out"
# The same weights from outside privdiff: no metadata at all.
python3 - "$tmp/export/model.safetensors" "$tmp/outside.safetensors" <<'PY' || fail "could not strip the metadata"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n]); header.pop("__metadata__")
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY

out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/from-run" --set "run.init_from=\"$tmp/pretrain\"" 2>&1) \
  || fail "fine-tuning from the run failed: $out"
for source in export outside; do
  [ $source = export ] && from="$tmp/export" || from="$tmp/outside.safetensors"
  out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/refused-$source" --set "run.init_from=\"$from\"" 2>&1); code=$?
  [ "$code" = 2 ] || fail "$source without the statement: exit $code, not 2: $out"
  grep -q "init_from_disjoint = true" <<<"$out" || fail "$source: the refusal does not name the statement: $out"
  [ -e "$tmp/refused-$source/checkpoint.pt" ] && fail "$source: a refused run trained"
  out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/from-$source" --set "run.init_from=\"$from\"" \
    --set run.init_from_disjoint=true 2>&1) || fail "fine-tuning from the $source failed: $out"
  account=$("$privdiff" account "$tmp/from-$source" 2>&1) || fail "account $source failed: $account"
  python3 - "$tmp/from-run" "$tmp/from-$source" "$source" "$account" <<'PY' || fail "$source: reports"
import json, sys
base, run, source, account = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
eps = lambda d: [r["epsilon"] for r in json.load(open(d + "/summary.json"))["privacy"] if r["accountant"] == "rdp"][0]
assert eps(run) == eps(base), (source, eps(run), eps(base))  # imported weights change nothing about epsilon
want = {"export": "init_from: a privdiff export (", "outside": "init_from: weights from outside privdiff ("}[source]
for report in ("privacy.json", "summary.json"):
    caveats = json.load(open(run + "/" + report))["caveats"]
    assert any(c.startswith(want) for c in caveats), (report, caveats)
    assert any(c.startswith("init_from_disjoint: the user states") for c in caveats), (report, caveats)
assert want in account, account
assert json.load(open(run + "/summary.json"))["init_from"]["carried"] is False
PY
done
# The privacy audit's probe (issue 50, finding 6b): a private export fine-tuned again on the very data it
# was trained on, stated disjoint. The keyed data fingerprint in its metadata is this run's: refused.
out=$("$privdiff" weights export "$tmp/from-run" -o "$tmp/private-export" 2>&1) || fail "private export failed: $out"
out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/same-data" --set "run.init_from=\"$tmp/private-export\"" \
  --set run.init_from_disjoint=true 2>&1); code=$?
[ "$code" = 2 ] && grep -q "was trained on exactly this run's private data" <<<"$out" \
  || fail "a statement of disjointness for the same data: exit $code: $out"
[ -e "$tmp/same-data/checkpoint.pt" ] && fail "the refused run trained"
# Issue 67, finding 8: weights whose ledger is one Gaussian of noise multiplier 0 have infinite epsilon.
# Carried (no statement of disjointness), that is said at once, not blamed on disjointness; stated disjoint,
# the ledger is not carried and the run is valid.
python3 - "$tmp/export/model.safetensors" "$tmp/sigma0.safetensors" <<'PY' || fail "could not write the sigma-0 weights"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n]); meta = header["__metadata__"]
p = json.loads(meta["privdiff.privacy"])
p["private"] = True
p["ledger"] = {"format": "privdiff-ledger", "version": 1, "caveats": [],
               "entries": [{"type": "gaussian", "noise_multiplier": 0.0}]}
meta["privdiff.privacy"] = json.dumps(p)
text = json.dumps(header, separators=(",", ":")).encode(); text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + n:])
PY
for command in validate run; do
  out=$("$privdiff" $command "$tmp/finetune.toml" $([ $command = run ] && echo "--out $tmp/sigma0-run") \
    --set "run.init_from=\"$tmp/sigma0.safetensors\"" 2>&1); code=$?
  [ "$code" = 2 ] || fail "$command from a sigma-0 ledger: exit $code, not 2: $out"
  grep -qF "run.init_from: the ledger carried from $tmp/sigma0.safetensors has a Gaussian event with noise multiplier 0 (its entry 1, Gaussian(0)): epsilon is infinite" <<<"$out" \
    || fail "$command: the infinite epsilon is not named: $out"
  grep -q "cannot be compared" <<<"$out" && fail "$command: blamed on disjointness: $out"
done
[ -e "$tmp/sigma0-run/checkpoint.pt" ] && fail "a run carrying an infinite epsilon trained"
out=$("$privdiff" validate "$tmp/finetune.toml" --set "run.init_from=\"$tmp/sigma0.safetensors\"" \
  --set run.init_from_disjoint=true 2>&1) || fail "stated disjoint, the sigma-0 ledger is not carried: $out"
# Weights of another configuration are refused, naming the first mismatch with both shapes.
out=$("$privdiff" run "$tmp/finetune.toml" --out "$tmp/wide" --set "run.init_from=\"$tmp/outside.safetensors\"" \
  --set run.init_from_disjoint=true --set model.channels=16 2>&1); code=$?
[ "$code" = 2 ] || fail "another configuration: exit $code, not 2: $out"
grep -q "'class_embedding.weight' is \[11, 32\] in .*outside.safetensors but \[11, 64\] in this recipe's \[model\]" <<<"$out" \
  || fail "no shape mismatch message: $out"

# A diffusers UNet2DModel (diffusers' own folder, made by diffusers 0.42.1): fine-tuned under DP from its
# weights (attention only) on the classes it knows, exported as a diffusers folder with the guarantee.
unet="$fixtures/weights/diffusers/unet2d_classes"
out=$("$privdiff" weights inspect "$unet" 2>&1) || fail "inspect of the diffusers folder failed: $out"
grep -q "architecture: diffusers UNet2DModel (config.json), which privdiff's diffusers_unet model runs" <<<"$out" \
  || fail "the diffusers UNet is not recognised as runnable: $out"
grep -q '^type = "diffusers_unet"' <<<"$out" && grep -q "^num_classes = 3" <<<"$out" || fail "no recipe tables: $out"
attention_finetune_tables "path = \"$fixtures/data/tiny-fashion-mnist\"" "classes = [0, 1, 2]" > "$tmp/diffusers.toml"
cat >> "$tmp/diffusers.toml" <<TOML
[model]
type = "diffusers_unet"
config = "$unet"
num_classes = 3
[sampler]
type = "ddim"
steps = 2
guidance = 0
TOML
out=$("$privdiff" run "$tmp/diffusers.toml" --out "$tmp/refused-diffusers" --set "run.init_from=\"$unet\"" 2>&1); code=$?
[ "$code" = 2 ] || fail "a diffusers model without the statement: exit $code, not 2: $out"
out=$("$privdiff" run "$tmp/diffusers.toml" --out "$tmp/from-diffusers" --set "run.init_from=\"$unet\"" \
  --set run.init_from_disjoint=true 2>&1) || fail "fine-tuning the diffusers model failed: $out"
grep -q "init_from .*diffusion_pytorch_model.safetensors" <<<"$out" || fail "not started from the diffusers weights: $out"
grep -q "CAVEAT      init_from: weights from outside privdiff" <<<"$out" || fail "no imported-weights caveat: $out"
out=$("$privdiff" weights export "$tmp/from-diffusers" --format diffusers -o "$tmp/diffusers-export" 2>&1) \
  || fail "diffusers export failed: $out"
cmp -s "$tmp/diffusers-export/config.json" "$unet/config.json" || fail "the export's config.json differs from the model's"
python3 - "$tmp/diffusers-export/diffusion_pytorch_model.safetensors" "$unet/diffusion_pytorch_model.safetensors" <<'PY' \
  || fail "the export's tensors are not diffusers' names and shapes"
import json, struct, sys
def header(path):
    raw = open(path, "rb").read()
    h = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])
    return h.pop("__metadata__", {}), {k: (v["dtype"], v["shape"]) for k, v in h.items()}
meta, ours = header(sys.argv[1])
assert ours == header(sys.argv[2])[1], sorted(set(ours) ^ set(header(sys.argv[2])[1]))
assert meta["privdiff.model"] == "diffusers_unet" and float(meta["privdiff.epsilon"]) <= 5.0, meta
PY
# The card names the file the folder holds, and no local path (issue 52, finding 7).
card="$tmp/diffusers-export/README.md"
grep -q 'safe_open("diffusion_pytorch_model.safetensors"' "$card" && ! grep -q '`model.safetensors`' "$card" \
  || fail "the diffusers card names another file: $(cat "$card")"
! grep -q "$tmp" "$card" || fail "the card holds local paths: $(grep "$tmp" "$card")"
# Export -> import -> the same tensors, bit for bit.
out=$("$privdiff" weights import "$tmp/diffusers-export" -o "$tmp/reimported" 2>&1) || fail "import of the export failed: $out"
python3 - "$tmp/diffusers-export/diffusion_pytorch_model.safetensors" "$tmp/reimported/model.safetensors" <<'PY' \
  || fail "export -> import changed the tensors"
import json, struct, sys
def tensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n]); header.pop("__metadata__", None)
    return header, raw[8 + n:]
assert tensors(sys.argv[1]) == tensors(sys.argv[2])
PY
# diffusers itself loads the export, strictly, where it is installed (CI's machines do not have it).
if python3 -c "import diffusers" 2> /dev/null; then
  python3 "$(dirname "$0")/../../scripts/weights_fixtures/check_diffusers_export.py" "$tmp/diffusers-export" \
    || fail "diffusers does not load the export"
else
  echo "skipped: the diffusers load check (python3 has no diffusers; scripts/weights_fixtures/check_diffusers_export.py runs it)"
fi

# A diffusers UNet in the latent space of a diffusers AutoencoderKL (frozen, read from its folder): trained
# under DP, exported to diffusers, and imported back as a pipeline folder (model_index.json, unet/, vae/,
# scheduler/) whose recipe tables name the autoencoder and the scheduler's betas.
python3 - "$unet/config.json" "$tmp/latent-unet/config.json" <<'PY' || fail "could not write the latent UNet's config"
import json, os, sys
config = json.load(open(sys.argv[1]))
config.update(in_channels=2, out_channels=2, sample_size=14)  # autoencoder_kl_small: 2 latent channels, 2x down
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
json.dump(config, open(sys.argv[2], "w"), indent=2)
PY
sed -e "s|^config = .*|config = \"$tmp/latent-unet\"\nautoencoder = \"$fixtures/weights/diffusers/autoencoder_kl_small\"|" \
  "$tmp/diffusers.toml" > "$tmp/latent-diffusers.toml"
out=$("$privdiff" run "$tmp/latent-diffusers.toml" --out "$tmp/latent-diffusers" 2>&1) || fail "the latent diffusers model failed: $out"
out=$("$privdiff" sample "$tmp/latent-diffusers" -n 3 2>&1) || fail "sampling the latent diffusers model failed: $out"
python3 - "$tmp/latent-diffusers/samples/ddim-3-images-idx3-ubyte.gz" <<'PY' || fail "latent samples are not 28x28 images"
import gzip, struct, sys
magic, n, h, w = struct.unpack(">IIII", gzip.open(sys.argv[1]).read(16))
assert (n, h, w) == (3, 28, 28), (n, h, w)
PY
"$privdiff" weights export "$tmp/latent-diffusers" --format diffusers -o "$tmp/pipeline/unet" > /dev/null 2>&1 || fail "latent export failed"
cp -r "$fixtures/weights/diffusers/autoencoder_kl_small" "$tmp/pipeline/vae"
cp -r "$unet/scheduler" "$tmp/pipeline/scheduler"
echo '{"_class_name": "DiffusionPipeline"}' > "$tmp/pipeline/model_index.json"
out=$("$privdiff" weights import "$tmp/pipeline" 2>&1) || fail "import of the pipeline folder failed: $out"
grep -q "in an AutoencoderKL's latent space" <<<"$out" && grep -q "^autoencoder = \"$tmp/pipeline/vae\"" <<<"$out" \
  && grep -q "^image_size = 28" <<<"$out" && grep -q '^beta_schedule = "linear"' <<<"$out" || fail "pipeline tables: $out"
echo "weights init_from: all checks passed"
