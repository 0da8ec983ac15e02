#!/usr/bin/env bash
# Adds to .gpu-carry/ (made by ../shared/gpu/prepare-carry.sh) what privdiff's build needs that the GPU
# machine lacks beyond toml++ and stb: ICU's headers and libraries (libprivdiff_text's Unicode data) and
# libcsv (captions tables), copied from this machine's Debian packages. build-on-device.sh installs
# everything under .gpu-carry/sys into / before it configures.
# Usage (from the project root): ../shared/gpu/prepare-carry.sh && scripts/gpu_carry_extras.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -d .gpu-carry/sys ] || { echo "no .gpu-carry/sys: run ../shared/gpu/prepare-carry.sh first" >&2; exit 1; }
lib=/usr/lib/x86_64-linux-gnu
mkdir -p .gpu-carry/sys/usr/include .gpu-carry/sys$lib/pkgconfig
cp -r /usr/include/unicode /usr/include/csv.h .gpu-carry/sys/usr/include/
cp -a $lib/libicuuc.so* $lib/libicudata.so* $lib/libcsv.so* .gpu-carry/sys$lib/
cp -a $lib/pkgconfig/icu-uc.pc .gpu-carry/sys$lib/pkgconfig/ 2> /dev/null || true
du -sh .gpu-carry
