#!/usr/bin/env bash
# False alarms of privdiff check-mechanism on correct mechanisms, each checked with --seed 1..N
# (independent data, noise seeds and canaries), counting the runs that fail:
#   - dpsgd and dpdm (K 4, chunks of 16) on a tiny pixel UNet recipe;
#   - adaptive_clipping (examples/out_of_tree_plugin: a second release per step, a clip norm kept
#     between steps), when ADAPTIVE_PLUGIN_DIR names a folder holding its built plugin;
#   - a correct GEP (tests/fixtures/engines/gradient_embedding.hpp: a public anchor subspace released
#     with noise of its own, its basis stated; public data: glyphs), when PLANTED_PLUGIN_DIR names the
#     folder of the test fixtures' planted plugins (build/tests/plugins/planted);
#   - the statistic releases: central_images (the quickstart's), semantic_query (PrivImage's) and
#     private_evolution (PE's), the last two with the small sizes of docs/checking-a-mechanism.md
#     (STATISTICS=0 skips them: about 1 min a run for PE on 2 cores).
# A correct mechanism should fail none: the noise check's bands are set for a false-alarm probability
# of 1e-6, the replay is exact up to rounding, the canary audit's bound holds with 95% confidence.
# Usage: bench/check_mechanism_false_alarms.sh [build/bin/privdiff] [N=20]
set -u
privdiff=${1:-build/bin/privdiff} runs=${2:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# check NAME RECIPE [check-mechanism arguments...]: N seeds, the failures shown, a summary line.
check() {
  local name=$1 recipe=$2
  shift 2
  local failed=0 worst=1 start=$SECONDS
  for seed in $(seq 1 "$runs"); do
    out=$("$privdiff" check-mechanism "$recipe" --seed "$seed" "$@" 2>&1); rc=$?
    [ "$rc" = 0 ] || { failed=$((failed + 1)); echo "$name --seed $seed: rc $rc"; grep -E "VIOLATION|FAILED|error" <<<"$out"; }
    ratio=$(sed -n 's/.*(ratio \([0-9.]*\);.*/\1/p' <<<"$out" | head -1)
    worst=$(python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(a if abs(a - 1) > abs(b - 1) else b)" "$worst" "${ratio:-1}")
  done
  echo "$name: $failed of $runs runs failed; the noise check's pooled ratio furthest from 1: $worst; $((SECONDS - start)) s"
}

unet='[model]\ntype = "pixel_unet"\nchannels = 8\nchannel_mult = [1, 2]\nnum_res_blocks = 1\nattention_resolutions = [14]\n'
for mechanism in dpsgd dpdm; do
  printf "[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\ndataset = \"fashion-mnist\"\n$unet[[stage]]\nmechanism = \"%s\"\nbatch_size = 64\nsteps = 10\nphysical_batch_size = 16\n%s\n" \
    "$mechanism" "$([ "$mechanism" = dpdm ] && echo 'noise_multiplicity = 4')" > "$tmp/$mechanism.toml"
  check "$mechanism" "$tmp/$mechanism.toml"
done
if [ -n "${ADAPTIVE_PLUGIN_DIR:-}" ]; then
  printf "[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\ndataset = \"fashion-mnist\"\n$unet[[stage]]\nmechanism = \"adaptive_clipping\"\nbatch_size = 64\nsteps = 10\n" \
    > "$tmp/adaptive.toml"
  (export PRIVDIFF_PLUGIN_PATH=$ADAPTIVE_PLUGIN_DIR${PRIVDIFF_PLUGIN_PATH:+:$PRIVDIFF_PLUGIN_PATH}
   check adaptive_clipping "$tmp/adaptive.toml")
fi
if [ -n "${PLANTED_PLUGIN_DIR:-}" ]; then
  printf "[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data.private]\ndataset = \"fashion-mnist\"\n[data.public]\ndataset = \"glyphs\"\ncharacters = \"ABCDEFGHIJ\"\nper_class = 10\n$unet[[stage]]\nmechanism = \"fixture_gep\"\ndata = \"private\"\nbatch_size = 64\nsteps = 10\n" \
    > "$tmp/gep.toml"
  (export PRIVDIFF_PLUGIN_PATH=$PLANTED_PLUGIN_DIR${PRIVDIFF_PLUGIN_PATH:+:$PRIVDIFF_PLUGIN_PATH}
   check gep "$tmp/gep.toml")
fi
if [ "${STATISTICS:-1}" = 1 ]; then
  check central_images "$repo/examples/recipes/quickstart.toml" --stage central
  check semantic_query "$repo/examples/recipes/privimage_pictograms_fmnist_eps10.toml" --stage query \
    --set stage.0.classifier_epochs=1 --set data.public.per_class=50
  check private_evolution "$repo/examples/recipes/pe_fmnist_eps1.toml" --set stage.1.classifier_epochs=1 \
    --set stage.1.sampler_steps=4 \
    --set stage.1.samples_per_class=10 --set stage.1.iterations=2 --set data.public.per_class=50
fi
