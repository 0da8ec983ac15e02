#!/usr/bin/env bash
# DP-FETA head to head at the quickstart's scale, epsilon = 10, about equal compute: (a) central
# mean images + warm-up = the quickstart, (b) central mode images (2 bins, the paper's F-MNIST
# setting) + warm-up, (c) no warm-up = DPDM alone (dpdm_quickstart.toml with 150 DP-SGD steps
# instead of 120 + 400 warm-up steps: about the same time); each sampled, evaluated and tabulated by
# privdiff compare (DP-FETA Fig. 4 / Table V direction).
#   examples/compare/dpfeta.sh [OUT_DIR]     (default runs/dpfeta; ~11 min of training on the fast
#                                              2-core machines, ~25 on the slow ones, plus sampling)
# Environment: PRIVDIFF (default build/bin/privdiff), SAMPLES (per run, default 1000), EPOCHS
# (classifier epochs, default 10). Finished runs are kept; interrupted ones are resumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/dpfeta}
source examples/compare/runs.sh

train a-central-mean examples/recipes/quickstart.toml
train b-central-mode examples/recipes/quickstart.toml --set 'stage.0.statistic="mode"' --set stage.0.bins=2
train c-no-warmup examples/recipes/dpdm_quickstart.toml --set stage.0.steps=150
runs=()
for name in a-central-mean b-central-mode c-no-warmup; do
  evaluate "$out/$name"
  runs+=("$out/$name")
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
