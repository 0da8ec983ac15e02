#!/usr/bin/env bash
# privdiff compare of five tiny runs scored by the default evaluators (dpdm_classifiers' three
# classifiers + feature_cnn): the steps a non-private and a two-stage run trained, and report.html
# rendered in headless Chromium (scripts/check_report_renders.sh) no wider than 1,200 px.
# Skips (77) only where Debian's chromium is not installed.
# Usage: compare_report_test.sh PRIVDIFF FIXTURE_DIR CHECK_REPORT_RENDERS_SH
set -u
privdiff=$1 fixtures=$2 check=$3
source "$(dirname "$0")/common.sh"
tiny="$fixtures/data/tiny-fashion-mnist"
# recipe NAME DATA STAGES: a tiny run, evaluated with the default evaluators (few samples, 1 epoch).
recipe() {
  cat > "$tmp/$1.toml" <<TOML
[run]
name = "$1"
seed = 5
[privacy]
epsilon = 8.0
delta = 1e-5
report = ["prv"]
$2
$tiny_model
$3
[sampler]
type = "edm_heun"
steps = 2
[[eval]]
samples = 20
epochs = 1
[eval.feature_cnn]
feature_epochs = 1
TOML
  "$privdiff" run "$tmp/$1.toml" --out "$tmp/runs/$1" > "$tmp/$1.log" 2>&1 || fail "run $1: $(tail -n 5 "$tmp/$1.log")"
}
private="[data]
path = \"$tiny\""
dpdm() { printf '[[stage]]\nmechanism = "dpdm"\nnoise_multiplicity = %s\nbatch_size = 4\nsteps = 4\n' "$1"; }
recipe fmnist-dpdm-k1-eps8 "$private" "$(dpdm 1)"
recipe fmnist-dpdm-k4-eps8 "$private" "$(dpdm 4)"
recipe fmnist-dpsgd-eps8 "$private" "$(dpdm 1 | sed 's/"dpdm"/"dpsgd"/; /noise_multiplicity/d')"
recipe fmnist-nonprivate-baseline "$private
public = true" "$(dpdm 1 | sed 's/"dpdm"/"nonprivate"/; /noise_multiplicity/d')"
recipe fmnist_public_warmup_then_dpdm_k2 "[data.private]
path = \"$tiny\"
[data.public]
path = \"$tiny\"
split = \"test\"
public = true" "[[stage]]
name = \"warm\"
mechanism = \"nonprivate\"
data = \"public\"
batch_size = 4
steps = 3
[[stage]]
name = \"train\"
data = \"private\"
$(dpdm 2 | tail -n +2)"
out=$("$privdiff" compare "$tmp"/runs/* --out "$tmp/report" --points 4 2>&1) || fail "compare: $out"
# Steps: every stage's (a non-private run trained too); private steps: the ledger's, which ε counts.
grep -q "| σ | steps | private steps | trainable params |" <<<"$out" || fail "markdown header: $out"
grep -Eq "^\| fmnist-nonprivate-baseline \| nonprivate \| – \| 0 \| 0 \| – \| 1e-05 \| – \| 4 \| 0 \| " <<<"$out" \
  || fail "non-private row (4 steps, 0 private): $out"
grep -Eq "^\| fmnist_public_warmup_then_dpdm_k2 \| nonprivate / dpdm \| 2 \| .* \| 3 / 4 \| 4 \| " <<<"$out" \
  || fail "two-stage row (3 / 4 steps, 4 private): $out"
python3 - "$tmp/report" <<'PY' || fail "report contents"
import csv, re, sys
d = sys.argv[1]
rows = {r["run"]: r for r in csv.DictReader(open(f"{d}/compare.csv"))}
assert len(rows) == 5, rows
assert rows["fmnist-nonprivate-baseline"]["steps"] == "4" and rows["fmnist-nonprivate-baseline"]["private_steps"] == "0"
assert rows["fmnist-dpdm-k4-eps8"]["private_steps"] == "4"
# Each evaluator's metrics side by side (in the CSV too), every default metric present.
header = next(csv.reader(open(f"{d}/compare.csv")))
evaluators = [h.split(".")[0] for h in header if h.startswith(("dpdm_classifiers.", "feature_cnn."))]
assert evaluators == sorted(evaluators, key=evaluators.index) and len(evaluators) == 8, header  # feature_cnn: 5 (alignment too)
assert len(set(evaluators)) == 2 and evaluators.count("dpdm_classifiers") == 3, header
# The HTML table is transposed: runs are its columns, metrics its rows under their evaluator.
html = open(f"{d}/report.html").read()
table = html[html.index('<table id="comparison">'):html.index("</table>")]
heads = re.findall(r'<th scope="col">(.*?)</th>', table)
assert sorted(h.replace("<wbr>", "") for h in heads) == sorted(rows), heads
assert "evaluator <code>dpdm_classifiers</code>" in table and "evaluator <code>feature_cnn</code>" in table, table
PY
command -v chromium > /dev/null || command -v chromium-browser > /dev/null \
  || { echo "SKIP: chromium is not installed (apt-get install chromium; scripts/install_dependencies.sh does), so report.html was not rendered"; exit 77; }
out=$(bash "$check" "$tmp/report" 2>&1) || fail "the report does not render within 1,200 px: $out"
echo "$out"
[ -s "$tmp/report/report.png" ] || fail "no screenshot"
# check_report_renders.sh's screenshot is part of the report: --force replaces it with the rest.
"$privdiff" compare "$tmp/runs/fmnist-dpsgd-eps8" --out "$tmp/report" --force > /dev/null 2>&1 || fail "--force over a checked report"
[ ! -e "$tmp/report/report.png" ] || fail "a stale screenshot left"
echo "1 passed, 0 failed"
