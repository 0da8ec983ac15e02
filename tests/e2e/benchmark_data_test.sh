#!/usr/bin/env bash
# The benchmark's RGB datasets end to end, on fixtures in their official formats (tests/fixtures/
# cifar10, celeba): a private run on each with [[eval]] scoring its samples (CIFAR-10: every
# evaluator — DPDM's classifiers, the feature CNN, Inception on the tiny fixture weights (a width/16
# network: allowed as unverified weights, so its numbers are labelled not comparable),
# DPImageBench's ResNet at 1 epoch; CelebA: DPDM's classifiers and Inception), samples.png, privdiff sample + eval with --real, and compare showing
# each metric under the evaluator that produced it. Tiny: proves the plumbing, not the numbers.
# Usage: benchmark_data_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
cifar="$fixtures/cifar10/cifar-10-batches-bin"
celeba="$fixtures/celeba"
weights="$fixtures/inception/tiny_fid_inception.pth"

# recipe NAME DATA_SECTION CLASSES EVALUATORS: a tiny RGB 32x32 private run scored by EVALUATORS
# (ResNet alone of the benchmark's classifiers: the three networks, layer for layer, are sdk_tests'
# BenchmarkClassifiers.*; here the plumbing is the point, and WRN-28-10 / ResNeXt-28 cost ~15 s).
recipe() {
  cat > "$tmp/$1.toml" <<TOML
[run]
name = "$1"
seed = 5
[privacy]
epsilon = 8.0
delta = 1e-5
$2
[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [16]
image_size = 32
image_channels = 3
num_classes = $3
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 2
[sampler]
type = "edm_heun"
steps = 2
[[eval]]
samples = 24
epochs = 1
evaluators = $4
[eval.dpdm_classifiers]
classifiers = ["logreg", "cnn"]
[eval.inception]
weights = "$weights"
allow_unverified_weights = true
is_splits = 2
TOML
  if grep -q benchmark_classifiers <<<"$4"; then
    printf '[eval.benchmark_classifiers]\nnetworks = ["resnet"]\nbatch_size = 8\n' >> "$tmp/$1.toml"
  fi
}

recipe cifar '[data]
dataset = "cifar10"
path = "'"$cifar"'"' 10 '["dpdm_classifiers", "feature_cnn", "inception", "benchmark_classifiers"]'
recipe celeba '[data]
dataset = "celeba"
path = "'"$celeba"'"
image_size = 32' 2 '["dpdm_classifiers", "inception"]'
for r in cifar celeba; do
  out=$("$privdiff" run "$tmp/$r.toml" --out "$tmp/$r" 2>&1) || fail "$r run: $out"
  [ -s "$tmp/$r/samples.png" ] || fail "$r: no samples.png"
  python3 - "$tmp/$r" <<'PY' || fail "$r eval-0.json"
import json, sys
e = json.load(open(f"{sys.argv[1]}/eval-0.json"))
ev = e["evaluators"]
cifar = sys.argv[1].endswith("cifar")
want = {"dpdm_classifiers", "feature_cnn", "inception", "benchmark_classifiers"} if cifar else {"dpdm_classifiers", "inception"}
assert set(ev) == want, list(ev)
assert set(ev["dpdm_classifiers"]["metrics"]) == {"accuracy.logreg", "accuracy.cnn"}, ev["dpdm_classifiers"]
# Not pytorch-fid's weights: every Inception number says not comparable (names, provenance, caveats).
assert set(ev["inception"]["metrics"]) == {m + "_not_comparable" for m in ["fid", "fid_floor", "inception_score", "inception_score_std", "precision", "recall"]}, ev["inception"]
assert ev["inception"]["metrics"]["fid_not_comparable"] > 0 and ev["inception"]["metrics"]["inception_score_not_comparable"] >= 1, ev["inception"]
assert "tiny_fid_inception.pth" in ev["inception"]["provenance"], ev["inception"]["provenance"]
assert ev["inception"]["provenance"].startswith("NOT COMPARABLE with published FIDs: "), ev["inception"]["provenance"]
assert any(c.startswith("not comparable with published FIDs") for c in ev["inception"]["caveats"]), ev["inception"]
assert any("FID on 24 samples" in c for c in ev["inception"]["caveats"]), ev["inception"]
if cifar:
    bench = ev["benchmark_classifiers"]
    assert set(bench["metrics"]) == {"accuracy.resnet", "accuracy.mean"}, bench
    assert bench["metrics"]["accuracy.mean"] == bench["metrics"]["accuracy.resnet"], bench
    # CIFAR is the benchmark's "cifar" regime: ResNet-164, SGD.
    assert "cifar settings: ResNet-164" in bench["provenance"] and "1 epochs, SGD" in bench["provenance"], bench
assert e["reference"] == "test" and e["counts"]["samples"] == 24, e
PY
done

# compare: the Inception columns come from the inception evaluator, never mixed with the feature CNN's.
out=$("$privdiff" compare "$tmp/cifar" "$tmp/celeba" --out "$tmp/report" 2>&1) || fail "compare: $out"
grep -q "| fid_not_comparable \[inception\] |" <<<"$out" || fail "no inception FID column: $out"
grep -q "| fid \[inception\] |" <<<"$out" && fail "FIDs of unverified weights under the name of comparable ones: $out"
grep -q "| frechet_distance \[feature_cnn\] |" <<<"$out" || fail "no feature-CNN column: $out"
grep -q "| accuracy.mean \[benchmark_classifiers\] |" <<<"$out" || fail "no benchmark mean column: $out"
grep -q "inception: NOT COMPARABLE with published FIDs: Inception-V3 as pytorch-fid" "$tmp/report/report.html" \
  || fail "no provenance in report.html"

# privdiff sample + eval against the real data named by --real, Inception alone.
# (its eval.json replaces the run's: the latest evaluation is the run's)
"$privdiff" sample "$tmp/cifar" --count 20 --out "$tmp/cifar/samples/s" >/dev/null 2>&1 || fail "sample"
json=$("$privdiff" eval "$tmp/cifar/samples/s-images-idx3-ubyte.gz" --real cifar10 --real-path "$cifar" \
       --evaluator inception --set inception.weights="$weights" --set inception.allow_unverified_weights=true \
       --set inception.is_splits=2 --json 2>"$tmp/log") \
  || fail "eval --real cifar10: $(cat "$tmp/log")"
python3 - "$json" <<'PY' || fail "eval --real cifar10: $json"
import json, sys
r = json.loads(sys.argv[1])
assert r["real"] == "cifar10" and list(r["evaluators"]) == ["inception"], r
assert r["counts"] == {"samples": 20, "real_test": 10}, r["counts"]
PY
grep -q "reference statistics: .* (cached)" "$tmp/log" || fail "the Inception reference statistics were not cached: $(cat "$tmp/log")"
# RGB samples scored against grey data: refused, naming both.
out=$("$privdiff" eval "$tmp/cifar/samples/s-images-idx3-ubyte.gz" 2>&1); code=$?
[ $code -eq 2 ] || fail "RGB samples against fashion-mnist: exit $code: $out"
grep -q "the images are 32x32 with 3 channel(s); fashion-mnist images are 28x28 with 1" <<<"$out" || fail "no shape message: $out"

echo "1 passed, 0 failed"
