#!/usr/bin/env bash
# Configures and builds privdiff into ./build (Release, Ninja when present, ccache when present).
# Extra arguments go to the CMake configure step, e.g. -DPRIVDIFF_BUILD_BENCH=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
generator=()
command -v ninja > /dev/null && [ ! -f build/Makefile ] && generator=(-G Ninja)
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build --parallel "$(nproc)"
