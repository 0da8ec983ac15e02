#!/usr/bin/env bash
# The quickstart (DP-FETA, ε = 10 on Fashion-MNIST) scored with DPImageBench's classifier protocol
# on a CPU, at scaled-down settings docs/evaluation.md's results table names: SAMPLES synthetic images
# (default 2,000; the benchmark: 60,000), EPOCHS epochs (default 10; the benchmark: 50) of batch 64
# (the benchmark: 256; with 2,000 images its batch leaves 8 steps an epoch, too few to train),
# ResNet-110 and WRN-40-4 (ResNeXt-29 costs ~90 s per batch of 256 on one core: a GPU's work).
# Trains the quickstart first unless RUN already holds it. Prints the benchmark_classifiers result.
#   bench/quickstart_benchmark_classifiers.sh [RUN] [SAMPLES] [EPOCHS] [PRIVDIFF]
set -euo pipefail
run=${1:-runs/quickstart-benchmark}
samples=${2:-2000}
epochs=${3:-10}
privdiff=${4:-build/bin/privdiff}
cd "$(dirname "$0")/.."
if [ ! -s "$run/summary.json" ]; then  # not finished: resumed when interrupted, else started
  if [ -s "$run/recipe.toml" ]; then "$privdiff" run --resume "$run"
  else "$privdiff" run examples/recipes/quickstart.toml --out "$run"; fi
fi
images="$run/samples/edm_heun-$samples-images-idx3-ubyte.gz"
[ -s "$images" ] || "$privdiff" sample "$run" --count "$samples"
start=$(date +%s)
"$privdiff" eval "$images" --allow-near-duplicates --evaluator benchmark_classifiers --epochs "$epochs" \
  --set 'benchmark_classifiers.networks=["resnet","wrn"]' --set benchmark_classifiers.batch_size=64 --json > "$run/benchmark-classifiers.json"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps(r["evaluators"]["benchmark_classifiers"], indent=1)); print("seconds", sys.argv[2])' \
  "$run/benchmark-classifiers.json" "$(( $(date +%s) - start ))"
