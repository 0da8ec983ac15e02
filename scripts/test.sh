#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite (ctest).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_dependencies.sh
scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 1200
