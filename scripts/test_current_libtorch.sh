#!/usr/bin/env bash
# CI's second part: privdiff against today's LibTorch, the one inside PyPI's torch (pinned in
# scripts/install_current_libtorch.sh), with CUDA on and linked against the machine's CUDA Toolkit.
# Compiles and links the SDK, the host, every plugin, the GPU tests and the engine benchmark — the
# CUDA-specific code among them (the caching allocator's statistics, NCCL process groups) — into
# build-pypi/, then runs what runs without a GPU: the GPU tests (they skip, saying why), the host
# loading every plugin, and the end-to-end checks of a private run and of two ranks over Gloo.
#
# Cost (docs/development.md#ci): with the compiler cache warm, a minute or two; cold, about 14 minutes
# on the fast kind of 2-core machine and twice that on the slow kind. PRIVDIFF_TEST_ALL=1 builds and
# runs the whole CPU suite against this LibTorch instead.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvcc > /dev/null || { echo "test_current_libtorch: no CUDA Toolkit (nvcc) on this machine" >&2; exit 1; }
export PRIVDIFF_BUILD_DIR=build-pypi PRIVDIFF_TORCH=pypi
if [ "${PRIVDIFF_TEST_ALL:-0}" = 1 ]; then
  scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON
  cd build-pypi && exec env OMP_NUM_THREADS=1 ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
fi
PRIVDIFF_BUILD_TARGETS="privdiff privdiff_plugins gpu_tests engine_bench checkpoint_diff" \
  scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON
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
