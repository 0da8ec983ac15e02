#!/usr/bin/env bash
# Captioned private data and the prompts that sample from a model trained on it (issue 68): a run on
# captioned Fashion-MNIST states its privacy unit (an image with its label and its caption); `sample
# --prompts` refuses, before anything is loaded or drawn, a prompt that is one of the run's private
# captions (also after case, spacing and punctuation), naming the file, the line and what it matched;
# other prompts pass that check and are refused only because the tiny model does not condition on text.
# Usage: prompts_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
export PRIVDIFF_RECORD_KEY="$tmp/record.key"
passed=0
tiny_dp_recipe "$fixtures" 10 "steps = 2" |
  sed '/^path = /a dataset = "fashion-mnist"\ncaptions = "templates"\ncaption_templates = ["a photo of the {}."]' > "$tmp/captioned.toml"
out=$("$privdiff" run "$tmp/captioned.toml" --out "$tmp/run" 2>&1) || fail "captioned run: $out"
python3 - "$tmp/run/privacy.json" <<'PY' || fail "privacy_unit"
import json, sys
unit = json.load(open(sys.argv[1]))["privacy_unit"]
assert unit.startswith("one record of tiny-fashion-mnist (train): an image with its label and its caption"), unit
PY
passed=$((passed + 1))

# The first training record's class: its caption is "a photo of the NAME." (one template).
name=$(python3 - "$fixtures/data/tiny-fashion-mnist" <<'PY'
import gzip, sys
names = ["T-shirt/top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "ankle boot"]
print(names[gzip.open(f"{sys.argv[1]}/train-labels-idx1-ubyte.gz").read()[8]])
PY
)
printf 'a drawing of a boot\n\n  A Photo of the  %s!  \n' "$(tr a-z A-Z <<<"$name")" > "$tmp/prompts.txt"
out=$("$privdiff" sample "$tmp/run" --prompts "$tmp/prompts.txt" --count 4 2>&1); code=$?
[ $code = 2 ] || fail "private prompts: exit $code, not 2: $out"
grep -qF "$tmp/prompts.txt:3: the prompt 'A Photo of the  $(tr a-z A-Z <<<"$name")!' is one of the private captions of tiny-fashion-mnist (train)" <<<"$out" ||
  fail "no located refusal: $out"
grep -q "1 prompt(s) may be private captions" <<<"$out" || fail "the public prompt was counted: $out"
grep -q "sampling" <<<"$out" && fail "sampling started: $out"
[ ! -e "$tmp/run/samples" ] || fail "a refused sample wrote samples"
out=$("$privdiff" sample "$tmp/run" --prompt "a photo of the $name" --count 4 2>&1); code=$?
[ $code = 2 ] && grep -q "^  --prompt: the prompt 'a photo of the $name' is one of the private captions" <<<"$out" ||
  fail "--prompt: exit $code: $out"
passed=$((passed + 1))

# Public prompts pass the check; the tiny pixel UNet does not read them, and says so. No caveat is written.
out=$("$privdiff" sample "$tmp/run" --prompt "a drawing of a boot" --count 4 2>&1); code=$?
[ $code = 2 ] && grep -q "the model (pixel_unet) does not condition on text" <<<"$out" || fail "public prompt: exit $code: $out"
out=$("$privdiff" sample "$tmp/run" --prompts "$tmp/prompts.txt" --allow-private-prompts --count 4 2>&1); code=$?
[ $code = 2 ] && grep -q "does not condition on text" <<<"$out" || fail "--allow-private-prompts: exit $code: $out"
grep -q "prompt" "$tmp/run/privacy.json" && fail "a caveat was written for samples never drawn"
passed=$((passed + 1))

# A prompts file that is not text, and a run whose record of its data is gone.
printf 'fine\nalso fine\nbad \xff byte\n' > "$tmp/bad.txt"
out=$("$privdiff" sample "$tmp/run" --prompts "$tmp/bad.txt" 2>&1); code=$?
[ $code = 2 ] && grep -qF "$tmp/bad.txt:3: not valid UTF-8 at byte 4" <<<"$out" || fail "bad prompts file: exit $code: $out"
out=$("$privdiff" sample "$tmp/run" --prompts "$tmp/absent.txt" 2>&1); code=$?
[ $code = 2 ] && grep -qF "$tmp/absent.txt: no such file (a prompts file)" <<<"$out" || fail "absent prompts file: exit $code: $out"
mv "$tmp/run/data-records.bin" "$tmp/records.bin"
out=$("$privdiff" sample "$tmp/run" --prompt "a boot" 2>&1); code=$?
[ $code = 2 ] && grep -q "data-records.bin: .*the prompts cannot be checked" <<<"$out" || fail "no records: exit $code: $out"
passed=$((passed + 1))

# 5. A text-conditioned LDM (txt2img's layout, the CompVis fixture) fine-tuned under DP-SGD on a captioned
# image folder: its SpatialTransformers and text encoder train ("attention"); public prompts sample and
# are written beside the images; a private caption is refused; --allow-private-prompts samples with a
# caveat in ledger.json, privacy.json and summary.json.
python3 - "$tmp/faces" <<'PY'
import json, os, struct, sys, zlib
d = sys.argv[1]
os.makedirs(d)
def png(path, rgb):  # an 8-bit RGB 8 x 8 PNG of one colour
    chunk = lambda t, b: struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
    rows = b"".join(b"\0" + bytes(rgb) * 8 for _ in range(8))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
captions = ["The woman has wavy hair.", "The man is smiling.", "A photo of a young woman.",
            "The man has a beard.", "The woman wears a hat.", "A photo of an old man."]
with open(f"{d}/metadata.jsonl", "w") as f:
    for i, c in enumerate(captions):
        png(f"{d}/{i}.png", (40 * i, 200 - 30 * i, 90))
        f.write(json.dumps({"file_name": f"{i}.png", "text": c}) + "\n")
PY
ldm="$fixtures/text/compvis_txt2img/model.safetensors"
cat > "$tmp/txt2img.toml" <<TOML
[run]
init_from = "$ldm"
init_from_disjoint = true
[privacy]
epsilon = 10.0
delta = 1e-5
accountant = "rdp"
[data]
dataset = "image_folder"
path = "$tmp/faces"
layout = "flat"
channels = 3
image_size = 8
captions = "table"
caption_path = "$tmp/faces/metadata.jsonl"
[model]
type = "compvis_ldm"
config = "$ldm"
tokenizer = "$fixtures/text/bert_vocab.txt"
[[stage]]
mechanism = "dpsgd"
train = "attention"
batch_size = 2
steps = 2
secure_noise = false
[sampler]
type = "ddim"
steps = 2
TOML
out=$("$privdiff" run "$tmp/txt2img.toml" --out "$tmp/t2i" 2>&1) || fail "txt2img run: $out"
grep -q "from the empty caption" <<<"$out" || fail "the grid's captions unstated: $out"
out=$("$privdiff" sample "$tmp/t2i" --prompt "a woman in a red coat" --prompt "a man" --count 4 --out "$tmp/s/p" 2>&1) ||
  fail "public prompts: $out"
[ "$(cat "$tmp/s/p-prompts.txt")" = "$(printf 'a woman in a red coat\na woman in a red coat\na man\na man')" ] ||
  fail "prompts beside the samples: $(cat "$tmp/s/p-prompts.txt")"
out=$("$privdiff" sample "$tmp/t2i" --count 2 --out "$tmp/s/u" 2>&1) || fail "no prompts (the empty caption): $out"
[ ! -e "$tmp/s/u-prompts.txt" ] || fail "a prompts file of empty captions"
out=$("$privdiff" sample "$tmp/t2i" --prompt "the man is SMILING" --count 2 --out "$tmp/s/q" 2>&1); code=$?
[ $code = 2 ] && grep -q "is one of the private captions of faces" <<<"$out" || fail "txt2img private prompt: exit $code: $out"
out=$("$privdiff" sample "$tmp/t2i" --prompt "the man is SMILING" --allow-private-prompts --count 2 --out "$tmp/s/r" 2>&1) ||
  fail "--allow-private-prompts: $out"
for f in ledger.json privacy.json summary.json; do
  grep -q "private training captions" "$tmp/t2i/$f" || fail "no caveat in $f"
done
grep -q "SMILING\|smiling" "$tmp/t2i/privacy.json" && fail "the caveat quotes the private caption"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
