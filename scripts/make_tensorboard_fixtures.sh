#!/usr/bin/env bash
# Regenerates tests/fixtures/tensorboard/ with the pinned tensorboard of
# scripts/tensorboard_fixtures/requirements.txt, in a virtual environment kept in
# ~/.cache/privdiff/tensorboard-venv (PRIVDIFF_CACHE), rebuilt only when the pins change.
# Usage: scripts/make_tensorboard_fixtures.sh            (the fixture)
#        scripts/make_tensorboard_fixtures.sh --read RUN  (what TensorBoard reads from a run's events)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/pinned_venv.sh"
pinned_venv tensorboard-venv "$root/scripts/tensorboard_fixtures/requirements.txt"
if [ "${1:-}" = --read ]; then
  "$venv/bin/python" "$root/scripts/tensorboard_fixtures/tensorboard_reference.py" --read "$2"
else
  "$venv/bin/python" "$root/scripts/tensorboard_fixtures/tensorboard_reference.py" "$root/tests/fixtures/tensorboard"
fi
