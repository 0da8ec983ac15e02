#!/usr/bin/env bash
# The evaluation on real data at full size (what tests/e2e/eval_cli_test.sh checks on a cut, to fit
# CI): the whole Fashion-MNIST test set scored as if it were synthetic (CNN trained 40 epochs on it,
# features fitted to the training split), and 2,000 images of uniform noise. Prints both results;
# docs/evaluation.md quotes them.
#   bench/eval_real_data.sh [PRIVDIFF]
set -euo pipefail
privdiff=${1:-build/bin/privdiff}
real=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/../scripts/make_noise_idx.py" "$tmp/noise" 2000
for set in "$real/t10k-images-idx3-ubyte.gz" "$tmp/noise-images-idx3-ubyte.gz"; do
  start=$(date +%s)
  json=$("$privdiff" eval "$set" --reference train --classifiers cnn --epochs 40 --json 2>/dev/null)
  python3 -c 'import json,sys; e=json.loads(sys.argv[1])["evaluators"]; a=e["dpdm_classifiers"]["metrics"]; r=e["feature_cnn"]["metrics"]; print(sys.argv[2], "cnn accuracy", a["accuracy.cnn"], "frechet", round(r["frechet_distance"], 4), "floor", round(r["frechet_floor"], 4), "precision", r["precision"], "recall", r["recall"], f"({sys.argv[3]} s)")' \
    "$json" "$(basename "$set")" "$(( $(date +%s) - start ))"
done
