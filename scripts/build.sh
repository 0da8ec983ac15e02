#!/usr/bin/env bash
# Configures and builds privdiff into ./build (Release, Ninja when present, ccache when present).
# Extra arguments go to the CMake configure step, e.g. -DPRIVDIFF_BUILD_BENCH=OFF.
#
# Which LibTorch: Debian's (libtorch-dev, CPU) by default. PRIVDIFF_TORCH=pypi builds against the
# LibTorch of PyPI's current torch wheel, pinned in scripts/install_current_libtorch.sh (CUDA on, linked
# against the machine's CUDA Toolkit; into build-pypi/). PRIVDIFF_TORCH=python builds against
# the LibTorch inside the pip PyTorch of `python3` (CUDA when that PyTorch has it: PRIVDIFF_CUDA is
# switched on); PRIVDIFF_TORCH=/path/to/libtorch against an unpacked LibTorch archive.
# PRIVDIFF_BUILD_DIR changes the build directory; PRIVDIFF_BUILD_TARGETS="a b" builds only those targets.
#
# The default build (./build) is then installed, so that `privdiff` is on the PATH: into /usr/local
# when run as root (on root's PATH), else ~/.local (Debian's ~/.profile puts ~/.local/bin on the
# PATH at login; the line to add it now is printed). PRIVDIFF_PREFIX installs elsewhere,
# PRIVDIFF_PREFIX=none not at all.
#
# --sanitize: an AddressSanitizer + UndefinedBehaviorSanitizer build (RelWithDebInfo) into
# build-sanitize/ (or PRIVDIFF_BUILD_DIR); run its tests with scripts/test_sanitized.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# Paths under the clone are hashed relative to it, so a fresh clone elsewhere (CI's) hits the
# compiler cache a previous clone filled.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
build_type=Release
sanitize=()
if [ "${1:-}" = --sanitize ]; then
  shift
  build_type=RelWithDebInfo
  sanitize=(-DPRIVDIFF_SANITIZE=ON)
  : "${PRIVDIFF_BUILD_DIR:=build-sanitize}"
fi
torch_args=()
case "${PRIVDIFF_TORCH:-system}" in
  system) ;;
  pypi)
    libtorch=$(scripts/install_current_libtorch.sh)/torch
    cuda=$(sed -n "s/^cuda: Optional\[str\] = '\(.*\)'/\1/p" "$libtorch/version.py")
    torch_args=(-DCMAKE_PREFIX_PATH="$libtorch")
    [ -n "$cuda" ] && torch_args+=(-DPRIVDIFF_CUDA=ON)
    : "${PRIVDIFF_BUILD_DIR:=build-pypi}"
    echo "LibTorch of PyPI's torch $(sed -n "s/^__version__ = '\(.*\)'/\1/p" "$libtorch/version.py"): $libtorch"
    ;;
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
# PRIVDIFF_UNITY=1 (CI sets it): the SDK, the host and the plugins as a unity build, 8 sources per unit,
# so that LibTorch's headers are parsed once per unit (a cold build about half as long; tests stay one
# source each). Incremental builds are faster without it: the default.
if [ "${PRIVDIFF_UNITY:-0}" = 1 ]; then set -- -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 "$@"
elif [[ " $* " != *CMAKE_UNITY_BUILD* ]]; then set -- -DCMAKE_UNITY_BUILD=OFF "$@"; fi  # (not kept from an earlier configure)
build=${PRIVDIFF_BUILD_DIR:-build}
generator=()
command -v ninja > /dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=$build_type "${torch_args[@]}" "${sanitize[@]}" "$@"
targets=()
for target in ${PRIVDIFF_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build" --parallel "$(nproc)" "${targets[@]}"
if [ ${#sanitize[@]} -eq 0 ] && [ "$build" = build ] && [ "${PRIVDIFF_PREFIX:-}" != none ]; then
  prefix=${PRIVDIFF_PREFIX:-$([ "$(id -u)" = 0 ] && echo /usr/local || echo "$HOME/.local")}
  rm -rf "$prefix/lib/privdiff/plugins"  # plugins a newer build no longer has must not linger
  cmake --install "$build" --prefix "$prefix" > /dev/null
  echo "privdiff installed: $prefix/bin/privdiff (plugins in $prefix/lib/privdiff/plugins)"
  case ":$PATH:" in
    *":$prefix/bin:"*) ;;
    *) echo "  $prefix/bin is not on your PATH yet; for this shell: export PATH=\"$prefix/bin:\$PATH\"" ;;
  esac
fi
