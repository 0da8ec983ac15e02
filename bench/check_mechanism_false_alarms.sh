#!/usr/bin/env bash
# False alarms of privdiff check-mechanism on the shipped mechanisms: each of dpsgd and dpdm (K 4,
# chunks of 16) checked with --seed 1..N (independent data, noise seeds and canaries), counting
# the runs that fail. A correct mechanism should fail none: the noise check's band is set for a
# false-alarm probability of 1e-6, the replay check is exact up to rounding, the canary audit's
# bound holds with 95% confidence.
# Usage: bench/check_mechanism_false_alarms.sh [build/bin/privdiff] [N=20]
set -u
privdiff=${1:-build/bin/privdiff} runs=${2:-20}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for mechanism in dpsgd dpdm; do
  printf '[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\ndataset = "fashion-mnist"\n[model]\ntype = "pixel_unet"\nchannels = 8\nchannel_mult = [1, 2]\nnum_res_blocks = 1\nattention_resolutions = [14]\n[[stage]]\nmechanism = "%s"\nbatch_size = 64\nsteps = 10\nphysical_batch_size = 16\n%s\n' \
    "$mechanism" "$([ "$mechanism" = dpdm ] && echo 'noise_multiplicity = 4')" > "$tmp/$mechanism.toml"
  failed=0 worst_ratio=1
  for seed in $(seq 1 "$runs"); do
    out=$("$privdiff" check-mechanism "$tmp/$mechanism.toml" --seed "$seed" 2>&1); rc=$?
    [ "$rc" = 0 ] || { failed=$((failed + 1)); echo "$mechanism --seed $seed: rc $rc"; echo "$out" | grep -E "VIOLATION|FAILED"; }
    ratio=$(sed -n 's/.*(ratio \([0-9.]*\);.*/\1/p' <<<"$out")
    worst_ratio=$(python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print(a if abs(a - 1) > abs(b - 1) else b)" "$worst_ratio" "${ratio:-1}")
  done
  echo "$mechanism: $failed of $runs runs failed; the noise check's ratio furthest from 1: $worst_ratio"
done
