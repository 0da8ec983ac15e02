#!/usr/bin/env bash
# Regenerates tests/fixtures/weights/ with the pinned reference packages of
# scripts/weights_fixtures/requirements.txt, in a virtual environment kept in
# ~/.cache/privdiff/weights-venv (PRIVDIFF_CACHE) and rebuilt only when the pins change.
# DPDM's network and CompVis's latent diffusion models are built by their authors' own code, fetched
# at the pinned commits into the cache (or taken from DPDM_SRC / COMPVIS_SRC, checkouts of those
# commits); nothing of it is copied into the project.
# Usage: scripts/make_weights_fixtures.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/pinned_venv.sh"
pinned_venv weights-venv "$root/scripts/weights_fixtures/requirements.txt"
"$venv/bin/python" "$root/scripts/weights_fixtures/safetensors_reference.py" "$root/tests/fixtures/weights"
"$venv/bin/python" "$root/scripts/weights_fixtures/diffusers_reference.py" "$root/tests/fixtures/weights"
"$venv/bin/python" "$root/scripts/weights_fixtures/clip_reference.py" "$root/tests/fixtures/weights"
dpdm_commit=29bb94d92bb5440a664dbaa915c06a7397ea9ff3  # github.com/nv-tlabs/DPDM, "updated TMLR"
dpdm=${DPDM_SRC:-${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}/dpdm-src}
if [ "$(git -C "$dpdm" rev-parse HEAD 2>/dev/null)" != "$dpdm_commit" ]; then
  [ -n "${DPDM_SRC:-}" ] && { echo "DPDM_SRC=$dpdm is not at $dpdm_commit" >&2; exit 1; }
  rm -rf "$dpdm"
  git clone --quiet https://github.com/nv-tlabs/DPDM "$dpdm"
  git -C "$dpdm" checkout --quiet "$dpdm_commit"
fi
"$venv/bin/python" "$root/scripts/weights_fixtures/dpdm_reference.py" "$dpdm" "$root/tests/fixtures/weights"
source "$root/scripts/compvis_source.sh"
compvis_source
"$venv/bin/python" "$root/scripts/weights_fixtures/compvis_reference.py" "$compvis" "$root/tests/fixtures/weights"
