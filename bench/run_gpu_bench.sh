#!/usr/bin/env bash
# GPU table of the engine (issues #14 and #28's shapes): rows/s and peak GPU memory per step of one
# physical batch of B examples x K noised rows — non-private, the DP step as a stage runs it (`auto`:
# path, chunk and norm strategies measured first), privdiff 0.10's DP step (materialised norms), and
# the DP step with a bf16 forward — then one logical step's secure noise for every parameter.
# Build with CUDA first (PRIVDIFF_TORCH=python scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON).
# Opacus's numbers beside them: python3 bench/pytorch_unet_step.py opacus B K REPEATS (pip opacus).
# Usage: bench/run_gpu_bench.sh [build/bin/engine_bench] [REPEATS]
set -euo pipefail
bench=${1:-build/bin/engine_bench}
repeats=${2:-5}
echo "| B x K | PyTorch non-private rows/s | non-private rows/s | DP rows/s | DP 0.10 rows/s | DP bf16 rows/s | DP / non-private time | peak GiB (PyTorch / non-private / DP / DP 0.10) |"
echo "|---|---|---|---|---|---|---|---|"
for shape in "256 1" "1024 1" "64 8" "32 32" "64 32"; do
  set -- $shape
  p=$(python3 "$(dirname "$0")/pytorch_unet_step.py" nonprivate "$1" "$2" "$repeats" 0 cuda 2>/dev/null || echo '{"rows_per_second": 0, "peak_rss_mib": 0}')
  a=$("$bench" nonprivate "$1" "$2" "$repeats" cuda)
  b=$("$bench" auto "$1" "$2" "$repeats" cuda 2>/tmp/engine_plan_$1_$2.txt)
  c=$("$bench" materialised_norms "$1" "$2" "$repeats" cuda)
  d=$("$bench" auto "$1" "$2" "$repeats" cuda bf16 2>/dev/null)
  python3 - "$a" "$b" "$c" "$d" "$p" <<'PY'
import json, sys
a, b, c, d, p = (json.loads(x) for x in sys.argv[1:6])
print(f"| {a['batch']} x {a['k']} | {p['rows_per_second']:,.0f} | {a['rows_per_second']:,.0f} | {b['rows_per_second']:,.0f} | {c['rows_per_second']:,.0f} | "
      f"{d['rows_per_second']:,.0f} | {b['seconds_per_step'] / a['seconds_per_step']:.2f} | "
      f"{p['peak_rss_mib'] / 1024:.1f} / {a['peak_rss_mib'] / 1024:.1f} / {b['peak_rss_mib'] / 1024:.1f} / "
      f"{c['peak_rss_mib'] / 1024:.1f} |")
PY
  sed 's/^/    plan: /' "/tmp/engine_plan_$1_$2.txt"
done
n=$("$bench" noise 1 1 "$repeats" cuda)
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(f"\nsecure noise for all {d[\"parameters\"]:,} parameters: {d[\"seconds_per_step\"]*1000:.1f} ms per logical step")' "$n"
