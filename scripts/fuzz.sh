#!/usr/bin/env bash
# libFuzzer runs of the readers privdiff takes files through (fuzz/: ledger.json, IDX, safetensors, checkpoint.pt, recipes with
# --set overrides and validation): builds build-fuzz/ with clang (ASan + UBSan + libFuzzer), then runs each target
# for SECONDS (default 10) from its seeds in tests/fixtures/fuzz/<name>/. New inputs collect in
# build-fuzz/corpus/<target>/; a crash, leak, sanitizer report or out-of-memory is saved to
# build-fuzz/findings/ and fails the script (turn it into a regression seed and fix it).
# --build-only builds (or brings up to date) and stops: scripts/test.sh builds the suite's fuzzers
# (PRIVDIFF_FUZZ_BUILD_DIR=build/fuzz) before the tests, so the fuzz.short test only runs them.
#   scripts/fuzz.sh [SECONDS] [TARGET...]      e.g. scripts/fuzz.sh 3600 idx_fuzzer
#   scripts/fuzz.sh --build-only
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=0
if [ "${1:-}" = --build-only ]; then build_only=1; shift; fi
seconds=${1:-10}
[ $# -gt 0 ] && shift
# 77 (the test suite's "skipped") without clang.
command -v clang++ > /dev/null || { echo "scripts/fuzz.sh: needs clang++ (apt-get install clang libclang-rt-14-dev)" >&2; exit 77; }
build=${PRIVDIFF_FUZZ_BUILD_DIR:-build-fuzz}
# The recipe fuzzer links the main build's libprivdiff_sdk.so (PRIVDIFF_BUILD_DIR, default build/).
main_build=${PRIVDIFF_BUILD_DIR:-build}
[ -e "$main_build/lib/libprivdiff_sdk.so" ] \
  || { echo "scripts/fuzz.sh: no $main_build/lib/libprivdiff_sdk.so; build privdiff first (scripts/build.sh)" >&2; exit 2; }
generator=()
command -v ninja > /dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
CXX=clang++ cmake -S fuzz -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPRIVDIFF_BUILD_DIR="$(cd "$main_build" && pwd)" > /dev/null
cmake --build "$build" --parallel "$(nproc)"
[ "$build_only" = 1 ] && exit 0
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ledger_json_fuzzer idx_fuzzer safetensors_fuzzer recipe_fuzzer checkpoint_fuzzer)
mkdir -p "$build/findings"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "== $t: $seconds s"
  "$build/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/findings/$t-" "$build/corpus/$t" "tests/fixtures/fuzz/${t%_fuzzer}" 2>&1 | tail -n 8
done
