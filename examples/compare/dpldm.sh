#!/usr/bin/env bash
# DP-LDM head to head at CPU scale, epsilon = 10 (delta = 1e-5, every noise multiplier calibrated
# with RDP): (a) DP-LDM = dpldm_quickstart.toml (autoencoder + latent UNet pretrained on public
# glyphs, attention blocks + class embedding fine-tuned privately), against the pixel-space
# fine-tuning variants of finetune.sh from the same glyph pretraining — (b) attention only,
# (c) all parameters — with the same q (128 / 60,000): 150 private steps for (b, c), the quickstart's
# own 400 for (a), all at epsilon 10; and (d) DPDM from scratch (dpdm_quickstart.toml: its tuned
# 300 steps of batch 256, accounted with RDP like the others). Each is sampled, evaluated and
# tabulated by privdiff compare.
#   examples/compare/dpldm.sh [OUT_DIR]     (default runs/dpldm; about 40 minutes of training on the
#                                            fast 2-core machines, plus sampling and evaluation)
# Environment: PRIVDIFF (default build/bin/privdiff), SAMPLES (per run, default 1000), EPOCHS
# (classifier epochs, default 10). Finished runs are kept; interrupted ones are resumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/dpldm}
finetune=examples/compare/finetune
source examples/compare/runs.sh

train a-dpldm examples/recipes/dpldm_quickstart.toml
train pixel-pretrain "$finetune/pretrain_glyphs.toml"
init=(--set "run.init_from=\"$out/pixel-pretrain\"")
train b-pixel-attention "$finetune/finetune_fmnist.toml" "${init[@]}"
train c-pixel-all "$finetune/finetune_fmnist.toml" "${init[@]}" --set 'stage.0.train="all"'
train d-dpdm examples/recipes/dpdm_quickstart.toml --set 'privacy.accountant="rdp"' --set 'privacy.report=["prv"]'
runs=()
for name in a-dpldm b-pixel-attention c-pixel-all d-dpdm; do
  evaluate "$out/$name"
  runs+=("$out/$name")
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
