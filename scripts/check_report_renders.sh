#!/usr/bin/env bash
# Renders a `privdiff compare` report in headless Chromium and checks it: the comparison table is
# there, every image (plots, sample grids) loaded, and at 1200 px neither the page nor the table (in
# its own scroll box) needs a horizontal scroll bar. Writes REPORT_DIR/report.png (a screenshot).
#   scripts/check_report_renders.sh REPORT_DIR
# Needs Debian's chromium (apt-get install chromium); exits 2 when it is missing.
set -euo pipefail
dir=$(cd "${1:?usage: check_report_renders.sh REPORT_DIR}" && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "check_report_renders: chromium is not installed (apt-get install chromium)" >&2; exit 2; }
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=10000)
dom=$("$browser" "${flags[@]}" --window-size=1200,900 --dump-dom "file://$dir/report.html" 2>/dev/null)
grep -q '<table id="comparison">' <<<"$dom" || { echo "FAIL: no comparison table in the rendered page"; exit 1; }
loaded=$(grep -o 'data-images-loaded="[0-9]*/[0-9]*"' <<<"$dom" | grep -o '[0-9]*/[0-9]*' || true)
[ -n "$loaded" ] || { echo "FAIL: the page's load handler did not run"; exit 1; }
[ "${loaded%/*}" = "${loaded#*/}" ] && [ "${loaded%/*}" -gt 0 ] || { echo "FAIL: images loaded: $loaded"; exit 1; }
overflow=$(grep -o 'data-overflow="[0-9]*"' <<<"$dom" | grep -o '[0-9][0-9]*' || true)
[ "${overflow:-x}" = 0 ] || { echo "FAIL: at 1200 px the page or its table is ${overflow:-?} px wider than the window (a horizontal scroll bar)"; exit 1; }
"$browser" "${flags[@]}" --window-size=1200,1800 --screenshot="$dir/report.png" "file://$dir/report.html" >/dev/null 2>&1
[ -s "$dir/report.png" ] || { echo "FAIL: no screenshot"; exit 1; }
echo "report renders: table present, images loaded $loaded, no horizontal scroll bar at 1200 px, screenshot $dir/report.png"
