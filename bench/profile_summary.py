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
    events = [e for e in trace["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
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
        if e["name"].startswith("privdiff::"):
            phase_total[e["name"]] += e["dur"]
        stack.append(e)
    for e in events:
        if not e["name"].startswith("privdiff::"):
            inside[e["phase"]][e["name"]] += e["self"]
    ms = lambda us: us / 1e3 / steps
    print("phase (inclusive, ms per step)")
    for name, us in phase_total.most_common():
        print(f"  {ms(us):9.1f}  {name}")
    for phase, ops in sorted(inside.items(), key=lambda kv: -sum(kv[1].values())):
        print(f"\n{phase}: operators' self time {ms(sum(ops.values())):.1f} ms per step")
        for name, us in ops.most_common(top):
            print(f"  {ms(us):9.1f}  {name}")


if __name__ == "__main__":
    main()
