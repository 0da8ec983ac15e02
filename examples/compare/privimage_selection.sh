#!/usr/bin/env bash
# PrivImage's claim at CPU scale: pretraining on the public data its private query selects beats
# pretraining on all public data, at the same epsilon. Both arms run
# examples/recipes/privimage_fmnist_eps10.toml unchanged but for one key: 'all' keeps every public
# class for every private class (stage.0.select = 26, all the glyphs' letters), so the query still
# spends its share of epsilon and the DP-SGD stage gets the same sigma; only the pretraining data differ.
# Each seed's two runs are scored on SAMPLES images with DPDM's classifiers and the Frechet distance,
# all in one privdiff compare report. docs/methods/privimage.md has the result.
#   examples/compare/privimage_selection.sh [OUT_DIR] [SEEDS] [EPSILON]
#     (defaults: runs/privimage-selection, "0 1 2", 10; about 25 min a run on 2 cores)
# Environment: PRIVDIFF, SAMPLES (default 1000), EPOCHS (default 10); RECIPE and PUBLIC_CLASSES for
# another public set (the pictograms: RECIPE=examples/recipes/privimage_pictograms_fmnist_eps10.toml
# PUBLIC_CLASSES=24). Finished runs are kept; interrupted ones are resumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/privimage-selection}
seeds=${2:-"0 1 2"}
epsilon=${3:-10}
source examples/compare/runs.sh

recipe=${RECIPE:-examples/recipes/privimage_fmnist_eps10.toml}
all_classes=${PUBLIC_CLASSES:-26}  # the public data's classes (the default recipe's 26 glyph letters)
runs=()
for seed in $seeds; do
  for arm in selected all; do
    name="$arm-eps$epsilon-seed$seed"
    arm_keys=()
    [ "$arm" = all ] && arm_keys=(--set "stage.0.select=$all_classes")
    train "$name" "$recipe" --set run.seed="$seed" --set privacy.epsilon="$epsilon" "${arm_keys[@]}"
    evaluate "$out/$name"
    runs+=("$out/$name")
  done
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
