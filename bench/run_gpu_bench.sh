#!/usr/bin/env bash
# GPU table of the engine (issue #14's shapes): rows/s and peak GPU memory per step of one physical
# batch of B examples x K noised rows, non-private vs DP (fast clipping), and the time of one
# logical step's secure noise. Build with CUDA first (PRIVDIFF_TORCH=python scripts/build.sh
# -DPRIVDIFF_BUILD_BENCH=ON). Usage: bench/run_gpu_bench.sh [build/bin/engine_bench] [REPEATS]
set -euo pipefail
bench=${1:-build/bin/engine_bench}
repeats=${2:-5}
echo "| B x K | non-private rows/s | DP rows/s | DP / non-private time | peak GiB (non-private / DP) |"
echo "|---|---|---|---|---|"
for shape in "256 1" "1024 1" "64 8" "32 32" "256 32"; do
  set -- $shape
  a=$("$bench" nonprivate "$1" "$2" "$repeats" cuda)
  b=$("$bench" vectorised "$1" "$2" "$repeats" cuda)
  python3 - "$a" "$b" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
print(f"| {a['batch']} x {a['k']} | {a['rows_per_second']:,.0f} | {b['rows_per_second']:,.0f} | "
      f"{b['seconds_per_step'] / a['seconds_per_step']:.2f} | {a['peak_rss_mib'] / 1024:.1f} / {b['peak_rss_mib'] / 1024:.1f} |")
PY
done
n=$("$bench" noise 1 1 "$repeats" cuda)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(f"\nsecure noise for all {d[\"parameters\"]:,} parameters: {d[\"seconds_per_step\"]*1000:.1f} ms per logical step")' "$n"
