#!/usr/bin/env bash
# What a lent GPU machine is for, in one call that ends within SECONDS (docs/gpus.md): builds privdiff
# against the machine's pip PyTorch with CUDA on, runs `ctest -L gpu`, bench/run_gpu_bench.sh (beside
# PyTorch and Opacus on the same GPU), a profile of the DP step at each shape (GPU kernels per phase,
# bench/profile_summary.py), then a slice of DPDM's paper schedule: PAPER_STEPS logical steps, a
# checkpoint, and a resume for what time is left (stopped by SIGTERM after its step's checkpoint), whose
# progress lines give the projection for its 4,395 steps. Each part writes its log into OUTDIR; a part
# that fails does not stop the next.
# Usage: bench/gpu_check.sh OUTDIR [SECONDS]   (Opacus first: pip install opacus==1.6.0)
#   GPU_BENCH_SHAPES (default "256x1 1024x1 64x8 32x32"), GPU_BENCH_BF16=0 (no bf16 column),
#   PAPER_STEPS (default 4), PAPER_PHYSICAL_BATCH (default 128), PAPER_CLIP_PASSES (one or two, default
#   one: the stage's clip_passes), GPU_CHECK_PARTS (default
#   "tests bench profile paper": a lease too short for all picks some; the build always comes first),
#   GPU_CHECK_TARGETS (what the build makes; `ctest -L gpu` needs all of the default's)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out=$1
deadline=$(($(date +%s) + ${2:-540}))
left() { echo $((deadline - $(date +%s))); }
parts=" ${GPU_CHECK_PARTS:-tests bench profile paper} "
wanted() { [[ $parts == *" $1 "* ]]; }
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
  PRIVDIFF_BUILD_TARGETS=${GPU_CHECK_TARGETS:-privdiff privdiff_plugins gpu_tests engine_bench checkpoint_diff} \
  timeout "$(left)" scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=4 > "$out/build.log" 2>&1 \
  || { grep -m20 -B2 -A8 'error' "$out/build.log" || tail -40 "$out/build.log"; exit 1; }
echo "== build: $(($(date +%s) - start)) s"

if wanted tests; then
  [ "$(left)" -gt 30 ] || { echo "== no time left for the tests and the bench"; exit 1; }
  start=$(date +%s)
  (cd "$build" && timeout "$(upto 240)" ctest -L gpu --output-on-failure --timeout 200) > "$out/ctest_gpu.log" 2>&1
  grep -E 'tests passed|Failed|\*\*\*|Not Run|Skipped|FAILED|Expected|Which is|Value of' "$out/ctest_gpu.log" | head -30
  echo "== ctest -L gpu: $(($(date +%s) - start)) s"
fi

if wanted bench; then
  [ "$(left)" -gt 30 ] || { echo "== no time left for the bench"; exit 1; }
  start=$(date +%s)
  GPU_BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-75} timeout "$(upto 300)" \
    bench/run_gpu_bench.sh "$build/bin/engine_bench" 3 "$out/gpu_bench.jsonl" 2>&1 | tee "$out/gpu_bench.md"
  echo "== bench: $(($(date +%s) - start)) s"
fi

if wanted profile && [ "$(left)" -gt 30 ]; then  # each shape: the step's time, then 2 profiled steps
  start=$(date +%s)
  : > "$out/profile.txt"
  for shape in ${GPU_BENCH_SHAPES:-256x1 1024x1 64x8 32x32}; do
    [ "$(left)" -gt 40 ] || break
    b=${shape%x*} k=${shape#*x}
    { echo "== $shape: $(timeout "$(upto 60)" "$build/bin/engine_bench" dp_step "$b" "$k" 3 cuda 2> /dev/null | tail -1)"
      PRIVDIFF_BENCH_PROFILE=/tmp/trace_$shape.json timeout "$(upto 60)" "$build/bin/engine_bench" dp_step "$b" "$k" 2 cuda \
        > /dev/null 2>&1 && python3 bench/profile_summary.py "/tmp/trace_$shape.json" 2 8; } >> "$out/profile.txt" 2>&1
  done
  grep -E '^== |^GPU:' -A12 "$out/profile.txt" | grep -v '^--' | cut -c1-220 | head -90
  echo "== profiles: $(($(date +%s) - start)) s"
fi

if wanted paper && [ "$(left)" -gt 60 ]; then  # the paper schedule: a few logical steps, a checkpoint, a resume
  rm -rf /tmp/paper-run  # a rerun on the same warm machine starts it afresh
  paper=(--set run.device=cuda --set stage.0.physical_batch_size="${PAPER_PHYSICAL_BATCH:-128}"
         --set stage.0.clip_passes="${PAPER_CLIP_PASSES:-one}")
  timeout "$(($(left) - 40))" "$build/bin/privdiff" run examples/recipes/dpdm_fmnist_eps10.toml "${paper[@]}" \
    --stop-after-steps "${PAPER_STEPS:-4}" --out /tmp/paper-run > "$out/paper_schedule.log" 2>&1
  echo "== paper schedule: stopped with exit code $? (3: checkpointed on request)"
  if [ "$(left)" -gt 30 ]; then  # resumed from that checkpoint; SIGTERM ends it after a step's checkpoint
    timeout -s TERM -k 20 "$(($(left) - 25))" "$build/bin/privdiff" run --resume /tmp/paper-run \
      > "$out/paper_resume.log" 2>&1
    echo "== resumed: exit code $? (3: checkpointed on request)"
  fi
  grep -v '^  step' "$out/paper_schedule.log" | tail -8
  grep '^  step' "$out/paper_schedule.log" "$out/paper_resume.log" 2> /dev/null | tail -4
  tail -3 "$out/paper_resume.log" 2> /dev/null
fi
