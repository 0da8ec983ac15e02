#!/usr/bin/env bash
# FETA-Pro against DP-FETA at the quickstart's scale, epsilon = 1 (issue #70; FETA-Pro's paper finds it
# ahead of DP-FETA at epsilon 1): (a) DP-FETA = the quickstart at epsilon 1, (b) FETA-Pro =
# fetapro_quickstart.toml (the same model, warm-up and DP-SGD stage, plus the random-feature release, its
# generator and a 300-step warm-up on the generator's images), each with seeds 0..SEEDS-1, sampled,
# evaluated and tabulated by privdiff compare (Fréchet distance in the feature CNN's space among the
# metrics), the spread across seeds in the report.
#   examples/compare/fetapro.sh [OUT_DIR]     (default runs/fetapro; about 27 and 30 min of training per
#                                               seed measured on a slow 2-core machine, plus sampling)
# Environment: PRIVDIFF, SAMPLES (default 1000), EPOCHS (default 10), SEEDS (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/fetapro}
source examples/compare/runs.sh
runs=()
for seed in $(seq 0 $((${SEEDS:-3} - 1))); do
  train "a-dpfeta-seed$seed" examples/recipes/quickstart.toml --set privacy.epsilon=1.0 --set "run.seed=$seed"
  train "b-fetapro-seed$seed" examples/recipes/fetapro_quickstart.toml --set "run.seed=$seed"
  for name in "a-dpfeta-seed$seed" "b-fetapro-seed$seed"; do
    evaluate "$out/$name"
    runs+=("$out/$name")
  done
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
