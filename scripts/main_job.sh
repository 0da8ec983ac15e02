#!/usr/bin/env bash
# README command 1 (docs/getting-started.md): install what is missing, build, and run the main job.
#
# The main job: show the installed plugins, check the example
# recipes, and answer the question every DP diffusion run starts with: how much noise does DPDM's
# Fashion-MNIST schedule (batch 4096 of 60,000, 300 epochs) need for epsilon = 10 at delta = 1e-5,
# under every accountant, and what does that schedule spend at other noise levels? Then the
# quickstart: DP-FETA (noisy central images, a warm-up on them, then DP-SGD) trained privately on
# Fashion-MNIST at epsilon = 10 with a 10x10 sample grid (9 to 20 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_dependencies.sh
scripts/build.sh
privdiff=build/bin/privdiff

echo; echo "== privdiff plugins list"
"$privdiff" plugins list
for recipe in examples/recipes/*.toml; do
  echo; echo "== privdiff validate $recipe"
  "$privdiff" validate "$recipe"
done
q=$(python3 -c 'print(4096 / 60000)')
steps=$((300 * 60000 / 4096))
echo; echo "== noise for DPDM on Fashion-MNIST at epsilon 10 (q = 4096/60000, $steps steps)"
"$privdiff" account --sample-rate "$q" --steps "$steps" --epsilon 10 --delta 1e-5 --calibrate
echo; echo "== what that schedule spends at noise multiplier 2"
"$privdiff" account --noise-multiplier 2 --sample-rate "$q" --steps "$steps" --delta 1e-5
echo; echo "== the quickstart: privdiff run examples/recipes/quickstart.toml"
out=runs/quickstart-$(date +%Y%m%d-%H%M%S)
"$privdiff" run examples/recipes/quickstart.toml --out "$out"
echo; echo "== privdiff account $out"
"$privdiff" account "$out"
echo; echo "== done: the trained model is $out/checkpoint.pt, its samples $out/samples.png"
# The next step samples thousands of images, which on 2 cores takes minutes to an hour (3-28 images/s
# measured): say how long at the rate samples.png was made (summary.json), and suggest 10,000 only
# when that takes at most 10 minutes (else 2,000, what docs/evaluation.md's quality table samples).
read -r count minutes full rate <<<"$(python3 - "$out/summary.json" <<'PY'
import json, sys
rate = json.load(open(sys.argv[1]))["sampling"]["images_per_second"]
count = 10000 if 10000 / rate <= 600 else 2000
print(count, max(1, round(count / rate / 60)), max(1, round(10000 / rate / 60)), f"{rate:.3g}")
PY
)"
more=""
[ "$count" = 10000 ] || more="; --count 10000: about $full min"
echo "   next: $privdiff sample $out --count $count   (about $minutes min at the $rate images/s of samples.png$more)"
echo "   then: $privdiff eval $out/samples/edm_heun-$count-images-idx3-ubyte.gz --allow-near-duplicates"
