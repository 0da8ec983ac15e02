#!/usr/bin/env bash
# Captioned private data and the prompts that sample from a model trained on it (issue 68): a run on
# captioned Fashion-MNIST states its privacy unit (an image with its label and its caption); its template
# captions are public text, so prompts made of them pass the check and are refused only because the tiny
# model does not condition on text. A text-conditioned LDM on a captioned folder: `sample --prompts`
# refuses, before anything is loaded or drawn, a prompt that is one of the run's private captions (also
# after case, spacing and punctuation), naming the file, the line and what it matched; [[eval]] prompts
# are checked the same way before the run trains, and label the samples for text alignment.
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

# Template captions are public text (the recipe's templates and class names): a prompt made of them
# names a class, as class-conditional sampling does, and passes the check; the tiny pixel UNet then
# refuses it for not conditioning on text.
out=$("$privdiff" sample "$tmp/run" --prompt "A Photo of the  SNEAKER!" --count 4 2>&1); code=$?
[ $code = 2 ] && grep -q "the model (pixel_unet) does not condition on text" <<<"$out" ||
  fail "a template prompt was held private: exit $code: $out"
grep -q "private captions" <<<"$out" && fail "a template prompt was held private: $out"
passed=$((passed + 1))

# Public prompts pass the check; the tiny pixel UNet does not read them, and says so. No caveat is written.
printf 'a drawing of a boot\n\na photo of the trouser.\n' > "$tmp/prompts.txt"
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
captioned_faces "$tmp/faces" 8
ldm="$fixtures/text/compvis_txt2img/model.safetensors"
text_model_stage() {  # $1: the batch size. The fixture LDM, its transformers and text encoder trained under DP.
  cat <<TOML
[model]
type = "compvis_ldm"
config = "$ldm"
tokenizer = "$fixtures/text/bert_vocab.txt"
[[stage]]
mechanism = "dpsgd"
train = "attention"
batch_size = $1
steps = 2
secure_noise = false
TOML
}
cat > "$tmp/txt2img.toml" <<TOML
[run]
init_from = "$ldm"
init_from_disjoint = true
$(captioned_faces_tables "$tmp/faces" 8)
$(text_model_stage 2)
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
printf 'a drawing of a boot\n\n  The Man is  smiling!  \n' > "$tmp/faces-prompts.txt"
out=$("$privdiff" sample "$tmp/t2i" --prompts "$tmp/faces-prompts.txt" --count 4 --out "$tmp/s/f" 2>&1); code=$?
[ $code = 2 ] || fail "private prompts file: exit $code, not 2: $out"
grep -qF "$tmp/faces-prompts.txt:3: the prompt 'The Man is  smiling!' is one of the private captions of faces" <<<"$out" ||
  fail "no located refusal: $out"
grep -q "1 prompt(s) may be private captions" <<<"$out" || fail "the public prompt was counted: $out"
grep -q "sampling" <<<"$out" && fail "sampling started: $out"
ls "$tmp/s"/f* > /dev/null 2>&1 && fail "a refused sample wrote samples"
out=$("$privdiff" sample "$tmp/t2i" --prompt "the man is SMILING" --allow-private-prompts --count 2 --out "$tmp/s/r" 2>&1) ||
  fail "--allow-private-prompts: $out"
for f in ledger.json privacy.json summary.json; do
  grep -q "private training captions" "$tmp/t2i/$f" || fail "no caveat in $f"
done
grep -q "SMILING\|smiling" "$tmp/t2i/privacy.json" && fail "the caveat quotes the private caption"
passed=$((passed + 1))

# 6. The checks see the caption: check-mechanism on the text-conditioned recipe captions its records and
# audits x's caption alone; a text model on data without captions is refused in pre-flight.
out=$("$privdiff" check-mechanism "$tmp/txt2img.toml" --no-audit --replays 4 2>&1) || fail "check-mechanism: $out"
grep -q "a record there is an image and its caption" <<<"$out" || fail "check-mechanism did not caption: $out"
grep -q "^(a) record replay: passed" <<<"$out" || fail "record replay: $out"
sed '/^captions = /d; /^caption_path = /d' "$tmp/txt2img.toml" > "$tmp/uncaptioned.toml"
out=$("$privdiff" validate "$tmp/uncaptioned.toml" 2>&1) && fail "validated a text model on uncaptioned data"
grep -q "has no captions, but the model (compvis_ldm) conditions on text" <<<"$out" || fail "uncaptioned: $out"
passed=$((passed + 1))

# 7. [[eval]] prompts: a captioned IDX set of three colours (3x8x8, template captions), fine-tuned from
# the faces run (init_from, its ledger not carried). Prompts label their samples (text alignment); one of
# the ancestry's private captions is refused at its recipe line before the run trains, or sampled with a
# caveat on the run and on the eval. CLIP scores the prompted samples, in the run and by privdiff eval.
python3 - "$tmp/colours" <<'PY'
import gzip, os, random, struct, sys
d = sys.argv[1]
os.makedirs(d)
def write(split, n):
    rnd, labels, pixels = random.Random(split), [i % 3 for i in range(n)], bytearray()
    for y in labels:  # a 4x4 square of the class's colour somewhere on a noisy dark ground
        r0, c0 = rnd.randint(0, 4), rnd.randint(0, 4)
        for c in range(3):
            pixels += bytes(max(0, min(255, (230 if c == y and r0 <= i // 8 < r0 + 4 and c0 <= i % 8 < c0 + 4 else 20)
                                        + rnd.randint(-15, 15))) for i in range(64))
    with gzip.open(f"{d}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">BBBBIIII", 0, 0, 8, 4, n, 3, 8, 8) + bytes(pixels))
    with gzip.open(f"{d}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, n) + bytes(labels))
write("train", 30)
write("t10k", 24)
PY
eval_recipe() {  # $1: the [[eval]] prompts line; $2: an extra [[eval]] line
  cat <<TOML
[run]
init_from = "$tmp/t2i"
init_from_disjoint = true
[privacy]
epsilon = 10.0
delta = 1e-5
accountant = "rdp"
[data]
dataset = "idx"
path = "$tmp/colours"
captions = "templates"
class_names = ["red square", "green square", "blue square", "four", "five", "six", "seven", "eight", "nine", "ten"]
caption_templates = ["a photo of the {}."]
$(text_model_stage 4)
[sampler]
type = "ddim"
schedule = "ldm"
steps = 4
[[eval]]
samples = 21
epochs = 1
labels = "prompts"
held_out_near_duplicates = "caveat"   # random squares: a test image may be near one of training
evaluators = ["dpdm_classifiers", "clip_score"]
$1
${2:-}
[eval.dpdm_classifiers]
classifiers = ["logreg"]
[eval.clip_score]
weights = "$fixtures/weights/clip/clip_tiny"   # a tiny random transformers CLIPModel
TOML
}
eval_recipe 'prompts = ["a photo of the red square.", "a green thing", "the blue one"]' > "$tmp/eval.toml"
out=$("$privdiff" run "$tmp/eval.toml" --out "$tmp/e" 2>&1) || fail "[[eval]] prompts run: $out"
grep -q "eval\[0\]: sampling 21 images from 3 prompt(s)" <<<"$out" || fail "no prompted eval: $out"
python3 - "$tmp/e/eval-0.json" "$tmp/e/samples/eval0-prompts.txt" <<'PY' || fail "eval-0.json"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["prompts"] == ["a photo of the red square.", "a green thing", "the blue one"], r.get("prompts")
assert r["labels"].startswith("prompts"), r.get("labels")
lines = open(sys.argv[2]).read().splitlines()
assert lines == ["a photo of the red square."] * 7 + ["a green thing"] * 7 + ["the blue one"] * 7, lines
clip = r["evaluators"]["clip_score"]
assert 0 <= clip["metrics"]["clip_score"] <= 100 and clip["details"]["distinct_prompts"] == 3, clip
PY
# The same samples scored by privdiff eval: it reads their prompts from the -prompts.txt beside them
# (--allow-private-data: the run's ancestry, the fixture LDM, has no data record to compare against).
out=$("$privdiff" eval "$tmp/e/samples/eval0-images-idx3-ubyte.gz" --real idx --real-path "$tmp/colours" --allow-private-data \
  --evaluator clip_score --set clip_score.weights="$fixtures/weights/clip/clip_tiny" --json 2>"$tmp/eval.err") ||
  fail "privdiff eval --evaluator clip_score: $out $(cat "$tmp/eval.err")"
python3 -c 'import json, sys; d = json.loads(sys.argv[1])["evaluators"]["clip_score"]["details"]; assert d["distinct_prompts"] == 3, d' "$out" ||
  fail "privdiff eval did not read the prompts: $out"
eval_recipe 'prompts = ["a green thing", "The man is  SMILING!"]' > "$tmp/private-eval.toml"
out=$("$privdiff" validate "$tmp/private-eval.toml" 2>&1); code=$?
[ $code = 2 ] || fail "a private [[eval]] prompt: exit $code, not 2: $out"
grep -qF "$tmp/private-eval.toml:" <<<"$out" && grep -qF "eval[0].prompts[1]: the prompt 'The man is  SMILING!' is one of the private captions of faces" <<<"$out" ||
  fail "no located [[eval]] refusal: $out"
grep -q "eval\[0\].allow_private_prompts = true" <<<"$out" || fail "no opt-in named: $out"
eval_recipe 'prompts = ["a green thing", "The man is  SMILING!"]' 'allow_private_prompts = true' > "$tmp/private-eval.toml"
out=$("$privdiff" run "$tmp/private-eval.toml" --out "$tmp/pe" 2>&1) || fail "allow_private_prompts: $out"
grep -q "private training captions" "$tmp/pe/eval-0.json" || fail "no caveat in eval-0.json"
grep -q "private training captions" "$tmp/pe/privacy.json" || fail "no caveat in privacy.json"
grep -qi "smiling" "$tmp/pe/privacy.json" && fail "the caveat quotes the private caption"
passed=$((passed + 1))

# 8. DP-LDM's text-to-image recipe validates on a folder of MM-CelebA-HQ's layout (CelebA-HQ-img/ and
# celeba-caption/, ten captions an image) with the fixture LDM in place of CompVis's weights.
python3 - "$tmp/mm" <<'PY'
import os, struct, sys, zlib
d = sys.argv[1]
os.makedirs(f"{d}/CelebA-HQ-img"); os.makedirs(f"{d}/celeba-caption")
def png(path, rgb):
    chunk = lambda t, b: struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
    rows = b"".join(b"\0" + bytes(rgb) * 8 for _ in range(8))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
for i in range(6):
    png(f"{d}/CelebA-HQ-img/{i}.png", (30 * i, 60, 200 - 20 * i))
    open(f"{d}/celeba-caption/{i}.txt", "w").write("".join(f"The person {i} has feature {k}.\n" for k in range(10)))
PY
recipe="$(dirname "$0")/../../examples/recipes/dpldm_celebahq_txt2img_eps10.toml"
out=$("$privdiff" validate "$recipe" --set run.init_from="$ldm" --set model.config="$ldm" \
  --set model.tokenizer="$fixtures/text/bert_vocab.txt" --set data.path="$tmp/mm/CelebA-HQ-img" \
  --set data.caption_path="$tmp/mm/celeba-caption" --set data.image_size=8 --set stage.0.batch_size=2 \
  --set stage.0.physical_batch_size=1 2>&1) || fail "the paper's recipe on its layout: $out"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
