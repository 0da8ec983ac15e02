#!/usr/bin/env bash
# The unit tests (SDK, host, plugins; not the end-to-end scripts) under AddressSanitizer +
# UndefinedBehaviorSanitizer: scripts/build.sh --sanitize into build-sanitize/, then ctest.
# Not part of .ci/run — a second full build does not fit CI's time budget — so run it before each
# release and after changes to memory-handling code (about 25 minutes on 2 cores, build included).
# LibTorch itself is not instrumented. Leak checking is off: plugins and LibTorch keep process-wide
# singletons alive until exit by design.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_dependencies.sh
scripts/build.sh --sanitize
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "${PRIVDIFF_BUILD_DIR:-build-sanitize}"
ctest --output-on-failure --parallel "$(nproc)" --timeout 1800 --exclude-regex '^(e2e|fuzz)\.' --label-exclude gpu
