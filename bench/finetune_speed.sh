#!/usr/bin/env bash
# Speed of private fine-tuning by parameter selection, on one model in one session: full
# fine-tuning vs attention-only (DP-LDM) vs LoRA r = 4 vs ResBlocks-only, each a short DP-SGD run
# of examples/compare/finetune/finetune_fmnist.toml (same batch, same model). Prints a markdown
# table of expected examples per second (batch_size x steps / stage seconds, from summary.json) and
# the ratio to full fine-tuning. Run it on a quiet machine: the variants run one after another.
# Usage: bench/finetune_speed.sh [STEPS]   (default 40; PRIVDIFF = the binary, default build/bin/privdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
privdiff=${PRIVDIFF:-build/bin/privdiff}
steps=${1:-40}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
recipe=examples/compare/finetune/finetune_fmnist.toml
echo "| fine-tuning | trainable parameters | examples/s | vs all |"
echo "|---|---|---|---|"
full=""
for variant in all attention resblocks lora ia3; do
  extra=() train=$variant
  case $variant in  # the adapters are plugins: [adapter] type = ..., then train = "adapter"
    lora) extra=(--set 'adapter.type="lora"' --set adapter.rank=4) train=adapter ;;
    ia3) extra=(--set 'adapter.type="ia3"') train=adapter ;;
  esac
  "$privdiff" run "$recipe" --out "$tmp/$variant" --set "stage.0.steps=$steps" --set "stage.0.train=\"$train\"" \
    --set privacy.epsilon=50.0 --set run.checkpoint_every=0 "${extra[@]}" > "$tmp/$variant.log" 2>&1
  read -r trainable speed < <(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["model"]["trainable_parameters"], s["stages"][0]["examples_per_second"])' "$tmp/$variant/summary.json")
  [ -z "$full" ] && full=$speed
  python3 -c 'import sys; v,t,s,f=sys.argv[1:]; print(f"| {v} | {int(t):,} | {float(s):.1f} | {float(s)/float(f):.2f}x |")' "$variant" "$trainable" "$speed" "$full"
done
