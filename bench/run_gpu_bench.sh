#!/usr/bin/env bash
# The engine's GPU table beside PyTorch and Opacus 1.6 on the same GPU (issue #39): rows/s and peak GPU
# memory for one physical batch of B examples x K noised rows of DPDM's 1.62M UNet, median of REPEATS
# steps after a warm-up, each configuration in its own process:
#   PyTorch non-private; Opacus standard (hooks + clip_and_accumulate); Opacus fast gradient clipping
#   (ghost; K = 1 only); privdiff non-private; privdiff's whole DP step (`dp_step`: path, chunk and norm
#   strategies measured on the warm-up, then the clipped sum, the step's noise and Adam; one backward
#   pass, a stage's default); the same with two backward passes (clip_passes = "two": no layer output's
#   gradient held, fast_gradient_clipping.hpp); the same with a bf16 forward. Then one logical step's
#   secure noise for every parameter.
# Build with CUDA first (PRIVDIFF_TORCH=python scripts/build.sh -DPRIVDIFF_BUILD_BENCH=ON); Opacus is
# pip's opacus==1.6.0 (bench/reference-python.txt). A configuration that fails or outlasts
# GPU_BENCH_TIMEOUT seconds (default 120) shows as "—"; its reason is in the raw file.
# Usage: bench/run_gpu_bench.sh [build/bin/engine_bench] [REPEATS] [RAW.jsonl]
#   GPU_BENCH_SHAPES="256x1 1024x1 64x8 32x32" (the default) picks the shapes; GPU_BENCH_BF16=0 leaves
#   the bf16 column out.
set -uo pipefail
here=$(dirname "$0")
bench=${1:-build/bin/engine_bench}
repeats=${2:-5}
raw=${3:-/tmp/gpu_bench.jsonl}
limit=${GPU_BENCH_TIMEOUT:-120}
device=${GPU_BENCH_DEVICE:-cuda}  # cpu: a dry run of the script itself
: > "$raw"
measure() {  # measure NAME COMMAND...: one JSON line (or {} with the error) into $raw, echoed
  local name=$1 out
  shift
  # --foreground: in this script's process group, so a timeout around the whole script reaches it too
  out=$(timeout --foreground "$limit" "$@" 2> /tmp/gpu_bench_err.txt | tail -1)
  if ! python3 -c 'import json,sys; assert isinstance(json.loads(sys.argv[1]), dict)' "$out" 2> /dev/null; then
    out=$(python3 -c 'import json,sys; print(json.dumps({"error": sys.argv[1][-400:]}))' \
      "$(cat /tmp/gpu_bench_err.txt) (exit or timeout after ${limit} s)")
  fi
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["name"]=sys.argv[2]; print(json.dumps(d))' "$out" "$name" \
    | tee -a "$raw"
}
echo "| B x K | PyTorch non-private | Opacus | Opacus ghost | privdiff non-private | privdiff DP | DP two passes | DP bf16 |" \
  "DP / PyTorch non-private | DP / Opacus (best) | peak GiB (PyTorch / Opacus / Opacus ghost / privdiff DP / two passes) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for shape in ${GPU_BENCH_SHAPES:-256x1 1024x1 64x8 32x32}; do
  b=${shape%x*} k=${shape#*x}
  p=$(measure pytorch python3 "$here/pytorch_unet_step.py" nonprivate "$b" "$k" "$repeats" 0 "$device")
  o=$(measure opacus python3 "$here/pytorch_unet_step.py" opacus "$b" "$k" "$repeats" 0 "$device")
  g='{}'
  [ "$k" = 1 ] && g=$(measure opacus_ghost python3 "$here/pytorch_unet_step.py" opacus_ghost "$b" "$k" "$repeats" 0 "$device")
  n=$(measure nonprivate "$bench" nonprivate "$b" "$k" "$repeats" "$device")
  d=$(measure dp_step "$bench" dp_step "$b" "$k" "$repeats" "$device")
  d2=$(PRIVDIFF_BENCH_CLIP_PASSES=two measure dp_step_two_passes "$bench" dp_step "$b" "$k" "$repeats" "$device")
  h='{}'
  [ "${GPU_BENCH_BF16:-1}" = 1 ] && h=$(measure dp_step_bf16 "$bench" dp_step "$b" "$k" "$repeats" "$device" bf16)
  python3 - "$b" "$k" "$p" "$o" "$g" "$n" "$d" "$d2" "$h" <<'PY'
import json, sys
b, k = sys.argv[1:3]
p, o, g, n, d, d2, h = (json.loads(x) for x in sys.argv[3:10])
rate = lambda r: f"{r['rows_per_second']:,.0f}" if "rows_per_second" in r else "—"
time = lambda r: r.get("seconds_per_step")
ratio = lambda x, y: f"{x / y:.2f}" if x and y else "—"
best_opacus = min((t for t in (time(o), time(g)) if t), default=None)
gib = lambda r: f"{r['peak_rss_mib'] / 1024:.1f}" if "peak_rss_mib" in r else "—"
print(f"| {b} x {k} | {rate(p)} | {rate(o)} | {rate(g)} | {rate(n)} | {rate(d)} | {rate(d2)} | {rate(h)} | "
      f"{ratio(time(d), time(p))} | {ratio(time(d), best_opacus)} | {gib(p)} / {gib(o)} / {gib(g)} / {gib(d)} / {gib(d2)} |")
for name, r in (("one pass", d), ("two passes", d2)):
    if r.get("parts"):
        print(f"    privdiff DP step's parts, {name} (s): " + ", ".join(f"{key} {value:.4f}" for key, value in r["parts"].items()))
PY
done
noise=$(measure noise "$bench" noise 1 1 "$repeats" "$device")
python3 - "$noise" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
if "parameters" in d:
    print(f"\nsecure noise for all {d['parameters']:,} parameters: {d['seconds_per_step'] * 1000:.1f} ms per logical step")
else:
    print(f"\nnoise: {d}")
PY
