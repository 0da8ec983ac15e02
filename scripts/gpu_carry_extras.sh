#!/usr/bin/env bash
# Adds to .gpu-carry/ (made by ../shared/gpu/prepare-carry.sh) what privdiff's build needs that the GPU
# machine lacks beyond toml++ and stb: ICU's headers and libraries (libprivdiff_text's Unicode data) and
# libcsv (captions tables), copied from this machine's Debian packages, and Opacus 1.6.0's wheel (the
# bench's reference; the GPU machine reaches no registry). With ICU the carry passes the device's
# 64 MiB, so .gpu-carry/sys is packed into .gpu-carry/sys.tar.xz (about 39 MiB in all). On the device:
#   tar -xJf .gpu-carry/sys.tar.xz -C .gpu-carry && cp -a .gpu-carry/sys/. / && ldconfig &&
#   pip install -q --no-index --no-deps .gpu-carry/wheels/opacus-1.6.0-py3-none-any.whl
# then bench/gpu_check.sh (docs/gpus.md#one-call-on-a-lent-gpu-machine).
# Usage (from the project root): ../shared/gpu/prepare-carry.sh && scripts/gpu_carry_extras.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
[ -d .gpu-carry/sys ] || { echo "no .gpu-carry/sys: run ../shared/gpu/prepare-carry.sh first" >&2; exit 1; }
lib=/usr/lib/x86_64-linux-gnu
mkdir -p .gpu-carry/sys/usr/include .gpu-carry/sys$lib/pkgconfig
cp -r /usr/include/unicode /usr/include/csv.h .gpu-carry/sys/usr/include/
cp -a $lib/libicuuc.so* $lib/libicudata.so* $lib/libcsv.so* .gpu-carry/sys$lib/
cp -a $lib/pkgconfig/icu-uc.pc .gpu-carry/sys$lib/pkgconfig/ 2> /dev/null || true
python3 -m pip download -q --no-deps opacus==1.6.0 -d .gpu-carry/wheels
tar -cJf .gpu-carry/sys.tar.xz -C .gpu-carry sys && rm -rf .gpu-carry/sys
du -sh .gpu-carry
