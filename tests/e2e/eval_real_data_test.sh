#!/usr/bin/env bash
# privdiff eval on real images (label extended: docs/development.md#ci): Fashion-MNIST
# test images scored as if they were synthetic give a CNN accuracy far above chance and a Fréchet
# distance at the floor; uniform noise gives chance accuracy and a large distance; the feature
# network is cached. On a 3,000 + 1,000-image cut of Fashion-MNIST (45 s on one core); the
# full-size check with its numbers is bench/eval_real_data.sh.
# Usage: eval_real_data_test.sh PRIVDIFF
set -u
privdiff=$1
source "$(dirname "$0")/common.sh"
real=/usr/share/datasets/fashion-mnist
[ -s "$real/t10k-images-idx3-ubyte.gz" ] || fail "Debian's dataset-fashion-mnist is not installed (scripts/install_dependencies.sh)"

# Real test images scored as if synthetic, and uniform noise, against a cut of Fashion-MNIST
# (the first 3,000 training and 1,000 test images).
# (--reference train: features fitted to the training split, the floor is real test vs train.)
small="$tmp/fm-small"
python3 - "$real" "$small" <<'PY' || fail "cannot cut Fashion-MNIST"
import gzip, os, struct, sys
src, dst = sys.argv[1:3]; os.makedirs(dst)
for split, n in (("train", 3000), ("t10k", 1000)):
    images = gzip.open(f"{src}/{split}-images-idx3-ubyte.gz").read()[16:16 + n * 784]
    labels = gzip.open(f"{src}/{split}-labels-idx1-ubyte.gz").read()[8:8 + n]
    with gzip.open(f"{dst}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images)
    with gzip.open(f"{dst}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + labels)
PY
json=$("$privdiff" eval "$small/t10k-images-idx3-ubyte.gz" --real-path "$small" --reference train --classifiers cnn \
       --epochs 40 --json 2>"$tmp/log") \
  || fail "eval of the real test set: $(cat "$tmp/log")"
python3 - "$json" <<'PY' || fail "real test set as synthetic: $json"
import json, sys
r = json.loads(sys.argv[1])
assert r["reference"] == "train" and any("non-private statistics" in c for c in r["caveats"]), r
accuracy = r["evaluators"]["dpdm_classifiers"]["metrics"]["accuracy.cnn"]
assert accuracy >= 0.6, accuracy  # chance 0.1; 0.73 measured (1,000 images, 40 epochs)
f = r["evaluators"]["feature_cnn"]["metrics"]
# Same images as the floor's: the distance is the floor.
assert abs(f["frechet_distance"] - f["frechet_floor"]) <= 1e-6 * max(1, f["frechet_floor"]), f
assert f["precision"] > 0.6 and f["recall"] > 0.6, f
PY
python3 "$(dirname "$0")/../../scripts/make_noise_idx.py" "$tmp/noise" 1000 || fail "cannot write the noise set"
noise=$("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --real-path "$small" --reference train --classifiers cnn --epochs 2 --json \
        2>"$tmp/log") \
  || fail "eval of noise: $(cat "$tmp/log")"
python3 - "$json" "$noise" <<'PY' || fail "noise: $noise"
import json, sys
real, noise = (json.loads(a)["evaluators"] for a in sys.argv[1:3])
accuracy = noise["dpdm_classifiers"]["metrics"]["accuracy.cnn"]
assert 0.02 <= accuracy <= 0.25, accuracy
real, noise = real["feature_cnn"]["metrics"], noise["feature_cnn"]["metrics"]
assert noise["frechet_distance"] > 20 * max(real["frechet_floor"], 0.1), (noise["frechet_distance"], real["frechet_floor"])
# Noise covers none of the real data. (Its k-NN *precision* is high: the noise features collapse
# into one spot inside the large k-NN balls of real outliers, the metric's known weakness.)
assert noise["recall"] < 0.05, noise
PY
grep -q "(cached)" < <("$privdiff" eval "$tmp/noise-images-idx3-ubyte.gz" --real-path "$small" --reference train --classifiers logreg \
                       --epochs 1 2>&1) \
  || fail "the feature network was not cached"

echo "1 passed, 0 failed"
