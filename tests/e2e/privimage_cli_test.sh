#!/usr/bin/env bash
# PrivImage end to end and tiny (issue 53): a semantic_query stage trains a classifier on public
# glyphs, releases the per-class histogram of the private images' top public classes with the
# Gaussian mechanism, and releases the public glyphs of the selected classes; a non-private stage
# pretrains on them and DP-SGD fine-tunes on the private data, its noise calibrated with the query
# composed. Checks the release (public images only, the private classes as labels), the ledger (one
# Gaussian of the stated sigma, then the steps), that `account` re-derives epsilon, and the refusals
# (public_data naming private data or no section).
# Usage: privimage_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
recipe() {  # recipe PUBLIC_DATA
  cat <<TOML
[run]
seed = 2
[privacy]
epsilon = 8.0
delta = 1e-5
accountant = "rdp"
[data.public]
dataset = "glyphs"
characters = "ABCDEFGHIJKLMNOP"
per_class = 6
cache = "$tmp/glyphs"
[data.private]
path = "$fixtures/data/tiny-fashion-mnist"
$tiny_model
num_classes = 10
[[stage]]
name = "query"
mechanism = "semantic_query"
data = "private"
public_data = "$1"
top_k = 2
select = 2
noise_multiplier = 3.0
images_per_class = 4
classifier_epochs = 1
secure_noise = false
[[stage]]
name = "pretrain"
mechanism = "nonprivate"
data = "query"
batch_size = 8
steps = 2
[[stage]]
name = "finetune"
mechanism = "dpsgd"
data = "private"
batch_size = 4
steps = 3
secure_noise = false
[sampler]
type = "ddim"
steps = 2
TOML
}
recipe public > "$tmp/r.toml"
"$privdiff" run "$tmp/r.toml" --out "$tmp/run" > "$tmp/log" 2>&1 || fail "the PrivImage run: $(tail -20 "$tmp/log")"
grep -q "semantic_query: class 9 selects public classes [0-9]* [0-9]*$" "$tmp/log" || fail "no selection in the log: $(cat "$tmp/log")"
grep -q "semantic_query: classifying the private images" "$tmp/log" || fail "no progress line: $(cat "$tmp/log")"
grep -q "released 40 images as data 'query'" "$tmp/log" || fail "no release of 40 images: $(cat "$tmp/log")"
python3 - "$tmp/run" <<'PY' || fail "the release or the ledger"
import gzip, json, sys
run = sys.argv[1]
def idx(path, header):
    data = gzip.open(path).read()
    return data[header:]
images = idx(f"{run}/released-query/train-images-idx3-ubyte.gz", 16)
labels = list(idx(f"{run}/released-query/train-labels-idx1-ubyte.gz", 8))
assert labels == [c for c in range(10) for _ in range(4)], labels  # images_per_class per private class
released = {images[i * 784:(i + 1) * 784] for i in range(40)}
ledger = json.load(open(f"{run}/ledger.json"))
entries = ledger["entries"]
# The query: one Gaussian of sigma 3 on all records (q = 1), first; then the 3 DP-SGD steps.
assert entries[0] == {"noise_multiplier": 3.0, "type": "gaussian"}, entries[0]
assert entries[1]["type"] == "self_composed" and entries[1]["count"] == 3, entries[1]
assert entries[1]["event"]["type"] == "poisson_sampled", entries[1]
print("released", len(released), "distinct images; ledger", entries)
PY
private_pixels=$(python3 - "$fixtures/data/tiny-fashion-mnist" "$tmp/run" <<'PY'
import gzip, sys
private = gzip.open(f"{sys.argv[1]}/train-images-idx3-ubyte.gz").read()[16:]
released = gzip.open(f"{sys.argv[2]}/released-query/train-images-idx3-ubyte.gz").read()[16:]
rows = {private[i:i + 784] for i in range(0, len(private), 784)}
print(sum(released[i:i + 784] in rows for i in range(0, len(released), 784)))
PY
)
[ "$private_pixels" = 0 ] || fail "$private_pixels released images are private records"
out=$("$privdiff" account "$tmp/run" 2>&1) || fail "account: $out"
echo "PrivImage run: released 40 public glyphs; $(grep -m1 'epsilon' <<<"$out")"

# Refusals (exit 2, before anything is written): public_data naming the private data, or nothing.
recipe private > "$tmp/bad.toml"
code=0
out=$("$privdiff" run "$tmp/bad.toml" --out "$tmp/bad" 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "public_data = 'private' and may only read data marked public" <<<"$out" \
  || fail "public_data = private: exit $code: $out"
[ ! -e "$tmp/bad/ledger.json" ] || fail "a refused run wrote a ledger"
recipe nowhere > "$tmp/none.toml"
code=0
out=$("$privdiff" validate "$tmp/none.toml" 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "public_data = 'nowhere' names no dataset section" <<<"$out" || fail "public_data = nowhere: exit $code: $out"
# Refused before anything is spent: a classifier depth no ResNet has; a release per class of a model
# without classes, even when no later stage names it.
code=0
out=$("$privdiff" validate "$tmp/r.toml" --set stage.0.classifier_depth=10 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "^--set 'stage.0.classifier_depth=10': stage\[0\]\.classifier_depth: a ResNet's depth is 6n + 2" <<<"$out" ||
  fail "depth 10 (at its --set): exit $code: $out"
# A query noise no target can afford: PRV cannot even hold its privacy loss; the stage's noise is
# blamed at its key, not the accountant's grid (issue 69's re-trial).
code=0
out=$("$privdiff" validate "$tmp/r.toml" --set stage.0.noise_multiplier=1e-6 --set privacy.accountant=prv 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "stage\[0\]\.noise_multiplier: spends more than prv can account" <<<"$out" ||
  fail "query noise 1e-6: exit $code: $out"
# More classes selected or counted than the public data has: refused by validate at the key (the
# mechanism's check_public_data), and by run before the run directory is made (issue 69).
sed 's/^top_k = 2$/top_k = 17/' "$tmp/r.toml" > "$tmp/top17.toml"
code=0
out=$("$privdiff" validate "$tmp/top17.toml" 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "top17.toml:[0-9]*:[0-9]*: stage\[0\]\.top_k: 17 is more than the public data's 16 classes" <<<"$out" \
  || fail "top_k 17: exit $code: $out"
code=0
out=$("$privdiff" validate "$tmp/r.toml" --set stage.0.select=17 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "stage\[0\]\.select: 17 is more than the public data's 16 classes" <<<"$out" \
  || fail "select 17: exit $code: $out"
code=0
out=$("$privdiff" run "$tmp/r.toml" --set stage.0.top_k=17 --out "$tmp/top17" 2>&1) || code=$?
[ "$code" = 2 ] && [ ! -e "$tmp/top17" ] || fail "run with top_k 17: exit $code, $(ls "$tmp/top17" 2>&1): $out"
sed -e 's/^num_classes = 10$/num_classes = 0/' -e '/^\[\[stage\]\]$/,$d' "$tmp/r.toml" > "$tmp/uncond.toml"
sed -n '/^\[\[stage\]\]$/,/^secure_noise/p' "$tmp/r.toml" | sed '/^secure_noise/q' >> "$tmp/uncond.toml"
code=0
out=$("$privdiff" validate "$tmp/uncond.toml" 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "stage\[0\] 'query' releases images per class: the model must be class-conditional" <<<"$out" \
  || fail "an unconditional model: exit $code: $out"
echo "1 passed, 0 failed"
