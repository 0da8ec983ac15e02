#!/usr/bin/env bash
# Configures and builds privdiff into ./build (Release, Ninja when present, ccache when present).
# Extra arguments go to the CMake configure step, e.g. -DPRIVDIFF_BUILD_BENCH=OFF.
#
# Which LibTorch: Debian's (libtorch-dev, CPU) by default. PRIVDIFF_TORCH=python builds against
# the LibTorch inside the pip PyTorch of `python3` (CUDA when that PyTorch has it: PRIVDIFF_CUDA is
# switched on); PRIVDIFF_TORCH=/path/to/libtorch against an unpacked LibTorch archive.
# PRIVDIFF_BUILD_DIR changes the build directory.
#
# --sanitize: an AddressSanitizer + UndefinedBehaviorSanitizer build (RelWithDebInfo) into
# build-sanitize/ (or PRIVDIFF_BUILD_DIR); run its tests with scripts/test_sanitized.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
build_type=Release
sanitize=()
if [ "${1:-}" = --sanitize ]; then
  shift
  build_type=RelWithDebInfo
  sanitize=(-DPRIVDIFF_SANITIZE=ON)
  : "${PRIVDIFF_BUILD_DIR:=build-sanitize}"
fi
build=${PRIVDIFF_BUILD_DIR:-build}
torch_args=()
case "${PRIVDIFF_TORCH:-system}" in
  system) ;;
  python)
    prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)') \
      || { echo "PRIVDIFF_TORCH=python: python3 cannot import torch (pip install torch)" >&2; exit 2; }
    cuda=$(python3 -c 'import torch; print(torch.version.cuda or "")')
    torch_args=(-DCMAKE_PREFIX_PATH="$prefix")
    [ -n "$cuda" ] && torch_args+=(-DPRIVDIFF_CUDA=ON)
    echo "LibTorch of python3's PyTorch $(python3 -c 'import torch; print(torch.__version__)')${cuda:+ (CUDA $cuda)}: $prefix"
    ;;
  *)
    [ -d "$PRIVDIFF_TORCH" ] || { echo "PRIVDIFF_TORCH=$PRIVDIFF_TORCH: not a directory (system, python or a LibTorch folder)" >&2; exit 2; }
    torch_args=(-DCMAKE_PREFIX_PATH="$(cd "$PRIVDIFF_TORCH" && pwd)")
    ;;
esac
generator=()
command -v ninja > /dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=$build_type "${torch_args[@]}" "${sanitize[@]}" "$@"
cmake --build "$build" --parallel "$(nproc)"
