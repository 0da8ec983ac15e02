#!/usr/bin/env bash
# Installs the Debian packages privdiff needs, only those missing (idempotent; no network use when
# everything is present). Debian 12 (bookworm). Runs apt-get as root, or through sudo.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config        # toolchain (ccache: fast rebuilds)
  libtorch-dev libopenblas0-openmp              # LibTorch 1.13 (CPU) on OpenBLAS (Debian defaults to the reference BLAS)
  libboost-dev                                   # Boost.DLL (header-only)
  libtomlplusplus-dev libcli11-dev               # recipes (toml++ headers), command line
  libeigen3-dev libfftw3-dev nlohmann-json3-dev  # numerics (Eigen FFT on FFTW), JSON
  libgloo-dev                                    # headers of Gloo, the CPU backend of LibTorch's c10d (run --nproc)
  zlib1g-dev libstb-dev                          # gzip-compressed IDX data, PNG sample grids and image folders
  libicu-dev                                     # Unicode for the caption tokenizers (NFC/NFD, case, classes)
  libcsv-dev                                     # captions tables in CSV (RFC 4180: quoted fields, line breaks in them)
  libfreetype-dev                                # the glyphs dataset's renderer, and its fonts (print + handwriting-like):
  fonts-dejavu-core fonts-liberation2 fonts-freefont-ttf fonts-humor-sans fonts-comic-neue fonts-dancingscript fonts-breip
  fonts-symbola                                  # ... and clothing pictograms (public data that can draw clothing)
  gnuplot-nox                                    # the plots of privdiff compare
  libgtest-dev python3 python3-venv              # tests (python3: JSON checks in the CLI tests; venv: fixture scripts)
  chromium                                       # tests: report.html rendered headless (scripts/check_report_renders.sh)
  clang libclang-rt-14-dev                       # fuzzing with libFuzzer (scripts/fuzz.sh, the fuzz.short test)
  dataset-fashion-mnist                          # the default dataset
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "privdiff: all ${#packages[@]} Debian packages present"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo > /dev/null || { echo "privdiff: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "privdiff: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
