#!/usr/bin/env bash
# What a lent GPU machine is for, in one call that ends within SECONDS (docs/gpus.md): builds privdiff
# against the machine's pip PyTorch with CUDA on, runs `ctest -L gpu`, bench/run_gpu_bench.sh (beside
# PyTorch and Opacus on the same GPU), then DPDM's paper schedule for what time is left, whose progress
# lines give the projection for its 4,395 steps. Each part writes its log into OUTDIR; a part that fails
# does not stop the next.
# Usage: bench/gpu_check.sh OUTDIR [SECONDS]   (Opacus first: pip install opacus==1.6.0)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=$1
deadline=$(($(date +%s) + ${2:-540}))
left() { echo $((deadline - $(date +%s))); }
upto() { local l; l=$(left); l=$(($1 < l ? $1 : l)); echo $((l < 1 ? 1 : l)); }  # N seconds, or what is left (>= 1)
mkdir -p "$out"
build=${PRIVDIFF_BUILD_DIR:-/tmp/build-cuda}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)'
  python3 -c 'import opacus; print("opacus", opacus.__version__)'
  nvcc --version | tail -1
  echo "$(nproc) cores, $(gcc --version | head -1)"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

start=$(date +%s)
PRIVDIFF_TORCH=python PRIVDIFF_BUILD_DIR=$build \
  PRIVDIFF_BUILD_TARGETS="privdiff privdiff_plugins gpu_tests engine_bench checkpoint_diff" \
  timeout "$(left)" scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=4 > "$out/build.log" 2>&1 \
  || { grep -m20 -B2 -A8 'error' "$out/build.log" || tail -40 "$out/build.log"; exit 1; }
echo "== build: $(($(date +%s) - start)) s"

[ "$(left)" -gt 30 ] || { echo "== no time left for the tests and the bench"; exit 1; }
start=$(date +%s)
(cd "$build" && timeout "$(upto 240)" ctest -L gpu --output-on-failure --timeout 200) > "$out/ctest_gpu.log" 2>&1
grep -E 'tests passed|Failed|\*\*\*|Not Run|Skipped' "$out/ctest_gpu.log" | head -30
echo "== ctest -L gpu: $(($(date +%s) - start)) s"

[ "$(left)" -gt 30 ] || { echo "== no time left for the bench"; exit 1; }
start=$(date +%s)
GPU_BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-75} timeout "$(upto 300)" \
  bench/run_gpu_bench.sh "$build/bin/engine_bench" 3 "$out/gpu_bench.jsonl" 2>&1 | tee "$out/gpu_bench.md"
echo "== bench: $(($(date +%s) - start)) s"

if [ "$(left)" -gt 45 ]; then  # the paper schedule: its first logical steps, for the projection
  rm -rf /tmp/paper-run  # a rerun on the same warm machine starts it afresh
  timeout "$(($(left) - 10))" "$build/bin/privdiff" run examples/recipes/dpdm_fmnist_eps10.toml \
    --set run.device=cuda --set stage.0.physical_batch_size="${PAPER_PHYSICAL_BATCH:-128}" --out /tmp/paper-run \
    > "$out/paper_schedule.log" 2>&1
  grep -v '^  step' "$out/paper_schedule.log" | tail -12
  grep '^  step' "$out/paper_schedule.log" | tail -3
fi
