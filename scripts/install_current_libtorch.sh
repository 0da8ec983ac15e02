#!/usr/bin/env bash
# Fetches the LibTorch inside PyPI's current `torch` wheel (pinned below; CUDA 13.2 flavour) and
# unpacks only what a C++ build needs (include/, lib/, share/cmake/) into a cache folder; prints the
# folder, which scripts/build.sh (PRIVDIFF_TORCH=pypi) passes to CMake.
#
# --no-deps: the wheel alone. Its CUDA libraries (cuBLAS, cuDNN, NCCL, ...) are separate wheels of
# several GiB; the link uses the machine's own CUDA Toolkit instead (nvcc 13 on this project's
# machines), and nothing here runs on a GPU. Four libraries libtorch_cuda.so needs are not in the
# Toolkit, or not new enough (cuFile, cuSPARSELt, NVSHMEM, NCCL): their wheels, pinned to the versions
# torch's metadata asks for, are unpacked beside LibTorch's own libraries, which find them there
# ($ORIGIN) before the Toolkit's.
#
# Environment: PRIVDIFF_TORCH_VERSION (default below), PRIVDIFF_CACHE (default ~/.cache/privdiff).
set -euo pipefail
version=${PRIVDIFF_TORCH_VERSION:-2.15.0}
# What torch 2.15.0's metadata requires (cuda-toolkit[cufile] 13.2.2 resolves to nvidia-cufile 1.17.1.22).
# NCCL too: the Toolkit's is older than the 2.30 torch calls (ncclCommGrow, ncclCommSuspend, ...).
extras=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7)
cache=${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}
target="$cache/libtorch-$version"
if [ -f "$target/.complete" ]; then
  echo "$target"
  exit 0
fi
command -v python3 > /dev/null || { echo "install_current_libtorch: python3 (with pip) is needed" >&2; exit 2; }
download=$(mktemp -d)
trap 'rm -rf "$download"' EXIT
echo "install_current_libtorch: downloading torch==$version (the wheel only, --no-deps)" >&2
python3 -m pip download --quiet --no-deps --only-binary=:all: "torch==$version" "${extras[@]}" -d "$download" >&2
wheel=$(ls "$download"/torch-*.whl)
rm -rf "$target.partial"
mkdir -p "$target.partial"
# Only the C++ side: headers, libraries and CMake files (the Python modules are half the wheel).
python3 - "$wheel" "$target.partial" "$download"/nvidia_*.whl <<'PY'
import os, re, shutil, sys, zipfile
wheel, out, extras = sys.argv[1], sys.argv[2], sys.argv[3:]
for extra in extras:  # the CUDA libraries outside the Toolkit, next to libtorch_cuda.so
    with zipfile.ZipFile(extra) as z:
        for name in z.namelist():
            if re.search(r"/lib/lib[^/]+\.so[.0-9]*$", name):
                os.makedirs(f"{out}/torch/lib", exist_ok=True)
                with z.open(name) as src, open(f"{out}/torch/lib/{os.path.basename(name)}", "wb") as dst:
                    shutil.copyfileobj(src, dst)
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if re.match(r"torch/(include|lib|share/cmake)/", n) or n == "torch/version.py"]
    for name in names:
        z.extract(name, out)
    cuda = re.search(r"cuda: Optional\[str\] = '([^']+)'", z.read("torch/version.py").decode())
print(f"install_current_libtorch: {len(names)} files", "(CUDA " + cuda.group(1) + ")" if cuda else "(CPU)", file=sys.stderr)
PY
touch "$target.partial/.complete"
rm -rf "$target"
mv "$target.partial" "$target"
echo "$target"
