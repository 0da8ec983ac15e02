#!/usr/bin/env bash
# CI's second part: privdiff against today's LibTorch, the one inside PyPI's torch (pinned in
# scripts/install_current_libtorch.sh), with CUDA on and linked against the machine's CUDA Toolkit.
# Compiles and links the SDK, the host, every plugin, the GPU tests and the engine benchmark — the
# CUDA-specific code among them (the caching allocator's statistics, NCCL process groups) — into
# build-pypi/, then runs what runs without a GPU: the GPU tests (they skip, saying why), the host
# loading every plugin, and the end-to-end checks of a private run and of two ranks over Gloo.
#
# Cost (docs/development.md#ci): cold, 4 minutes of compiling on the fast kind of 2-core machine (up to
# twice that on the slow kind), 42 s of tests. PRIVDIFF_TEST_ALL=1 builds (one source at a time) and
# runs the whole CPU suite against this LibTorch instead.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc > /dev/null || { echo "test_current_libtorch: no CUDA Toolkit (nvcc) on this machine" >&2; exit 1; }
export PRIVDIFF_BUILD_DIR=build-pypi PRIVDIFF_TORCH=pypi
if [ "${PRIVDIFF_TEST_ALL:-0}" = 1 ]; then
  scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON -DCMAKE_UNITY_BUILD=OFF
  cd build-pypi && exec env OMP_NUM_THREADS=1 ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
fi
# A unity build (8 sources per unit): LibTorch 2.15's headers are parsed once per unit instead of once
# per source, which cuts a cold compile of these targets from ~14 to ~4 minutes on 2 cores.
PRIVDIFF_BUILD_TARGETS="privdiff privdiff_plugins gpu_tests engine_bench checkpoint_diff" \
  scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8
privdiff=build-pypi/bin/privdiff
"$privdiff" --version
plugins=$("$privdiff" plugins list)
if grep -q "refused plugins" <<<"$plugins"; then
  echo "$plugins" >&2
  echo "test_current_libtorch: plugins refused against this LibTorch" >&2
  exit 1
fi
echo "$(grep -c '^  [a-z]' <<<"$plugins") components load"
cd build-pypi
OMP_NUM_THREADS=1 ctest --output-on-failure --parallel "$(nproc)" --timeout 1200 -R '^(Cuda|Device)\.|^e2e\.(private_run|multi_process)$'
