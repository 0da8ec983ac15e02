#!/usr/bin/env bash
# Regenerates tests/fixtures/weights/ with the pinned reference packages of
# scripts/weights_fixtures/requirements.txt, in a virtual environment kept in
# ~/.cache/privdiff/weights-venv (PRIVDIFF_CACHE) and rebuilt only when the pins change.
# Usage: scripts/make_weights_fixtures.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}/weights-venv
pins="$root/scripts/weights_fixtures/requirements.txt"
if ! cmp -s "$pins" "$venv/pins.txt" 2>/dev/null; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r "$pins"
  cp "$pins" "$venv/pins.txt"
fi
"$venv/bin/python" "$root/scripts/weights_fixtures/safetensors_reference.py" "$root/tests/fixtures/weights"
"$venv/bin/python" "$root/scripts/weights_fixtures/diffusers_reference.py" "$root/tests/fixtures/weights"
