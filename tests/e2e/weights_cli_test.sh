#!/usr/bin/env bash
# privdiff weights: a finished private run exported as safetensors carries its guarantee (epsilon,
# delta, accountant, ledger) in the metadata and a model card; inspect reads it back and recognises
# the architecture; damaged files, unfinished runs and bad arguments exit 2 saying why.
# Usage: weights_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
{ printf '[run]\nseed = 1\n'; tiny_dp_recipe "$fixtures" 8.0 'steps = 2'; } > "$tmp/r.toml"
out=$("$privdiff" run "$tmp/r.toml" --out "$tmp/run" 2>&1) || fail "run failed: $out"

out=$("$privdiff" weights export "$tmp/run" -o "$tmp/export" 2>&1) || fail "export failed: $out"
grep -q "privacy: (epsilon, delta) = (.*, 1e-05) by rdp" <<<"$out" || fail "no privacy line: $out"
for f in model.safetensors README.md privdiff-recipe.toml; do [ -s "$tmp/export/$f" ] || fail "no $f"; done
# The run drew reproducible noise (secure_noise = false): its guarantee holds only while the seed stays
# secret, so the published recipe withholds it, and is otherwise the run's.
grep -q "^seed = " "$tmp/export/privdiff-recipe.toml" && fail "the export publishes the seed of reproducible noise"
sed 's/^seed = .*/# seed withheld: this run'"'"'s noise is a function of it (secure_noise = false)/' "$tmp/run/recipe.toml" \
  | cmp -s - "$tmp/export/privdiff-recipe.toml" || fail "privdiff-recipe.toml is not the run's recipe without its seed"
grep -q "withhold its seeds" "$tmp/export/README.md" || fail "the model card does not say the seed is withheld"
grep -q "^## Privacy guarantee" "$tmp/export/README.md" || fail "no guarantee in the model card"
grep -q "by the rdp accountant" "$tmp/export/README.md" || fail "no accountant in the model card"
# The metadata, read with nothing but the format's definition: epsilon as summary.json reports it,
# the ledger as ledger.json holds it, and every tensor of the checkpoint's model.
python3 - "$tmp/export/model.safetensors" "$tmp/run" <<'PY' || fail "metadata check failed"
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header.pop("__metadata__")
summary = json.load(open(sys.argv[2] + "/summary.json"))
eps = [r["epsilon"] for r in summary["privacy"] if r["accountant"] == "rdp"][0]
assert meta["privdiff.accountant"] == "rdp" and meta["privdiff.delta"] == "1e-05", meta
assert abs(float(meta["privdiff.epsilon"]) - eps) <= 1e-5 * eps, (meta["privdiff.epsilon"], eps)
privacy = json.loads(meta["privdiff.privacy"])
assert privacy["ledger"] == json.load(open(sys.argv[2] + "/ledger.json")), "ledger differs"
assert privacy["data"] == summary["data"] and privacy["private"] is True
assert meta["privdiff.model"] == "pixel_unet" and meta["privdiff.recipe"].startswith("# Resolved recipe")
assert "\nseed = " not in meta["privdiff.recipe"], "the metadata publishes the seed of reproducible noise"
assert len(header) == 0 or all(set(v) == {"dtype", "shape", "data_offsets"} for v in header.values())
assert "conv_in.weight" in header and header["conv_in.weight"]["dtype"] == "F32", sorted(header)[:5]
PY

out=$("$privdiff" weights inspect "$tmp/export" 2>&1) || fail "inspect failed: $out"
grep -q "architecture: privdiff 'pixel_unet' model" <<<"$out" || fail "architecture not recognised: $out"
grep -q "privacy: (epsilon, delta) = (" <<<"$out" || fail "inspect shows no guarantee: $out"
grep -q "^  conv_in.weight  *F32   \[8, 1, 3, 3\]" <<<"$out" || fail "no tensor table: $out"
grep -q "more (--all lists them)" <<<"$out" || fail "long listings are not cut: $out"
out=$("$privdiff" weights inspect --all "$tmp/export/model.safetensors" 2>&1) || fail "inspect --all failed"
grep -q "more (--all" <<<"$out" && fail "--all still cuts the listing"

# A diffusers folder: recognised by its config.json.
mkdir -p "$tmp/unet"
cp "$fixtures/weights/reference.safetensors" "$tmp/unet/diffusion_pytorch_model.safetensors"
echo '{"_class_name": "UNet2DModel", "sample_size": 32}' > "$tmp/unet/config.json"
out=$("$privdiff" weights inspect "$tmp/unet" 2>&1) || fail "inspect of a diffusers folder failed: $out"
grep -q "architecture: diffusers UNet2DModel (config.json)" <<<"$out" || fail "diffusers not recognised: $out"
grep -q "metadata note = ünïcode ok" <<<"$out" || fail "metadata not shown: $out"

# Refusals: exit 2 and why.
expect_refusal() {  # expect_refusal 'message' privdiff-args...
  local message=$1; shift
  out=$("$privdiff" "$@" 2>&1); code=$?
  [ "$code" = 2 ] || fail "$* exited $code, not 2: $out"
  grep -qF -- "$message" <<<"$out" || fail "$* did not say '$message': $out"
}
expect_refusal "choose another -o DIR" weights export "$tmp/run" -o "$tmp/export"
expect_refusal "the run's model is pixel_unet, which has no diffusers counterpart" weights export "$tmp/run" --format diffusers -o "$tmp/d"
cp -r "$tmp/run" "$tmp/unfinished" && rm "$tmp/unfinished/summary.json"
expect_refusal "the run has not finished, so its privacy guarantee is not final" weights export "$tmp/unfinished" -o "$tmp/u"
[ -e "$tmp/u/model.safetensors" ] && fail "an unfinished run was exported"
head -c 300 "$tmp/export/model.safetensors" > "$tmp/truncated.safetensors"
expect_refusal "truncated.safetensors: safetensors: the header length" weights inspect "$tmp/truncated.safetensors"
expect_refusal "a privdiff run: privdiff weights export" weights inspect "$tmp/run"
expect_refusal "does not exist" weights inspect "$tmp/missing.safetensors"
expect_refusal "no checkpoint at" weights export "$tmp/nowhere" -o "$tmp/x"
# Issue 69: a run whose ledger.json is damaged is refused naming the file; metadata with privdiff.privacy
# but without the other privdiff keys is shown as damaged, not as a library's text.
cp -r "$tmp/run" "$tmp/badledger" && truncate -s 40 "$tmp/badledger/ledger.json"
expect_refusal "badledger/ledger.json" weights export "$tmp/badledger" -o "$tmp/bl"
grep -q "json.exception" <<<"$out" && fail "the JSON library's own text shown: $out"
# The re-trial of issue 69: resume says it in the same words; a FIFO is refused at once, not read.
expect_refusal "badledger/ledger.json: malformed JSON: line " run --resume "$tmp/badledger"
mkfifo "$tmp/fifo.safetensors"
out=$(timeout 60 "$privdiff" weights inspect "$tmp/fifo.safetensors" 2>&1); code=$?
[ "$code" = 2 ] && grep -qF "not a regular file (a pipe or a device)" <<<"$out" || fail "inspect of a FIFO (exit $code): $out"
python3 - "$tmp/export/model.safetensors" "$tmp/damaged.safetensors" <<'PY' || fail "could not write the damaged file"
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
del header["__metadata__"]["privdiff.epsilon"]
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
# Shown in full, then refused (exit 2): a guarantee that cannot be read is not one to publish.
out=$("$privdiff" weights inspect "$tmp/damaged.safetensors" 2>&1); code=$?
[ "$code" = 2 ] || fail "inspect of damaged metadata exited $code, not 2: $out"
grep -qF "privacy: damaged privdiff metadata (privdiff.privacy without privdiff.epsilon)" <<<"$out" ||
  fail "damaged metadata not said: $out"
grep -qF "metadata privdiff.privacy = " <<<"$out" || fail "the damaged file's metadata not shown: $out"
# Issue 52, finding 6: a PyTorch checkpoint is named as one; import -o keeps what a folder holds;
# --image-size 0 says what it needs in plain words.
expect_refusal "this is a zip archive, as torch.save writes a PyTorch checkpoint" weights inspect "$tmp/run/checkpoint.pt"
mkdir -p "$tmp/full" && echo keep > "$tmp/full/notes.txt"
expect_refusal "exists and is not an empty folder" weights import "$tmp/unet" -o "$tmp/full"
[ "$(cat "$tmp/full/notes.txt")" = keep ] || fail "import -o touched a non-empty folder"
expect_refusal "must be an integer >= 1, got 0" weights import "$tmp/unet" --image-size 0
expect_refusal "image size 13: the UNet has 2 levels and halves its images once, so the image size must be a multiple of 2" \
  weights import "$fixtures/weights/diffusers/unet2d_classes" --image-size 13
# Only the folder's diffusion_pytorch_model.safetensors is the model config.json describes (issue 52).
out=$("$privdiff" weights inspect "$fixtures/weights/diffusers/unet2d_classes" 2>&1) || fail "inspect of a folder with a test file: $out"
grep -A1 "reference.safetensors:" <<<"$out" | grep -q "architecture: not recognised" || fail "a test file beside the model was described as the model: $out"
# An AutoencoderKL: import says what inspect says, that it runs as a latent UNet's autoencoder.
expect_refusal "which privdiff runs only as a latent UNet's autoencoder" weights import "$fixtures/weights/diffusers/autoencoder_kl_small"
# Issue 67, finding 4: the guarantee is the ledger's. A summary.json that says epsilon 0.01 changes nothing
# in the export; a ledger.json whose every sigma is x100 disagrees with checkpoint.pt's copy, and export,
# account and compare refuse it naming both files.
eps=$(python3 -c "import json,sys; print([r['epsilon'] for r in json.load(open(sys.argv[1]))['privacy'] if r['accountant'] == 'rdp'][0])" "$tmp/run/summary.json")
cp -r "$tmp/run" "$tmp/lying"
python3 - "$tmp/lying" <<'PY'
import json, sys
for name in ("summary.json", "privacy.json"):
    s = json.load(open(f"{sys.argv[1]}/{name}"))
    for r in s["privacy" if name == "summary.json" else "results"]:
        r["epsilon"] = 0.01
    if name == "privacy.json":
        s["epsilon"] = 0.01
    json.dump(s, open(f"{sys.argv[1]}/{name}", "w"))
PY
out=$("$privdiff" weights export "$tmp/lying" -o "$tmp/lying-export" 2>&1) || fail "export of a run whose summary lies: $out"
python3 - "$tmp/lying-export" "$eps" <<'PY' || fail "the export took epsilon from summary.json: $out"
import json, struct, sys
raw = open(sys.argv[1] + "/model.safetensors", "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
eps = float(sys.argv[2])
assert abs(float(meta["privdiff.epsilon"]) - eps) <= 1e-5 * eps, (meta["privdiff.epsilon"], eps)
assert abs(json.loads(meta["privdiff.privacy"])["epsilon"]["rdp"] - eps) <= 1e-9 * eps
card = open(sys.argv[1] + "/README.md").read()
assert "(ε, δ) = (0.01," not in card and "(ε, δ) = (%s," % meta["privdiff.epsilon"] in card, card
PY
cp -r "$tmp/run" "$tmp/edited-ledger"
python3 - "$tmp/edited-ledger/ledger.json" <<'PY'
import json, sys
def scale(e):
    if e.get("type") == "gaussian":
        e["noise_multiplier"] *= 100
    for k in ("event",):
        if k in e: scale(e[k])
    for c in e.get("events", []): scale(c)
l = json.load(open(sys.argv[1]))
for e in l["entries"]: scale(e)
json.dump(l, open(sys.argv[1], "w"))
PY
disagree="$tmp/edited-ledger/ledger.json and $tmp/edited-ledger/checkpoint.pt disagree about what the run spent: entry 1 is"
expect_refusal "$disagree" weights export "$tmp/edited-ledger" -o "$tmp/edited-export"
[ -e "$tmp/edited-export/model.safetensors" ] && fail "a run whose two ledgers disagree was exported"
expect_refusal "$disagree" account "$tmp/edited-ledger"
[ "$(grep -c . <<<"$out")" = 1 ] || fail "the refusal is not one line: $out"
# Finding 8: the export's recipe is the one the run was trained under (checkpoint.pt records its hash), and
# its weights are the run's own: an edited recipe.toml, or a checkpoint.pt of another run of the same
# architecture, is refused by export and sample.
cp -r "$tmp/run" "$tmp/edited-recipe"
sed -i 's/^epsilon = .*/epsilon = 0.5/' "$tmp/edited-recipe/recipe.toml"
expect_refusal "has hash" weights export "$tmp/edited-recipe" -o "$tmp/edited-recipe-export"
grep -qF "the recipe was edited after the run wrote it, or the checkpoint comes from another run" <<<"$out" || fail "no reason: $out"
[ -e "$tmp/edited-recipe-export/model.safetensors" ] && fail "an edited recipe was exported as the run's"
{ printf '[run]\nseed = 2\n'; tiny_dp_recipe "$fixtures" 8.0 'steps = 2'; } > "$tmp/other.toml"
out=$("$privdiff" run "$tmp/other.toml" --out "$tmp/other" 2>&1) || fail "second run failed: $out"
cp -r "$tmp/run" "$tmp/foreign" && cp "$tmp/other/checkpoint.pt" "$tmp/foreign/checkpoint.pt"
expect_refusal "$tmp/foreign/checkpoint.pt was trained under a recipe with hash" weights export "$tmp/foreign" -o "$tmp/foreign-export"
expect_refusal "$tmp/foreign/checkpoint.pt was trained under a recipe with hash" sample "$tmp/foreign" --count 2 --out "$tmp/foreign-s"
[ -e "$tmp/foreign-s-grid.png" ] && fail "another run's checkpoint was sampled"
out=$("$privdiff" sample "$tmp/run" --count 2 --out "$tmp/own-s" 2>&1) || fail "sampling the run's own checkpoint: $out"
# Finding 8: secure_noise = false with no seed set draws the noise from the public default 0. The export
# says so: the seed is not withheld (there is nothing to withhold), and the guarantee carries a caveat.
tiny_dp_recipe "$fixtures" 8.0 'steps = 2' > "$tmp/seed0.toml"
out=$("$privdiff" run "$tmp/seed0.toml" --out "$tmp/seed0" 2>&1) || fail "run without a seed failed: $out"
out=$("$privdiff" weights export "$tmp/seed0" -o "$tmp/seed0-export" 2>&1) || fail "export without a seed: $out"
grep -q "seed withheld" "$tmp/seed0-export/privdiff-recipe.toml" && fail "the export says it withheld the public default seed"
grep -q "^seed = 0  # not withheld: 0 is privdiff's public default" "$tmp/seed0-export/privdiff-recipe.toml" \
  || fail "the export does not say its seed is the public default: $(cat "$tmp/seed0-export/privdiff-recipe.toml")"
grep -q "withhold its seeds" "$tmp/seed0-export/README.md" && fail "the card says the public seed is withheld"
grep -q "seed 0 is privdiff's public default" "$tmp/seed0-export/README.md" || fail "the card does not say the seed is public"
grep -q "anyone can reproduce this run's noise and batches" "$tmp/seed0-export/README.md" || fail "no public-seed caveat"
echo "weights: all checks passed"
