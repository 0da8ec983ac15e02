#!/usr/bin/env bash
# [run] device end to end. device = "cpu": the run says and records it. device = "cuda": on a
# machine with a GPU, a tiny private run, `privdiff sample` and `privdiff eval` on CUDA (and a
# resume there); without one, exit 2 with a clear message and nothing written — never a CPU run.
# Usage: device_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny="$fixtures/data/tiny-fashion-mnist"
recipe() {  # recipe DEVICE FILE
  cat > "$2" <<TOML
[run]
seed = 3
device = "$1"
checkpoint_every = 2
[privacy]
epsilon = 8.0
delta = 1e-5
[data]
path = "$tiny"
$tiny_model
[sampler]
type = "edm_heun"
steps = 2
[[stage]]
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 4
[[eval]]
samples = 20
epochs = 1
[eval.dpdm_classifiers]
classifiers = ["logreg"]
TOML
}
device_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["device"])' "$1/summary.json"; }

recipe cpu "$tmp/cpu.toml"
out=$("$privdiff" run "$tmp/cpu.toml" --out "$tmp/cpu" 2>&1) || fail "cpu run: $out"
grep -q "^device cpu" <<<"$out" || fail "no device line: $out"
[ "$(device_of "$tmp/cpu")" = cpu ] || fail "summary.json device: $(device_of "$tmp/cpu")"

recipe cuda "$tmp/cuda.toml"
out=$("$privdiff" run "$tmp/cuda.toml" --out "$tmp/cuda" 2>&1); code=$?
if grep -q 'device "cuda":' <<<"$out"; then
  [ $code -eq 2 ] || fail "cuda without a GPU: exit $code, not 2: $out"
  grep -q 'device "cuda": .*use device = "cpu"' <<<"$out" || fail "unclear refusal: $out"
  [ ! -e "$tmp/cuda" ] || fail "a refused run wrote $tmp/cuda"
  out=$("$privdiff" validate "$tmp/cuda.toml" 2>&1); code=$?  # validate refuses what run refuses (issue 52)
  [ $code -eq 2 ] && grep -q 'cuda.toml:3:[0-9]*: run.device: device "cuda"' <<<"$out" || fail "validate of device = cuda: exit $code: $out"
  out=$("$privdiff" sample "$tmp/cpu" --count 4 --device cuda 2>&1); code=$?
  [ $code -eq 2 ] && grep -q 'sample --device: device "cuda"' <<<"$out" || fail "sample --device cuda: exit $code: $out"
  out=$("$privdiff" eval "$tmp/cpu/samples/eval0-images-idx3-ubyte.gz" --real-path "$tiny" --device cuda 2>&1); code=$?
  [ $code -eq 2 ] && grep -q 'eval --device: device "cuda"' <<<"$out" || fail "eval --device cuda: exit $code: $out"
  echo "no GPU here: checked that device = \"cuda\" is refused (exit 2, nothing written); the CUDA run needs a GPU"
  echo "1 passed, 0 failed"
  exit 0
fi
[ $code -eq 0 ] || fail "cuda run: exit $code: $out"
echo "$out"
grep -q "^device cuda:0" <<<"$out" || fail "no cuda device line"
[ "$(device_of "$tmp/cuda")" = cuda:0 ] || fail "summary.json device: $(device_of "$tmp/cuda")"
[ -s "$tmp/cuda/eval-0.json" ] && [ -s "$tmp/cuda/samples.png" ] || fail "no eval or samples from the CUDA run"
# Resume on CUDA from a mid-run checkpoint (the optimizer state and streams load onto the GPU).
recipe cuda "$tmp/resume.toml"
sed -i 's/^secure_noise.*//; s/^steps = 4/steps = 4\nsecure_noise = false/' "$tmp/resume.toml"
"$privdiff" run "$tmp/resume.toml" --out "$tmp/resume" --stop-after-steps 2 > /dev/null 2>&1; [ $? -eq 3 ] || fail "stop-after on CUDA"
out=$("$privdiff" run --resume "$tmp/resume" 2>&1) || fail "resume on CUDA: $out"
out=$("$privdiff" sample "$tmp/cuda" --count 20 --device cuda 2>&1) || fail "sample on CUDA: $out"
grep -q "on cuda:0" <<<"$out" || fail "sample did not say cuda: $out"
# A checkpoint written on the GPU samples on the CPU too.
out=$("$privdiff" sample "$tmp/cuda" --count 4 --device cpu --out "$tmp/cpu-samples" 2>&1) || fail "GPU checkpoint on CPU: $out"
out=$("$privdiff" eval "$tmp/cuda/samples/edm_heun-20-images-idx3-ubyte.gz" --real-path "$tiny" --classifiers logreg,cnn \
  --epochs 1 --device cuda 2>&1) || fail "eval on CUDA: $out"
echo "CUDA: private run, resume, sample and eval passed"
echo "1 passed, 0 failed"
