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
#   PyTorch      non-private again, with the malloc settings privdiff makes for itself at start
#                (sdk engine/host_allocator.hpp; PyTorch keeps glibc's defaults): the same-allocator ratio
# Neither Opacus column includes noise or an optimizer step, nor does PyTorch's: privdiff's DP column
# does (its parts table shows how much). The script refuses to compare networks whose parameter
# shapes differ.
# Usage: [ROUNDS=N] bench/side_by_side.sh [build/bin/engine_bench] [REPEATS] [THREADS] [SHAPES...]  e.g. "64 1" "32 8"
#   ROUNDS (default 1): run every configuration N times, round after round; each cell is the median
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
rounds=${ROUNDS:-1}
# ROUNDS > 1: every configuration once per round, the rounds one after another (drift on a shared
# machine then reaches all columns alike); each cell is the median over the rounds.
for round in $(seq 1 "$rounds"); do
  for shape in "${shapes[@]}"; do
    set -- $shape
    at="$out/$1x$2"
    for mode in nonprivate opacus opacus_ghost; do
      [ "$mode" = opacus_ghost ] && [ "$2" -gt 1 ] && continue  # ghost norms are per row: not for K > 1
      "$python" "$here/pytorch_unet_step.py" "$mode" "$1" "$2" "$repeats" "$threads" > "$at-$mode.$round.json"
    done
    # PyTorch again with the malloc settings privdiff makes for itself (engine/host_allocator.hpp)
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 \
      "$python" "$here/pytorch_unet_step.py" nonprivate "$1" "$2" "$repeats" "$threads" > "$at-nonprivate_malloc.$round.json"
    OMP_NUM_THREADS=$threads "$bench" nonprivate "$1" "$2" "$repeats" > "$at-privdiff_nonprivate.$round.json"
    OMP_NUM_THREADS=$threads "$bench" dp_step "$1" "$2" "$repeats" > "$at-privdiff_dp.$round.json" 2> "$at-plan.$round.txt"
  done
done
"$python" - "$out" "$rounds" "${shapes[@]}" <<'PY'
import json, statistics, sys
out, rounds, shapes = sys.argv[1], int(sys.argv[2]), [s.split() for s in sys.argv[3:]]


def load(b, k, mode):
    """A configuration's runs, one per round: the median round's record (its plan and parts), with the
    median time over the rounds and the largest peak."""
    runs = sorted((dict(json.load(open(f"{out}/{b}x{k}-{mode}.{i}.json")), round=i) for i in range(1, rounds + 1)),
                  key=lambda r: r["seconds_per_step"])
    median = dict(runs[(len(runs) - 1) // 2])
    median["seconds_per_step"] = statistics.median(r["seconds_per_step"] for r in runs)
    median["peak_rss_mib"] = max(r["peak_rss_mib"] for r in runs)
    return median

modes = ["nonprivate", "opacus", "opacus_ghost", "privdiff_nonprivate", "privdiff_dp", "nonprivate_malloc"]
first = load(shapes[0][0], shapes[0][1], "nonprivate")
print(f"PyTorch {first['torch']}, Opacus 1.6 (bench/reference-python.txt), {first['threads']} threads, "
      f"{first['parameters']:,} parameters on both sides; each cell the median of {rounds} round(s)\n")
print("| B × K | PyTorch non-private | Opacus | Opacus ghost | privdiff non-private | privdiff DP (whole step) "
      "| **DP / PyTorch non-private** | DP / Opacus | DP / Opacus ghost | examples/s (PyTorch / Opacus / ghost / privdiff DP) "
      "| peak MiB (same order) | privdiff's plan |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
# Opacus ghost at K > 1: not run (its ghost norms are per row; an example's norm is that of its K rows' sum)
parts_rows, malloc_rows = [], []
for b, k in shapes:
    r = {m: load(b, k, m) for m in modes if m != "opacus_ghost" or k == "1"}
    r.setdefault("opacus_ghost", {"seconds_per_step": float("nan"), "peak_rss_mib": "–"})
    torch_shapes = sorted(tuple(s) for s in r["nonprivate"]["shapes"])
    ours = sorted(tuple(s) for s in r["privdiff_dp"]["shapes"])
    if torch_shapes != ours or r["nonprivate"]["parameters"] != r["privdiff_dp"]["parameters"]:
        sys.exit(f"side_by_side: the networks differ ({r['nonprivate']['parameters']} vs "
                 f"{r['privdiff_dp']['parameters']} parameters)")
    t = {m: r[m]["seconds_per_step"] for m in modes}
    plan = dict(l.strip().split(": ", 1) for l in open(f"{out}/{b}x{k}-plan.{r['privdiff_dp']['round']}.txt") if ": " in l)
    eps = lambda m: f"{int(b) / t[m]:.0f}" if t[m] == t[m] else "–"
    num = lambda x: f"{x:.3f}" if x == x else "–"  # nan: not run
    ratio = lambda x: f"{x:.2f}" if x == x else "–"
    print(f"| {b} × {k} | {t['nonprivate']:.3f} | {t['opacus']:.3f} | {num(t['opacus_ghost'])} | "
          f"{t['privdiff_nonprivate']:.3f} | {t['privdiff_dp']:.3f} | **{t['privdiff_dp'] / t['nonprivate']:.2f}** | "
          f"{t['privdiff_dp'] / t['opacus']:.2f} | {ratio(t['privdiff_dp'] / t['opacus_ghost'])} | "
          f"{eps('nonprivate')} / {eps('opacus')} / {eps('opacus_ghost')} / {eps('privdiff_dp')} | "
          f"{' / '.join(str(r[m]['peak_rss_mib']) for m in ['nonprivate', 'opacus', 'opacus_ghost', 'privdiff_dp'])} | "
          f"{plan.get('path', '?')}, chunks of {plan.get('chunk', '?')} |")
    malloc_rows.append(f"| {b} × {k} | {t['nonprivate_malloc']:.3f} | {t['privdiff_nonprivate'] / t['nonprivate_malloc']:.2f} | "
                       f"{t['privdiff_dp'] / t['nonprivate_malloc']:.2f} | {r['nonprivate_malloc']['peak_rss_mib']} |")
    p = r["privdiff_dp"]["parts"]
    parts_rows.append(f"| {b} × {k} | " + " | ".join(f"{p.get(n, 0):.3f}" for n in
                      ["forward_backward", "norms", "clipped_sum", "clipping_total", "noise", "optimizer"]) +
                      f" | {t['privdiff_dp']:.3f} |")
print("\nprivdiff's DP step by part (s; clipping_total = forward+backward, norms and clipped sum of every chunk; "
      "the micro-batch path has only the total):\n")
print("| B × K | forward+backward | norms | clipped sum | clipping total | noise | optimizer | step |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(parts_rows))
print(f"\nprivdiff's allocator: {r['privdiff_dp'].get('allocator', '?')}. PyTorch run again with the same "
      "settings (GLIBC_TUNABLES), which it does not make by default:\n")
print("| B × K | PyTorch non-private, same malloc settings | privdiff non-private / it | privdiff DP / it | its peak MiB |")
print("|---|---|---|---|---|")
print("\n".join(malloc_rows))
PY
