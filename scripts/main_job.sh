#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_dependencies.sh
scripts/build.sh
privdiff=build/bin/privdiff

echo; echo "== privdiff plugins list"
"$privdiff" plugins list
for recipe in examples/recipes/*.toml; do
  echo; echo "== privdiff validate $recipe"
  "$privdiff" validate "$recipe"
done
