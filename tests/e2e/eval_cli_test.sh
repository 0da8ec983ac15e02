#!/usr/bin/env bash
# privdiff sample and eval as a user runs them.
#  1. sample -> eval on a tiny run and the tiny fixture data (the whole pipeline, seconds);
#  2. corrupt and mislabelled sample files give clear errors.
# The scores on real images are e2e.eval_real_data's (label extended).
# Usage: eval_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny="$fixtures/data/tiny-fashion-mnist"

# 1. A tiny run, sampled and evaluated.
cat > "$tmp/r.toml" <<TOML
[run]
seed = 3
[privacy]
epsilon = 5.0
delta = 1e-5
[data]
path = "$tiny"
$tiny_model
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 2
[sampler]
type = "edm_heun"
steps = 3
TOML
"$privdiff" run "$tmp/r.toml" --out "$tmp/run" >/dev/null 2>&1 || fail "tiny run failed"
# [[eval]] in a run scores against held-out data by default; against the training data only when
# asked, and then the run carries a caveat (privacy.json, the ledger, eval-0.json).
printf '[[eval]]\nsamples = 20\nepochs = 1\nreference = "training"\n[eval.dpdm_classifiers]\nclassifiers = ["logreg"]\n' > "$tmp/eval.toml"
cat "$tmp/r.toml" "$tmp/eval.toml" > "$tmp/r-eval.toml"
"$privdiff" run "$tmp/r-eval.toml" --out "$tmp/run-eval" >/dev/null 2>&1 || fail "run with [[eval]] reference = training failed"
python3 - "$tmp/run-eval" <<'PY' || fail "[[eval]] reference = training"
import json, sys
d = sys.argv[1]
e = json.load(open(f"{d}/eval-0.json"))
assert e["reference"] == "train" and len(e["caveats"]) == 1, e
assert set(e["evaluators"]) == {"dpdm_classifiers", "feature_cnn"}, e
assert list(e["evaluators"]["dpdm_classifiers"]["metrics"]) == ["accuracy.logreg"], e
caveats = json.load(open(f"{d}/privacy.json"))["caveats"]
assert any(c.startswith("eval-0.json: scored against the run's own training data") for c in caveats), caveats
assert caveats == json.load(open(f"{d}/ledger.json"))["caveats"], caveats
PY
# An evaluator that selects on the training split (benchmark_classifiers, selection = "real") puts
# that on the run's guarantee too.
printf '[[eval]]\nsamples = 20\nepochs = 1\nevaluators = ["benchmark_classifiers"]\n[eval.benchmark_classifiers]\nnetworks = ["resnet"]\nselection = "real"\nbatch_size = 8\n' \
  | cat "$tmp/r.toml" - > "$tmp/r-select.toml"
"$privdiff" run "$tmp/r-select.toml" --out "$tmp/run-select" >/dev/null 2>&1 || fail "run with selection = real failed"
python3 - "$tmp/run-select" <<'PY' || fail "selection = real caveat"
import json, sys
caveats = json.load(open(f"{sys.argv[1]}/privacy.json"))["caveats"]
assert any(c.startswith("eval-0.json: an evaluator read the run's training data (train split); benchmark_classifiers: the epochs were selected on") for c in caveats), caveats
PY
sed -e 's/reference = "training"/reference = "held_out"/' "$tmp/eval.toml" | cat "$tmp/r.toml" - > "$tmp/r-eval.toml"
out=$("$privdiff" run "$tmp/r-eval.toml" --set data.split=test --out "$tmp/run-eval2" 2>&1) \
  && fail "ran [[eval]] against held-out data that is the training split"
grep -q 'eval\[0\].reference: "held_out" scores against the test split, but the run trains on it' <<<"$out" \
  || fail "no held-out refusal: $out"
# ... decided by content, not by the split's name: a test split holding the training records.
mkdir -p "$tmp/same-splits"
cp "$tiny/train-images-idx3-ubyte.gz" "$tiny/train-labels-idx1-ubyte.gz" "$tmp/same-splits/"
cp "$tiny/train-images-idx3-ubyte.gz" "$tmp/same-splits/t10k-images-idx3-ubyte.gz"
cp "$tiny/train-labels-idx1-ubyte.gz" "$tmp/same-splits/t10k-labels-idx1-ubyte.gz"
for command in validate run; do
  out=$("$privdiff" $command "$tmp/r-eval.toml" --set "data.path=\"$tmp/same-splits\"" \
        $([ $command = run ] && echo --out "$tmp/run-same") 2>&1) && fail "$command: [[eval]] held out against the training records"
  grep -q 'eval\[0\].reference: "held_out" scores against the test split of .data., but it holds [0-9]* records of the data the run trains on privately' \
    <<<"$out" || fail "no content held-out refusal ($command): $out"
done
[ ! -e "$tmp/run-same" ] || fail "a refused run left a directory"
out=$("$privdiff" sample "$tmp/run" --count 30 --batch-size 16 --sampler ddim --set sampler.steps=3 2>&1) || fail "sample: $out"
grep -q "sampled 30/30" <<<"$out" || fail "no sampling progress: $out"
for f in ddim-30-images-idx3-ubyte.gz ddim-30-labels-idx1-ubyte.gz ddim-30-grid.png; do
  [ -s "$tmp/run/samples/$f" ] || fail "sample wrote no $f"
done
out=$("$privdiff" sample "$tmp/run" --set model.channels=4 2>&1) && fail "sample accepted a model override"
grep -q "only sampler.KEY=VALUE applies" <<<"$out" || fail "no override message: $out"
out=$("$privdiff" sample "$tmp/run" --sampler edm_hune 2>&1) && fail "sample accepted an unknown sampler"
grep -q "sample --sampler edm_hune: unknown sampler 'edm_hune' (did you mean 'edm_heun'?)" <<<"$out" \
  || fail "no unknown-sampler message: $out"
json=$("$privdiff" eval "$tmp/run/samples/ddim-30-images-idx3-ubyte.gz" --real-path "$tiny" --classifiers logreg,mlp \
       --epochs 1 --json 2>"$tmp/log") || fail "eval on the tiny run: $(cat "$tmp/log")"
python3 - "$json" "$tmp/run" <<'PY' || fail "eval output: $json"
import json, sys
r = json.loads(sys.argv[1])
accuracy = r["evaluators"]["dpdm_classifiers"]["metrics"]
assert set(accuracy) == {"accuracy.logreg", "accuracy.mlp"}, r
assert all(0 <= a <= 1 for a in accuracy.values()), r
fidelity = r["evaluators"]["feature_cnn"]
assert set(fidelity["metrics"]) == {"frechet_distance", "frechet_floor", "precision", "recall", "alignment"}, fidelity
assert 0 <= fidelity["metrics"]["alignment"] <= 1, fidelity
assert "not Inception" in fidelity["provenance"], fidelity
assert r["counts"]["samples"] == 30, r["counts"]
assert r["real"] == "tiny-fashion-mnist", r["real"]  # --real-path names the data by its directory
# The default reference is the test split, disjoint from training data: no caveat, train never read.
assert r["reference"] == "test" and r["caveats"] == [] and "real_train" not in r["counts"], r
e = json.load(open(f"{sys.argv[2]}/eval.json"))
assert e["evaluators"]["dpdm_classifiers"]["metrics"] == accuracy, e
lines = [json.loads(l) for l in open(f"{sys.argv[2]}/metrics.jsonl")]
assert "eval" in lines[-1], lines[-1]
PY
# privdiff eval follows [[eval]]'s rules (issue 36): real data holding the run's private records
# (by content: here the training split, with --reference train) is refused, and nothing is
# written; --allow-private-data scores it and puts a caveat where the run's privacy is reported.
cp "$tmp/run/eval.json" "$tmp/eval-before.json"
cp "$tmp/run/ledger.json" "$tmp/ledger-before.json"
sample="$tmp/run/samples/ddim-30-images-idx3-ubyte.gz"
out=$("$privdiff" eval "$sample" --real-path "$tiny" --reference train --classifiers logreg --epochs 1 2>&1); code=$?
[ $code = 2 ] || fail "eval against the run's private training split: exit $code, not 2: $out"
grep -q "the train split of tiny-fashion-mnist (train) holds [0-9]* records of the data run .* trained on privately" <<<"$out" \
  || fail "no private-reference refusal: $out"
grep -q -- "--allow-private-data" <<<"$out" || fail "the refusal names no opt-in: $out"
cmp -s "$tmp/run/eval.json" "$tmp/eval-before.json" || fail "a refused eval rewrote eval.json"
cmp -s "$tmp/run/ledger.json" "$tmp/ledger-before.json" || fail "a refused eval rewrote ledger.json"
out=$("$privdiff" eval "$sample" --real-path "$tiny" --reference train --classifiers logreg --epochs 1 \
      --allow-private-data 2>&1) || fail "eval --allow-private-data: $out"
python3 - "$tmp/run" <<'PY' || fail "eval --allow-private-data left no caveat on the run"
import json, sys
d = sys.argv[1]
want = lambda cs: any(c.startswith("eval.json (privdiff eval --allow-private-data): scored against the train split") for c in cs)
assert want(json.load(open(f"{d}/eval.json"))["caveats"]), "eval.json"
for f in ("ledger.json", "privacy.json", "summary.json"):
    assert want(json.load(open(f"{d}/{f}"))["caveats"]), f
PY
"$privdiff" account "$tmp/run" | grep -q "CAVEAT: eval.json (privdiff eval --allow-private-data)" \
  || fail "account shows no eval caveat: $("$privdiff" account "$tmp/run" 2>&1)"
"$privdiff" compare "$tmp/run" --out "$tmp/cmp" > "$tmp/cmp.md" 2>&1 || fail "compare: $(cat "$tmp/cmp.md")"
python3 - "$tmp/cmp/compare.csv" <<'PY' || fail "compare shows no caveat: $(cat "$tmp/cmp/compare.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert int(rows[0]["caveats"]) >= 1, rows
PY
# A run trained privately on the test split: the default (--reference test) is its own data.
"$privdiff" run "$tmp/r.toml" --set data.split=test --out "$tmp/run-test" >/dev/null 2>&1 || fail "run on the test split"
out=$("$privdiff" eval "$sample" --run "$tmp/run-test" --real-path "$tiny" --classifiers logreg --epochs 1 2>&1); code=$?
[ $code = 2 ] || fail "eval of a run trained on the test split against it: exit $code: $out"
grep -q "the test split of tiny-fashion-mnist (test) holds [0-9]* records of" <<<"$out" || fail "no test-split refusal: $out"
[ ! -e "$tmp/run-test/eval.json" ] || fail "a refused eval wrote eval.json"
# A run's images are its own wherever they are (issue 67): a copy of its samples elsewhere (known by the
# run's stamp in the files' gzip headers) and images in the run directory outside samples/ (a stage's
# release, released-NAME/; re-encoded here, so without the stamp) are scored under its rules, no --run.
mkdir -p "$tmp/copy" "$tmp/run/released-x"
cp "$tmp/run/samples/ddim-30-images-idx3-ubyte.gz" "$tmp/run/samples/ddim-30-labels-idx1-ubyte.gz" "$tmp/copy/"
python3 - "$tmp/run/samples/ddim-30" "$tmp/run/released-x/train" <<'PY'
import gzip, sys
for kind in ("images-idx3", "labels-idx1"):
    data = gzip.open(f"{sys.argv[1]}-{kind}-ubyte.gz").read()
    with gzip.open(f"{sys.argv[2]}-{kind}-ubyte.gz", "wb") as f:
        f.write(data)
PY
for set in "$tmp/copy/ddim-30-images-idx3-ubyte.gz" "$tmp/run/released-x/train-images-idx3-ubyte.gz"; do
  out=$("$privdiff" eval "$set" --real-path "$tiny" --reference train --evaluator feature_cnn 2>&1); code=$?
  [ $code = 2 ] || fail "eval of $set (the run's) against its private training split: exit $code, not 2: $out"
  grep -q "the train split of tiny-fashion-mnist (train) holds [0-9]* records of the data run .* trained on privately" \
    <<<"$out" || fail "no private-reference refusal for $set: $out"
  grep -Eq "^$set (carries the stamp of|lies in) run( directory)? $tmp/run: scored under that run's rules" <<<"$out" \
    || fail "the run of $set is not named: $out"
done
# The run moved: its stamp names a directory that is no run; --run naming it where it is now (the same
# recipe.toml) resolves it, and --allow-private-data scores with a caveat saying nothing was compared.
mv "$tmp/run" "$tmp/run-moved"
out=$("$privdiff" eval "$tmp/copy/ddim-30-images-idx3-ubyte.gz" --real-path "$tiny" 2>&1); code=$?
[ $code = 2 ] && grep -q "carries the stamp of run $tmp/run, which is not a privdiff run directory here: .*give --run DIR" \
  <<<"$out" || fail "a copy of a moved run's samples: exit $code: $out"
out=$("$privdiff" eval "$tmp/copy/ddim-30-images-idx3-ubyte.gz" --run "$tmp/run-moved" --real-path "$tiny" \
      --reference train --evaluator feature_cnn 2>&1); code=$?
[ $code = 2 ] && grep -q "holds [0-9]* records of the data run .* trained on privately" <<<"$out" \
  || fail "--run naming the moved run: exit $code: $out"
json=$("$privdiff" eval "$tmp/copy/ddim-30-images-idx3-ubyte.gz" --real-path "$tiny" --evaluator dpdm_classifiers \
       --classifiers logreg --epochs 1 --allow-private-data --json 2>"$tmp/log") || fail "allowed: $(cat "$tmp/log")"
grep -q "not compared with its private data" <<<"$json" || fail "no caveat for an unresolved stamp: $json"
mv "$tmp/run-moved" "$tmp/run"

# 2. Corrupt and mislabelled files.
python3 "$(dirname "$0")/../../scripts/make_noise_idx.py" "$tmp/noise" 1000 || fail "cannot write the noise set"
head -c 500 "$tmp/noise-images-idx3-ubyte.gz" > "$tmp/bad-images-idx3-ubyte.gz"
cp "$tmp/noise-labels-idx1-ubyte.gz" "$tmp/bad-labels-idx1-ubyte.gz"
out=$("$privdiff" eval "$tmp/bad-images-idx3-ubyte.gz" 2>&1); code=$?
[ $code -eq 2 ] || fail "a truncated file: exit $code (want 2, bad input): $out"
grep -q "bad-images-idx3-ubyte.gz" <<<"$out" || fail "the corrupt file is not named: $out"
python3 - "$tmp" <<'PY'
import gzip, struct, sys
with gzip.open(f"{sys.argv[1]}/noise-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, 1000) + bytes([12] + [i % 10 for i in range(999)]))
PY
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --classifiers logreg --epochs 1 2>&1) && fail "eval accepted label 12"
grep -q "label 12 at index 0 is not a class of fashion-mnist" <<<"$out" || fail "no mislabelled message: $out"
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --labels "$tmp/r.toml" 2>&1); code=$?
[ $code -eq 2 ] || fail "a TOML label file: exit $code (want 2): $out"
grep -q "r.toml" <<<"$out" || fail "the bad labels file is not named: $out"
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --real cifar100 2>&1); code=$?
[ $code -eq 2 ] || fail "--real cifar100: exit $code (want 2): $out"
grep -q "^--real cifar100: real.dataset: unknown dataset 'cifar100' (did you mean 'cifar10'?)" <<<"$out" || fail "no --real message: $out"
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --evaluator incepton 2>&1); code=$?
[ $code -eq 2 ] || fail "--evaluator incepton: exit $code (want 2): $out"
grep -q "unknown evaluator 'incepton' (did you mean 'inception'?)" <<<"$out" || fail "no --evaluator message: $out"
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --set dpdm_classifiers.epoch=3 2>&1); code=$?
[ $code -eq 2 ] || fail "--set dpdm_classifiers.epoch: exit $code (want 2): $out"
grep -q "dpdm_classifiers.epoch: unknown key 'epoch' (did you mean 'epochs'?)" <<<"$out" || fail "no --set message: $out"
# A key privdiff eval would ignore is refused, naming it (the split is --reference's).
out=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --set real.split=train 2>&1); code=$?
[ $code -eq 2 ] && grep -q "^--set 'real.split=train': real.split: privdiff eval does not use it" <<<"$out" \
  || fail "--set real.split=train: exit $code (want 2): $out"
out=$(env -u PRIVDIFF_INCEPTION_WEIGHTS "$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --evaluator inception 2>&1); code=$?
[ $code -eq 2 ] || fail "inception without weights: exit $code (want 2): $out"
grep -q "inception.weights: the inception evaluator needs pytorch-fid's Inception weights" <<<"$out" || fail "no weights message: $out"
echo "1 passed, 0 failed"
