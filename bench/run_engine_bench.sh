#!/usr/bin/env bash
# The CPU table of the engine: seconds per step of one physical batch of B examples x K noised rows
# on DPDM's Fashion-MNIST UNet (1.62M parameters), one process per configuration (so peak memory is
# per configuration), all threads of the machine:
#   (p) PyTorch's own non-private step of the same network (bench/pytorch_unet_step.py; skipped
#       without python3-torch), (a) privdiff's non-private step, (b) privdiff's DP step as a stage
#   runs it (`auto`: path, chunk and norm strategies measured first), (c) privdiff 0.10's DP step
#   (every layer's per-example gradients materialised for its norms).
# Build first (scripts/build.sh; the benchmarks are built by default).
# Usage: bench/run_engine_bench.sh [build/bin/engine_bench] [REPEATS] [SHAPES...]   e.g. "64 1" "32 8"
set -euo pipefail
bench=${1:-build/bin/engine_bench}
repeats=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=("32 1" "64 1" "128 1" "32 8" "64 8")
threads=$(nproc)
have_torch=0
/usr/bin/python3 -c "import torch" 2>/dev/null && have_torch=1
echo "| B x K | PyTorch non-private s/step (p) | non-private (a) | DP (b) | DP 0.10 (c) | (b)/(p) | (a)/(p) | (c)/(b) | DP plan | peak MiB (p / a / b) |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for shape in "${shapes[@]}"; do
  set -- $shape
  p='{"seconds_per_step": 0, "peak_rss_mib": 0}'
  [ $have_torch = 1 ] && p=$(/usr/bin/python3 "$(dirname "$0")/pytorch_unet_step.py" nonprivate "$1" "$2" "$repeats" "$threads")
  a=$("$bench" nonprivate "$1" "$2" "$repeats")
  b=$("$bench" auto "$1" "$2" "$repeats" 2>/tmp/engine_plan.txt)
  c=$("$bench" materialised_norms "$1" "$2" "$repeats")
  python3 - "$p" "$a" "$b" "$c" /tmp/engine_plan.txt <<'PY'
import json, sys
p, a, b, c = (json.loads(x) for x in sys.argv[1:5])
plan = dict(line.strip().split(": ", 1) for line in open(sys.argv[5]) if ": " in line)
tp, ta, tb, tc = (x["seconds_per_step"] for x in (p, a, b, c))
ratio = lambda x, y: f"{x / y:.2f}" if y else "–"
print(f"| {a['batch']} x {a['k']} | {tp:.3f} | {ta:.3f} | {tb:.3f} | {tc:.3f} | {ratio(tb, tp)} | {ratio(ta, tp)} | "
      f"{ratio(tc, tb)} | {plan.get('path', '?')}, chunks of {plan.get('chunk', '?')} | "
      f"{p['peak_rss_mib']:.0f} / {a['peak_rss_mib']:.0f} / {b['peak_rss_mib']:.0f} |")
PY
done
