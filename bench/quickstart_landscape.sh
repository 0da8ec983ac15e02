#!/usr/bin/env bash
# How the quickstart's private stage scores across learning rate, steps and batch size, each point run at
# the noise multiplier a sweep candidate of quickstart_sweep.toml would get (Poisson, mu 4, epsilon 10 for
# the whole search), several at once. It is how the sweep's search space was chosen (docs/sweep.md). On
# private data a scan like this is itself a look at the data: run it on public data of the same kind.
# Usage: bench/quickstart_landscape.sh PRIVDIFF OUTDIR SECONDS [JOBS] [DEVICE] [GRID]
#   (LANDSCAPE_SET="--set KEY=VALUE ...": more changes to every run, e.g. a short check of the script)
#   Each line of GRID (a file; the default below): NAME SEED LR STEPS BATCH NOISE ("auto": the recipe's
#   own calibration). Writes OUTDIR/NAME/ (the run) and prints a table of CNN accuracy and FID-like
#   distance, one row per finished run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
privdiff=$1 out=$2 seconds=$3 jobs=${4:-6} device=${5:-cuda}
deadline=$(($(date +%s) + seconds))
mkdir -p "$out"
grid=$out/grid.txt
if [ -z "${6:-}" ]; then
  # The noise multipliers: sweep.json's for a candidate of each (steps, batch), from
  #   privdiff sweep examples/recipes/quickstart_sweep.toml --param stage.2.steps=S --param stage.2.batch_size=B
  cat > "$grid" <<'EOF'
untuned-s0 0 2e-3 160 256 auto
b256-960-lr4e-3 0 4e-3 960 256 0.5514
b256-960-lr2e-3 0 2e-3 960 256 0.5514
b256-640-lr4e-3 0 4e-3 640 256 0.5234
b256-640-lr8e-3 0 8e-3 640 256 0.5234
b512-640-lr4e-3 0 4e-3 640 512 0.6443
b256-320-lr4e-3 0 4e-3 320 256 0.4829
untuned-s1 1 2e-3 160 256 auto
b256-640-lr2e-3 0 2e-3 640 256 0.5234
b256-320-lr2e-3 0 2e-3 320 256 0.4829
b256-160-lr4e-3 0 4e-3 160 256 0.4485
b256-160-lr2e-3 0 2e-3 160 256 0.4485
b512-320-lr4e-3 0 4e-3 320 512 0.5770
b256-640-lr4e-3-s1 1 4e-3 640 256 0.5234
b256-960-lr4e-3-s1 1 4e-3 960 256 0.5514
untuned-s2 2 2e-3 160 256 auto
EOF
else
  cp "$6" "$grid"
fi

run_point() {  # NAME SEED LR STEPS BATCH NOISE
  local left=$((deadline - $(date +%s)))
  [ "$left" -gt 20 ] || return 0
  local noise=()
  [ "$6" = auto ] || noise=(--set "stage.2.noise_multiplier=$6")
  timeout "$left" "$privdiff" run examples/recipes/quickstart_sweep.toml --out "$out/$1" \
    --set run.device="$device" --set run.threads=2 --set run.seed="$2" --set stage.2.lr="$3" \
    --set stage.2.steps="$4" --set stage.2.batch_size="$5" --set stage.2.physical_batch_size="$5" \
    "${noise[@]}" ${LANDSCAPE_SET:-} > "$out/$1.log" 2>&1
  echo "$1: exit $?, $(($(date +%s) - deadline + left)) s"
}
export -f run_point
export privdiff out deadline device
xargs -P "$jobs" -L 1 bash -c 'run_point "$@"' _ < "$grid"

python3 - "$out" "$grid" <<'EOF'
import json, sys, pathlib
out, grid = pathlib.Path(sys.argv[1]), sys.argv[2]
print("| run | seed | lr | steps | batch | noise | CNN accuracy | feature-CNN distance |")
print("|---|---|---|---|---|---|---|---|")
for line in open(grid):
    name, seed, lr, steps, batch, noise = line.split()
    ev = out / name / "eval-0.json"
    if not ev.exists():
        print(f"| {name} | {seed} | {lr} | {steps} | {batch} | {noise} | not finished | |")
        continue
    e = json.load(open(ev))["evaluators"]
    acc = e["dpdm_classifiers"]["metrics"]["accuracy.cnn"]
    fd = e.get("feature_cnn", {}).get("metrics", {}).get("frechet_distance", float("nan"))
    if noise == "auto":
        entry = json.load(open(out / name / "privacy.json"))["ledger"]["entries"][-1]
        noise = "auto (%.4f)" % entry["event"]["event"]["noise_multiplier"]
    print(f"| {name} | {seed} | {lr} | {steps} | {batch} | {noise} | {acc:.4f} | {fd:.2f} |")
EOF
