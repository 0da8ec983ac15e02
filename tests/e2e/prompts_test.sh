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
echo "$passed passed, 0 failed"
