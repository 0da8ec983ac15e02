#!/usr/bin/env bash
# Runs engine_bench for every configuration (one process each, so peak memory is per
# configuration) and prints a markdown table. Build first: scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON
# Usage: bench/run_engine_bench.sh [build/bin/engine_bench]
set -euo pipefail
bench=${1:-build/bin/engine_bench}
echo "| physical batch | K | non-private s/step | vectorised DP s/step | micro-batch oracle s/step | (b)/(a) | (c)/(b) | peak MiB (a / b / c) |"
echo "|---|---|---|---|---|---|---|---|"
for k in 1 8; do
  for batch in 32 64 128; do
    if [ "$k" = 8 ] && [ "$batch" = 128 ] && [ "${PRIVDIFF_BENCH_LARGE:-0}" != 1 ]; then
      continue  # 1,024 rows per step: ~20 GB; set PRIVDIFF_BENCH_LARGE=1 on a bigger machine
    fi
    a=$("$bench" nonprivate "$batch" "$k" 2)
    b=$("$bench" vectorised "$batch" "$k" 2)
    c=$("$bench" oracle "$batch" "$k" 1)
    python3 - "$a" "$b" "$c" <<'PY'
import json, sys
a, b, c = (json.loads(x) for x in sys.argv[1:4])
ta, tb, tc = (x["seconds_per_step"] for x in (a, b, c))
print(f"| {a['batch']} | {a['k']} | {ta:.3f} | {tb:.3f} | {tc:.3f} | {tb/ta:.2f} | {tc/tb:.1f} | "
      f"{a['peak_rss_mib']:.0f} / {b['peak_rss_mib']:.0f} / {c['peak_rss_mib']:.0f} |")
PY
  done
done
