#!/usr/bin/env bash
# Private Evolution end to end and tiny (issue 53): a non-private stage trains the generator on public
# glyphs; a private_evolution stage trains an embedding classifier on them, then for 2 iterations
# releases the private images' noisy nearest-neighbour votes, resamples and varies the synthetic set,
# and releases the last generation. Checks the release (its size and labels, no private record among
# it), the ledger (2 Gaussians of the calibrated sigma, nothing else), that `account` re-derives
# epsilon within the target, that `eval` scores the release, that check-mechanism replays the stage, and refusals (public_data naming the
# private data, more votes per record than images per class).
# Usage: private_evolution_cli_test.sh PRIVDIFF FIXTURE_DIR
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
characters = "ABCDEFGHIJ"
per_class = 6
cache = "$tmp/glyphs"
[data.private]
path = "$fixtures/data/tiny-fashion-mnist"
$tiny_model
num_classes = 10
[[stage]]
name = "pretrain"
mechanism = "nonprivate"
data = "public"
batch_size = 8
steps = 2
ema = 0
[[stage]]
name = "evolve"
mechanism = "private_evolution"
data = "private"
public_data = "$1"
iterations = 2
samples_per_class = 3
sampler_steps = 3
classifier_epochs = 1
secure_noise = false
[sampler]
type = "ddim"
steps = 2
TOML
}
recipe public > "$tmp/r.toml"
"$privdiff" run "$tmp/r.toml" --out "$tmp/run" > "$tmp/log" 2>&1 || fail "the PE run: $(tail -20 "$tmp/log")"
# Progress while it runs, the counts only after the release (issue 69).
progress=$(grep -n "private_evolution: iteration 2/2: voting and generating" "$tmp/log" | cut -d: -f1)
counts=$(grep -n "private_evolution: iteration 1/2: [0-9]* of 30 synthetic images kept" "$tmp/log" | cut -d: -f1)
[ -n "$progress" ] && [ -n "$counts" ] && [ "$progress" -lt "$counts" ] || fail "no progress before the counts: $(cat "$tmp/log")"
grep -q "private_evolution: iteration 2/2: [0-9]* of 30 synthetic images kept" "$tmp/log" \
  || fail "no second iteration in the log: $(cat "$tmp/log")"
grep -q "released 30 images as data 'evolve'" "$tmp/log" || fail "no release of 30 images: $(cat "$tmp/log")"
python3 - "$tmp/run" "$fixtures/data/tiny-fashion-mnist" <<'PY' || fail "the release or the ledger"
import gzip, json, sys
run, private = sys.argv[1:3]
images = gzip.open(f"{run}/released-evolve/train-images-idx3-ubyte.gz").read()[16:]
labels = list(gzip.open(f"{run}/released-evolve/train-labels-idx1-ubyte.gz").read()[8:])
assert labels == [c for c in range(10) for _ in range(3)], labels  # samples_per_class per class
rows = gzip.open(f"{private}/train-images-idx3-ubyte.gz").read()[16:]
rows = {rows[i:i + 784] for i in range(0, len(rows), 784)}
assert not any(images[i:i + 784] in rows for i in range(0, len(images), 784)), "a private record was released"
entries = json.load(open(f"{run}/ledger.json"))["entries"]
# One Gaussian per iteration on all records (q = 1), sigma as calibrated, and nothing else.
assert len(entries) == 1 and entries[0]["type"] == "self_composed" and entries[0]["count"] == 2, entries
assert entries[0]["event"]["type"] == "gaussian", entries
print("ledger", entries)
PY
out=$("$privdiff" account "$tmp/run" 2>&1) || fail "account: $out"
awk '$1 == "rdp" { exit !($2 <= 8.0 && $2 > 7.0) }' <<<"$out" || fail "account's rdp epsilon is not within (7, 8]: $out"
out=$("$privdiff" eval "$tmp/run/released-evolve/train-images-idx3-ubyte.gz" --run "$tmp/run" \
  --evaluator dpdm_classifiers --classifiers logreg --epochs 1 2>&1) || fail "eval of the release: $out"
[ -s "$tmp/run/eval.json" ] || fail "eval recorded nothing in the run"
# Without --run the release is still the run's (issue 67): real data holding its private records are refused.
code=0
out=$("$privdiff" eval "$tmp/run/released-evolve/train-images-idx3-ubyte.gz" --real-path "$fixtures/data/tiny-fashion-mnist" \
  --reference train --classifiers logreg --epochs 1 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "the train split of tiny-fashion-mnist (train) holds [0-9]* records of the data run" <<<"$out" \
  || fail "eval of the release against the private data without --run: exit $code: $out"
echo "PE run: released 30 synthetic images; $(grep -m1 '^rdp' <<<"$("$privdiff" account "$tmp/run")")"

# check-mechanism replays the stage (its own code, the recipe's model and public data, stand-in records):
# each x moves the first iteration's votes by exactly the declared sqrt(votes_per_record) = 1.
out=$("$privdiff" check-mechanism "$tmp/r.toml" 2>&1) || fail "check-mechanism: $out"
grep -q "which releases noisy statistics" <<<"$out" && grep -Eq "x = every pixel \+1, votes, iteration 1 +1 / 1$" <<<"$out" \
  && grep -q "^PASSED" <<<"$out" || fail "check-mechanism's replay: $out"

# Refused before anything is written: public_data naming the private data.
recipe private > "$tmp/bad.toml"
code=0
out=$("$privdiff" run "$tmp/bad.toml" --out "$tmp/bad" 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "public_data = 'private' and may only read data marked public" <<<"$out" \
  || fail "public_data = private: exit $code: $out"
[ ! -e "$tmp/bad/ledger.json" ] || fail "a refused run wrote a ledger"
# Refused before anything is read: as many votes per record as synthetic images per class (the histogram
# would say nothing), or more.
for votes in 3 4; do
  code=0
  out=$("$privdiff" validate "$tmp/r.toml" --set stage.1.votes_per_record=$votes 2>&1) || code=$?
  [ "$code" = 2 ] && grep -q "^--set 'stage.1.votes_per_record=$votes': stage\[1\]\.votes_per_record: must be below samples_per_class (3), got $votes" <<<"$out" ||
    fail "votes $votes (at its --set): exit $code: $out"
done
# A classifier embedding needs public data of two classes or more: refused at the key before a run.
code=0
out=$("$privdiff" validate "$tmp/r.toml" --set 'data.public.classes=[3]' 2>&1) || code=$?
[ "$code" = 2 ] && grep -q "stage\[1\]\.embedding: .*needs records of at least 2 classes" <<<"$out" || fail "one public class: exit $code: $out"
echo "1 passed, 0 failed"
