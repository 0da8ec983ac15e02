#!/usr/bin/env bash
# DPDM's noise multiplicity head to head on CPU: trains K = 1 and K = 8 (same everything else,
# epsilon = 10), samples and evaluates both, and writes the comparison report.
#   examples/compare/run.sh [OUT_DIR]     (default runs/compare; about 20 minutes on 2 cores)
# Environment: PRIVDIFF (the binary, default build/bin/privdiff), SAMPLES (per run, default 1000),
# EPOCHS (classifier epochs, default 10).
set -euo pipefail
cd "$(dirname "$0")/../.."
privdiff=${PRIVDIFF:-build/bin/privdiff}
out=${1:-runs/compare}
samples=${SAMPLES:-1000}
epochs=${EPOCHS:-10}
mkdir -p "$out"
for k in 1 8; do
  run="$out/k$k"
  if [ ! -s "$run/summary.json" ]; then
    if [ -s "$run/recipe.toml" ]; then  # interrupted: resumed (or started over in place before its first checkpoint)
      "$privdiff" run --resume "$run"
    else "$privdiff" run "examples/compare/dpdm_fmnist_k$k.toml" --out "$run"; fi
  fi
  "$privdiff" sample "$run" --count "$samples" --out "$run/samples/heun-$samples"
  "$privdiff" eval "$run/samples/heun-$samples-images-idx3-ubyte.gz" --epochs "$epochs"
done
"$privdiff" compare "$out/k1" "$out/k8" --out "$out/report" --force
