#!/usr/bin/env bash
# Speed of a private step, DP-LDM's latent model vs pixel models, in one session: a short DP-SGD
# stage (same expected batch 128, same steps) of (1) DPDM's pixel UNet from scratch
# (dpdm_quickstart.toml, K = 1), (2) the pixel UNet's attention blocks (finetune_fmnist.toml),
# (3) the latent model's attention blocks (dpldm_quickstart.toml, DP-LDM) and (4) its whole UNet.
# The latent runs first train their autoencoder for a few public steps (the private stage needs
# a fitted one); only the private stage is timed. Prints a markdown table of examples per second
# (from summary.json) and the ratio to (1). Run it on a quiet machine: the runs go one after another.
# Usage: bench/dpldm_speed.sh [STEPS]   (default 40; PRIVDIFF = the binary, default build/bin/privdiff)
set -euo pipefail
cd "$(dirname "$0")/.."
privdiff=${PRIVDIFF:-build/bin/privdiff}
steps=${1:-40}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--set privacy.epsilon=50.0 --set run.checkpoint_every=0)
latent=(examples/recipes/dpldm_quickstart.toml --set stage.0.steps=20 --set stage.1.steps=1 --set "stage.2.steps=$steps")
run() {  # NAME RECIPE [--set ...]: prints "trainable examples/s" of its last (private) stage
  local name=$1
  shift
  "$privdiff" run "$@" --out "$tmp/$name" "${common[@]}" > "$tmp/$name.log" 2>&1 || { tail -5 "$tmp/$name.log" >&2; exit 1; }
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); t=s["stages"][-1]; print(t["trainable_parameters"], t["examples_per_second"])' "$tmp/$name/summary.json"
}
echo "| private stage | trainable parameters | examples/s | vs DPDM |"
echo "|---|---|---|---|"
base=""
for variant in dpdm pixel-attention latent-attention latent-all; do
  case $variant in
    dpdm) out=$(run "$variant" examples/recipes/dpdm_quickstart.toml --set "stage.0.steps=$steps" --set stage.0.batch_size=128) ;;
    pixel-attention) out=$(run "$variant" examples/compare/finetune/finetune_fmnist.toml --set "stage.0.steps=$steps") ;;
    latent-attention) out=$(run "$variant" "${latent[@]}") ;;
    latent-all) out=$(run "$variant" "${latent[@]}" --set 'stage.2.train="all"') ;;
  esac
  read -r trainable speed <<< "$out"
  [ -z "$base" ] && base=$speed
  python3 -c 'import sys; v,t,s,b=sys.argv[1:]; print(f"| {v} | {int(t):,} | {float(s):.1f} | {float(s)/float(b):.2f}x |")' "$variant" "$trainable" "$speed" "$base"
done
