#!/usr/bin/env bash
# README command 2 (docs/development.md#tests): install what is missing, build, and run the whole test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_dependencies.sh
scripts/build.sh
# The clang fuzzers of the fuzz.short test, built here on every core rather than inside the test run
# beside another test (when they cannot be built, fuzz.short says why).
if command -v clang++ > /dev/null; then
  PRIVDIFF_FUZZ_BUILD_DIR=build/fuzz scripts/fuzz.sh --build-only || echo "note: the fuzzers did not build (fuzz.short will fail and say why)"
fi
cd build
# One test process per core, each on one thread: a privdiff that took every core beside another
# would oversubscribe the machine (tests measured 5-12x slower so). The real-data checks (label
# extended) are .ci/extended's, on its schedule (docs/development.md#ci); every privacy check is here.
OMP_NUM_THREADS=1 ctest --output-on-failure --parallel "$(nproc)" --timeout 1200 --label-exclude extended
