#!/usr/bin/env bash
# Public pretraining, then private fine-tuning variants head to head at the same epsilon and steps:
# one non-private run on the public glyphs data, then five DP-SGD runs on Fashion-MNIST at
# epsilon = 10 — (a) all parameters, (b) attention only (DP-LDM), (c) ResBlocks only, (d) LoRA r = 4,
# (e) no pretraining — each sampled, evaluated and tabulated by privdiff compare.
#   examples/compare/finetune.sh [OUT_DIR]     (default runs/finetune)
# Environment: PRIVDIFF (the binary, default build/bin/privdiff), SAMPLES (per run, default 1000),
# EPOCHS (classifier epochs, default 10). Finished runs are kept; interrupted ones are resumed.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/finetune}
recipes=examples/compare/finetune
source examples/compare/runs.sh

train pretrain "$recipes/pretrain_glyphs.toml"
init=(--set "run.init_from=\"$out/pretrain\"")
train a-all "$recipes/finetune_fmnist.toml" "${init[@]}" --set 'stage.0.train="all"'
train b-attention "$recipes/finetune_fmnist.toml" "${init[@]}"
train c-resblocks "$recipes/finetune_fmnist.toml" "${init[@]}" --set 'stage.0.train="resblocks"'
train d-lora-r4 "$recipes/finetune_fmnist.toml" "${init[@]}" --set 'adapter.type="lora"' --set adapter.rank=4 --set 'stage.0.train="adapter"'
train e-no-pretraining "$recipes/finetune_fmnist.toml" --set 'stage.0.train="all"'

runs=()
for name in a-all b-attention c-resblocks d-lora-r4 e-no-pretraining; do
  evaluate "$out/$name"
  runs+=("$out/$name")
done
"$privdiff" compare "${runs[@]}" --out "$out/report" --force
