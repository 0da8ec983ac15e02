#!/usr/bin/env python3
"""Sums up a profile written by `PRIVDIFF_BENCH_PROFILE=FILE engine_bench ...` (a Chrome trace):
the time of each of privdiff's named phases (privdiff::backward_to_layer_outputs,
privdiff::norms_by_<strategy>, privdiff::sum_kept_gradients, ...) and, inside each, the operators
that take it (self time: an operator's own, less the operators it called). Times are per step.

Usage: bench/profile_summary.py TRACE.json [STEPS] [TOP]   (STEPS: the timed steps, engine_bench's
REPEATS; TOP: operators shown per phase, default 10)
"""
import collections
import json
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    trace = json.load(open(sys.argv[1]))
    steps = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    everything = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    events = [e for e in everything if e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime")]
    events.sort(key=lambda e: (e["tid"], e["ts"], -e["dur"]))
    phase_total = collections.Counter()
    inside = collections.defaultdict(collections.Counter)
    stack, thread = [], None
    for e in events:  # nesting by time on each thread: a parent's self time excludes its children
        if e["tid"] != thread:
            stack, thread = [], e["tid"]
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        e["self"] = e["dur"]
        if stack:
            stack[-1]["self"] -= e["dur"]
        phases = [s["name"] for s in stack if s["name"].startswith("privdiff::")]
        e["phase"] = phases[-1] if phases else "(outside privdiff's phases)"
        e["phases"] = phases
        if e["name"].startswith("privdiff::"):
            phase_total[e["name"]] += e["dur"]
        stack.append(e)
    for e in events:
        if not e["name"].startswith("privdiff::") and e.get("cat") != "cuda_runtime":
            inside[e["phase"]][e["name"]] += e["self"]
    ms = lambda us: us / 1e3 / steps
    print("phase (inclusive, ms per step)")
    for name, us in phase_total.most_common():
        print(f"  {ms(us):9.1f}  {name}")
    print_by_phase(inside, "operators' self time", ms, top)
    gpu_summary(everything, events, steps, top)


def print_by_phase(by_phase, what, ms, top):
    """Each phase (largest first) with its total and its `top` largest entries."""
    for phase, entries in sorted(by_phase.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"\n{phase}: {what} {ms(sum(entries.values())):.1f} ms per step")
        for name, us in entries.most_common(top):
            print(f"  {ms(us):9.1f}  {name}")


def gpu_summary(everything, events, steps, top):
    """Kernel time on the GPU per phase (inclusive), launches per phase, and each phase's top kernels."""
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    kernels = [e for e in everything if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not kernels:
        return
    gpu, count = collections.Counter(), collections.Counter()
    by_kernel = collections.defaultdict(collections.Counter)
    for k in kernels:
        launch = launches.get(k.get("args", {}).get("correlation"))
        phases = launch["phases"] if launch else []
        for phase in phases or ["(outside privdiff's phases)"]:
            gpu[phase] += k["dur"]
            count[phase] += 1
        by_kernel[phases[-1] if phases else "(outside privdiff's phases)"][k["name"][:90]] += k["dur"]
    ms = lambda us: us / 1e3 / steps
    print(f"\nGPU: kernels' time per phase (inclusive, ms per step) and kernels launched per step; "
          f"all kernels {ms(sum(k['dur'] for k in kernels)):.1f} ms, {len(kernels) / steps:.0f} launches")
    for name, us in gpu.most_common():
        print(f"  {ms(us):9.1f}  {count[name] / steps:7.0f}  {name}")
    print_by_phase(by_kernel, "kernels", ms, top)


if __name__ == "__main__":
    main()
