#!/usr/bin/env bash
# DP-LDM's text-to-image row against its class-conditional row at CPU scale, epsilon = 10 (delta 1e-5,
# RDP): (t) dpldm_text_quickstart.toml, whose prompts say the class ("a photo of the sneaker."), and
# (c) dpldm_quickstart.toml, whose labels do; the same autoencoder, UNet, public glyph pretraining,
# private steps and sampler. Each run's [[eval]] draws 1,000 samples (t: 100 per prompt; c: 100 per
# class) and the feature CNN trained on Fashion-MNIST's real test split scores them: Fréchet distance,
# precision, recall, and alignment (how often that CNN names the prompted class, or the label sampled
# with; chance 0.1). Prints one line per run.
#   examples/compare/dpldm_text.sh [OUT_DIR]     (default runs/dpldm-text; two quickstarts of training)
# Environment: PRIVDIFF (default build/bin/privdiff). Finished runs are kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-runs/dpldm-text}
privdiff=${PRIVDIFF:-build/bin/privdiff}
mkdir -p "$out"
# The class-conditional quickstart with the text recipe's [[eval]] (its labels balanced, not prompts).
{
  cat examples/recipes/dpldm_quickstart.toml
  printf '\n[[eval]]\nsamples = 1000\nheld_out_near_duplicates = "caveat"\nevaluators = ["feature_cnn"]\n'
} > "$out/class_conditional.toml"
for run in t-text:examples/recipes/dpldm_text_quickstart.toml c-class:"$out/class_conditional.toml"; do
  name=${run%%:*} recipe=${run#*:}
  [ -s "$out/$name/summary.json" ] || "$privdiff" run "$recipe" --out "$out/$name" --set "run.name=\"$name\""
done
python3 - "$out" <<'PY'
import json, sys
for name in ("t-text", "c-class"):
    run = f"{sys.argv[1]}/{name}"
    r = json.load(open(f"{run}/eval-0.json"))
    m = r["evaluators"]["feature_cnn"]["metrics"]
    seconds = json.load(open(f"{run}/summary.json")).get("training_seconds")
    print(f"{name}: alignment {m['alignment']:.3f}, Fréchet {m['frechet_distance']:.1f} (floor {m['frechet_floor']:.1f}), "
          f"precision {m['precision']:.2f}, recall {m['recall']:.2f}; training {seconds} s")
PY
