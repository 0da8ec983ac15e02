#!/usr/bin/env bash
# privdiff's private step beside today's PyTorch and Opacus, in one run on one machine: DPDM's
# Fashion-MNIST UNet (1.62M parameters) and its denoising loss with K noise draws per example, the
# same network written with torch.nn's layers in bench/pytorch_unet_step.py. Per shape B x K, one
# process per configuration (so peak memory is per configuration), THREADS threads each:
#   PyTorch      non-private: forward + backward of the mean loss (pinned torch, reference-python.txt)
#   Opacus       standard: per-sample gradients by hooks + DPOptimizer.clip_and_accumulate
#   Opacus ghost fast gradient clipping (ghost norms for Linear/Embedding, per-sample gradients for its
#                other layers), two backward passes
#   privdiff     non-private: forward + backward; DP: the whole private step as a stage runs it (engine
#                path and chunk measured first; clipped sum, the step's secure noise and an Adam update)
# Neither Opacus column includes noise or an optimizer step, nor does PyTorch's: privdiff's DP column
# does (its parts table shows how much). The script refuses to compare networks whose parameter
# shapes differ.
# Usage: bench/side_by_side.sh [build/bin/engine_bench] [REPEATS] [THREADS] [SHAPES...]  e.g. "64 1" "32 8"
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bench=${1:-build/bin/engine_bench}
repeats=${2:-3}
threads=${3:-2}
shift $(( $# > 3 ? 3 : $# ))
shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=("64 1" "128 1" "32 8")
[ -x "$bench" ] || { echo "side_by_side: $bench not built (scripts/build.sh)" >&2; exit 2; }
python=$("$here/setup_reference_python.sh")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for shape in "${shapes[@]}"; do
  set -- $shape
  for mode in nonprivate opacus opacus_ghost; do
    [ "$mode" = opacus_ghost ] && [ "$2" -gt 1 ] && continue  # ghost norms are per row: not for K > 1
    "$python" "$here/pytorch_unet_step.py" "$mode" "$1" "$2" "$repeats" "$threads" > "$out/$1x$2-$mode.json"
  done
  OMP_NUM_THREADS=$threads "$bench" nonprivate "$1" "$2" "$repeats" > "$out/$1x$2-privdiff_nonprivate.json"
  OMP_NUM_THREADS=$threads "$bench" dp_step "$1" "$2" "$repeats" > "$out/$1x$2-privdiff_dp.json" 2> "$out/$1x$2-plan.txt"
done
"$python" - "$out" "${shapes[@]}" <<'PY'
import json, sys
out, shapes = sys.argv[1], [s.split() for s in sys.argv[2:]]
modes = ["nonprivate", "opacus", "opacus_ghost", "privdiff_nonprivate", "privdiff_dp"]
first = json.load(open(f"{out}/{shapes[0][0]}x{shapes[0][1]}-nonprivate.json"))
print(f"PyTorch {first['torch']}, Opacus 1.6 (bench/reference-python.txt), {first['threads']} threads, "
      f"{first['parameters']:,} parameters on both sides\n")
print("| B × K | PyTorch non-private | Opacus | Opacus ghost | privdiff non-private | privdiff DP (whole step) "
      "| **DP / PyTorch non-private** | DP / Opacus | DP / Opacus ghost | examples/s (PyTorch / Opacus / ghost / privdiff DP) "
      "| peak MiB (same order) | privdiff's plan |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
# Opacus ghost at K > 1: not run (its ghost norms are per row; an example's norm is that of its K rows' sum)
parts_rows = []
for b, k in shapes:
    r = {m: json.load(open(f"{out}/{b}x{k}-{m}.json")) for m in modes if m != "opacus_ghost" or k == "1"}
    r.setdefault("opacus_ghost", {"seconds_per_step": float("nan"), "peak_rss_mib": "–"})
    torch_shapes = sorted(tuple(s) for s in r["nonprivate"]["shapes"])
    ours = sorted(tuple(s) for s in r["privdiff_dp"]["shapes"])
    if torch_shapes != ours or r["nonprivate"]["parameters"] != r["privdiff_dp"]["parameters"]:
        sys.exit(f"side_by_side: the networks differ ({r['nonprivate']['parameters']} vs "
                 f"{r['privdiff_dp']['parameters']} parameters)")
    t = {m: r[m]["seconds_per_step"] for m in modes}
    plan = dict(l.strip().split(": ", 1) for l in open(f"{out}/{b}x{k}-plan.txt") if ": " in l)
    eps = lambda m: f"{int(b) / t[m]:.0f}" if t[m] == t[m] else "–"
    num = lambda x: f"{x:.3f}" if x == x else "–"  # nan: not run
    ratio = lambda x: f"{x:.2f}" if x == x else "–"
    print(f"| {b} × {k} | {t['nonprivate']:.3f} | {t['opacus']:.3f} | {num(t['opacus_ghost'])} | "
          f"{t['privdiff_nonprivate']:.3f} | {t['privdiff_dp']:.3f} | **{t['privdiff_dp'] / t['nonprivate']:.2f}** | "
          f"{t['privdiff_dp'] / t['opacus']:.2f} | {ratio(t['privdiff_dp'] / t['opacus_ghost'])} | "
          f"{eps('nonprivate')} / {eps('opacus')} / {eps('opacus_ghost')} / {eps('privdiff_dp')} | "
          f"{' / '.join(str(r[m]['peak_rss_mib']) for m in ['nonprivate', 'opacus', 'opacus_ghost', 'privdiff_dp'])} | "
          f"{plan.get('path', '?')}, chunks of {plan.get('chunk', '?')} |")
    p = r["privdiff_dp"]["parts"]
    parts_rows.append(f"| {b} × {k} | " + " | ".join(f"{p.get(n, 0):.3f}" for n in
                      ["forward_backward", "norms", "clipped_sum", "clipping_total", "noise", "optimizer"]) +
                      f" | {t['privdiff_dp']:.3f} |")
print("\nprivdiff's DP step by part (s; clipping_total = forward+backward, norms and clipped sum of every chunk; "
      "the micro-batch path has only the total):\n")
print("| B × K | forward+backward | norms | clipped sum | clipping total | noise | optimizer | step |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(parts_rows))
PY
