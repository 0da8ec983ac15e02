#!/usr/bin/env bash
# Throughput of one process with T threads vs T processes with one thread each (privdiff run
# --nproc, Gloo over loopback), on the DPDM quickstart model (examples/recipes/dpdm_quickstart.toml:
# 281k-parameter UNet, B = 256, physical batch 128), one after another in one session. Prints a
# markdown table of expected examples per second (batch_size x steps / stage seconds, from rank 0's
# summary.json) and the ratio to the first line. Run it on a quiet machine.
# Usage: bench/multi_process_speed.sh [STEPS] [K]   (default 20 steps, K = 1; PRIVDIFF = the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
privdiff=${PRIVDIFF:-build/bin/privdiff}
steps=${1:-20}
k=${2:-1}
cores=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| layout (K = $k, $steps steps, $cores cores) | examples/s | vs first |"
echo "|---|---|---|"
first=""
for layout in "1 $cores" "$cores 1" "1 1"; do
  set -- $layout
  procs=$1 threads=$2
  "$privdiff" run examples/recipes/dpdm_quickstart.toml --out "$tmp/$procs-$threads" --nproc "$procs" \
    --set "stage.0.steps=$steps" --set "stage.0.noise_multiplicity=$k" --set "run.threads=$threads" \
    --set run.checkpoint_every=0 --set sampler.steps=2 > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
  speed=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stages"][0]["examples_per_second"])' \
    "$tmp/$procs-$threads/summary.json")
  [ -z "$first" ] && first=$speed
  python3 -c 'import sys; p,t,s,f=sys.argv[1:]; print(f"| {p} process(es) x {t} thread(s) | {float(s):.1f} | {float(s)/float(f):.2f}x |")' \
    "$procs" "$threads" "$speed" "$first"
done
