#!/usr/bin/env bash
# Peak memory of one private DP-SGD step against the logical batch size at a fixed physical batch:
# physical chunks must bound memory, so peak RSS should stay flat as the logical batch grows
# (beyond the batch's own images). Each size runs in its own process (peak RSS is per process).
# Usage: bench/peak_rss_vs_logical_batch.sh [PRIVDIFF] [PHYSICAL] [BATCH...]
#   default: build/bin/privdiff, physical 32, logical 256 1024 4096
set -euo pipefail
privdiff=${1:-build/bin/privdiff}
physical=${2:-32}
shift $(( $# > 2 ? 2 : $# ))
batches=("$@")
[ ${#batches[@]} -gt 0 ] || batches=(256 1024 4096)
recipe="$(dirname "$0")/../examples/recipes/dpdm_fmnist_tiny.toml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| logical batch | physical batch | K | peak RSS (MiB) | run (s), one step |"
echo "|---|---|---|---|---|"
for b in "${batches[@]}"; do
  python3 - "$privdiff" "$recipe" "$tmp/run$b" "$b" "$physical" <<'PY'
import resource, subprocess, sys, time
privdiff, recipe, out, batch, physical = sys.argv[1:6]
start = time.time()
subprocess.run([privdiff, "run", recipe, "--out", out, "--set", f"stage.0.batch_size={batch}",
                "--set", f"stage.0.physical_batch_size={physical}", "--set", "stage.0.noise_multiplicity=1",
                "--set", "stage.0.steps=1", "--set", "stage.0.noise_multiplier=1.0", "--set", "run.threads=1",
                "--set", "sampler.steps=1"], check=True, stdout=subprocess.DEVNULL)
seconds = time.time() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"| {batch} | {physical} | 1 | {peak:.0f} | {seconds:.1f} |")
PY
done
