#!/usr/bin/env bash
# A virtual environment with the pinned PyTorch and Opacus of bench/reference-python.txt, the
# baselines of bench/side_by_side.sh; prints its python. Kept in ~/.cache/privdiff/bench-venv
# (PRIVDIFF_CACHE) and rebuilt only when the pins change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${PRIVDIFF_CACHE:-$HOME/.cache/privdiff}/bench-venv
pins="$here/reference-python.txt"
if ! cmp -s "$pins" "$venv/pins.txt" 2>/dev/null; then
  echo "setup_reference_python: installing $(grep -v '^#' "$pins" | tr '\n' ' ')into $venv" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet -r "$pins" >&2
  cp "$pins" "$venv/pins.txt"
fi
echo "$venv/bin/python"
