# Sourced by the comparison scripts (after setting $out): the binary and sample/epoch counts from
# the environment (PRIVDIFF, SAMPLES, EPOCHS), and train a run (kept when finished, resumed when
# interrupted), sample and evaluate it once, or evaluate the data a stage released (Private Evolution).
# Scoring on Fashion-MNIST's test split is knowingly on near-copies of 1% of its training images
# (--allow-near-duplicates: the run's guarantee then says so; docs/privacy.md).
privdiff=${PRIVDIFF:-build/bin/privdiff}
samples=${SAMPLES:-1000}
epochs=${EPOCHS:-10}
mkdir -p "$out"
train() {  # NAME RECIPE [--set ...]
  local run="$out/$1" recipe=$2
  shift 2
  if [ -s "$run/summary.json" ]; then return; fi
  # Interrupted, with or without a checkpoint: --resume continues it, or starts it over in place when it
  # was killed before its first checkpoint (the privacy it spent stays in its ledger).
  if [ -s "$run/recipe.toml" ]; then "$privdiff" run --resume "$run"
  else "$privdiff" run "$recipe" --out "$run" --set "run.name=\"$(basename "$run")\"" "$@"; fi
}
evaluate() {  # RUN_DIR
  local run=$1
  if [ ! -s "$run/eval.json" ]; then
    "$privdiff" sample "$run" --count "$samples" --out "$run/samples/heun-$samples"
    "$privdiff" eval "$run/samples/heun-$samples-images-idx3-ubyte.gz" --epochs "$epochs" --run "$run" \
      --allow-near-duplicates
  fi
}
evaluate_release() {  # RUN_DIR STAGE: the images the stage released (all of them)
  local run=$1
  if [ ! -s "$run/eval.json" ]; then
    "$privdiff" eval "$run/released-$2/train-images-idx3-ubyte.gz" --epochs "$epochs" --run "$run" \
      --allow-near-duplicates
  fi
}
