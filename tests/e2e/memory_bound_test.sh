#!/usr/bin/env bash
# Physical chunks bound memory: one private step at logical batch 1024 peaks no higher than at 128
# (same physical batch 32) beyond a coarse allowance. Before the fix each chunk's activations stayed
# alive through the graph-attached clipped sums: 1.17 GB at 256, 3.1 GB at 1024.
# Uses the bench script (one process per size) on Debian's Fashion-MNIST.
# Usage: memory_bound_test.sh PRIVDIFF BENCH_SCRIPT
set -u
privdiff=$1 bench=$2
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
table=$(bash "$bench" "$privdiff" 32 128 1024 2>&1) || fail "bench failed: $table"
echo "$table"
python3 - "$table" <<'PY' || fail "peak memory grows with the logical batch"
import sys
rows = [l.split("|") for l in sys.argv[1].splitlines() if l.startswith("| 1")]
peak = {int(r[1]): float(r[4]) for r in rows}
assert set(peak) == {128, 1024}, peak
# The 1024 batch's images are 3 MB; allow 200 MiB for allocator noise.
assert peak[1024] < peak[128] + 200, peak
PY
echo "1 passed, 0 failed"
