#!/usr/bin/env bash
# The quickstart's warm-up speed with the default threads ([run] threads = 0) and with one thread,
# on an idle machine and with one other busy process (issue 37: on a 2-core machine the default's 2
# threads fell to 20 ex/s against 90 with 1 thread, OpenMP workers waiting for the one sharing its
# core). The default now uses the cores other processes leave idle (core/util/cpu_share.hpp).
# Usage: bench/threads_under_load.sh [PRIVDIFF] [REPEATS]     (needs Debian's dataset-fashion-mnist)
set -u
privdiff=${1:-build/bin/privdiff}
repeats=${2:-2}
recipe="$(dirname "$0")/../examples/recipes/quickstart.toml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${busy:-}" ] && kill "$busy" 2> /dev/null' EXIT
unset OMP_NUM_THREADS
speed() {  # THREADS: the warm-up's examples/s over 120 steps (its console in $tmp/log-THREADS)
  rm -rf "$tmp/run"
  "$privdiff" run "$recipe" --out "$tmp/run" --set run.threads="$1" --set stage.1.steps=120 --stop-after-steps 121 \
    > "$tmp/log-$1" 2>&1
  sed -n 's/.*step 120\/120 .* \([0-9.]*\) ex\/s.*/\1/p' "$tmp/log-$1" | tail -1
}
echo "load      threads=0 (default)  threads=1   ratio   (ex/s, $(nproc) cores, $repeats repeats each)"
for load in idle busy; do
  [ $load = busy ] && { python3 -c 'while True: pass' & busy=$!; }
  for ((r = 0; r < repeats; r++)); do
    d=$(speed 0); o=$(speed 1)
    printf '%-9s %-20s %-11s %s\n' "$load" "$d" "$o" "$(python3 -c "print(f'{$d / $o:.2f}')" 2>/dev/null)"
  done
  grep "threads:" "$tmp/log-0" | head -2
done
