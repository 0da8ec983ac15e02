#!/usr/bin/env bash
# privdiff compare on two tiny runs (K = 1 and K = 2, one evaluated): the markdown table on stdout,
# compare.csv, report.html with its gnuplot plots and sample grids; bad run directories refused.
# Usage: compare_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny="$fixtures/data/tiny-fashion-mnist"
for k in 1 2; do
  cat > "$tmp/k$k.toml" <<TOML
[run]
name = "tiny-k$k"
seed = 5
private_diagnostics = true  # the loss curve (computed without noise: a caveat on these runs)
[privacy]
epsilon = 8.0
delta = 1e-5
report = ["prv"]
[data]
path = "$tiny"
$tiny_model
[[stage]]
mechanism = "dpdm"
noise_multiplicity = $k
batch_size = 4
steps = 6
[sampler]
type = "edm_heun"
steps = 2
TOML
  # K = 1 evaluates itself through [[eval]]; K = 2 through privdiff sample + eval below.
  [ $k = 1 ] && printf '[[eval]]\nsamples = 20\nepochs = 1\n[eval.dpdm_classifiers]\nclassifiers = ["logreg"]\n' >> "$tmp/k$k.toml"
  "$privdiff" run "$tmp/k$k.toml" --out "$tmp/k$k" >/dev/null 2>&1 || fail "run k$k failed"
done
"$privdiff" sample "$tmp/k2" --count 20 --out "$tmp/k2/samples/s" >/dev/null 2>&1 || fail "sample failed"
"$privdiff" eval "$tmp/k2/samples/s-images-idx3-ubyte.gz" --real-path "$tiny" --classifiers logreg --epochs 1 \
  >/dev/null 2>&1 || fail "eval failed"
# A smoke test's scores are kept beside the real ones (RUN/evals/), never in their place (eval.json).
smoke=$("$privdiff" eval "$tmp/k2/samples/s-images-idx3-ubyte.gz" --real-path "$tiny" --classifiers logreg --epochs 1 \
  --max-samples 10 2>&1) || fail "smoke eval failed: $smoke"
grep -q "kept $tmp/k2/eval.json as it was: this evaluation scored part of the sample set" <<<"$smoke" || fail "smoke: $smoke"
python3 - "$tmp/k2" <<'PY' || fail "the evaluations kept in evals/"
import glob, json, sys
kept = sorted(glob.glob(sys.argv[1] + "/evals/s.*.json"))
assert len(kept) == 2, kept  # the whole set's and the smoke test's (other settings)
counts = sorted(json.load(open(f))["counts"]["samples"] for f in kept)
assert counts == [10, 20], counts
assert json.load(open(sys.argv[1] + "/eval.json"))["counts"]["samples"] == 20
PY
few=$("$privdiff" eval "$tmp/k2/samples/s-images-idx3-ubyte.gz" --real-path "$tiny" --max-samples 5 2>&1); rc=$?
[ $rc = 2 ] && grep -q "max-samples 5 is below the 10 classes of" <<<"$few" || fail "--max-samples 5 (exit $rc): $few"
# TensorBoard scalars beside metrics.jsonl (their bytes: TensorBoardEvents.*).
for k in 1 2; do
  for tag in /loss /epsilon; do grep -aq "$tag" "$tmp/k$k/events.out.tfevents.privdiff" || fail "k$k events: no $tag"; done
done
grep -aq "eval/dpdm_classifiers/accuracy.logreg" "$tmp/k2/events.out.tfevents.privdiff" || fail "k2 events: no eval"
out=$("$privdiff" compare "$tmp/k1" "$tmp/k2" --out "$tmp/report" --points 6 2>&1) || fail "compare: $out"
echo "$out"
grep -q "^| run | mechanism | K | ε (rdp) | ε (prv) | calibrated by | δ | σ | steps | private steps | trainable params | ex/s (private) | train time (s) | train CPU-h | accuracy.logreg \[dpdm_classifiers\] | alignment \[feature_cnn\] | frechet_distance \[feature_cnn\] " <<<"$out" \
  || fail "markdown header"
# (one caveat each: private_diagnostics)
grep -Eq "^\| tiny-k1 \| dpdm \| 1 \| .* \| rdp \| .* \| 20 \| [^|]+ \| 1 \|$" <<<"$out" || fail "k1 row (evaluated by [[eval]])"
grep -Eq "^\| tiny-k2 \| dpdm \| 2 \| .* \| 6 \| .* \| 20 \| samples/s-images-idx3-ubyte.gz \| 1 \|$" <<<"$out" \
  || fail "k2 row (6 steps, 20 eval samples of samples/s)"
# Without gnuplot (the GPU machine has none) the report has no plots, and says so.
has_gnuplot=0; command -v gnuplot > /dev/null && has_gnuplot=1
[ $has_gnuplot = 1 ] || grep -q "warning: privdiff compare draws its plots with gnuplot" <<<"$out" || fail "no gnuplot warning: $out"
python3 - "$tmp/report" "$tmp/k1" "$has_gnuplot" <<'PY' || fail "report contents"
import csv, sys
d = sys.argv[1]
raw = open(f"{d}/compare.csv", "rb").read()
assert all(b < 128 for b in raw), "compare.csv is not plain ASCII"
rows = list(csv.DictReader(open(f"{d}/compare.csv")))
assert [r["run"] for r in rows] == ["tiny-k1", "tiny-k2"], rows
assert float(rows[0]["epsilon_rdp"]) <= 8.0 + 1e-9 and float(rows[1]["epsilon_prv"]) <= float(rows[1]["epsilon_rdp"]), rows
assert all(0 <= float(r["dpdm_classifiers.accuracy.logreg"]) <= 1 and "dpdm_classifiers.accuracy.cnn" not in r for r in rows), rows
assert all(float(r["feature_cnn.frechet_distance"]) >= 0 for r in rows), rows
assert all(r["calibration_accountant"] == "rdp" and r["caveats"] == "1" for r in rows), rows
assert all(float(r["private_examples_per_second"]) > 0 for r in rows), rows
# CPU time: what the process used training (not wall time), a fraction of an hour here.
assert all(0 < float(r["training_cpu_hours"]) < 0.1 for r in rows), rows
# Full precision: the CSV's epsilon is privacy.json's, digit for digit.
import json
want = [e["epsilon"] for e in json.load(open(f"{sys.argv[2]}/privacy.json"))["results"] if e["accountant"] == "rdp"][0]
assert float(rows[0]["epsilon_rdp"]) == want, (rows[0]["epsilon_rdp"], want)
html = open(f"{d}/report.html").read()
plotted = sys.argv[3] == "1"
for needle in ('<table id="comparison">', 'src="grids/0-tiny-k1.png"', 'src="grids/1-tiny-k2.png"', "not Inception",
               "feature_cnn: penultimate 128-d features", "dpdm_classifiers: DPDM's classifiers"):
    assert needle in html, needle
for svg in ("epsilon", "loss-0-stage0"):  # one loss plot per stage
    assert (f'src="plots/{svg}.svg"' in html) == plotted, svg
    if plotted:
        assert "<svg" in open(f"{d}/plots/{svg}.svg").read(), svg
# One epsilon line per run and accountant: colour by run, line style by accountant.
gp = open(f"{d}/plots/epsilon.gp").read()
assert sum(1 for l in gp.splitlines() if "with lines" in l) == 1 and gp.count("with lines") == 4, gp
for style in ("lc 1 dt 1", "lc 1 dt 2", "lc 2 dt 1", "lc 2 dt 2"):
    assert style in gp, (style, gp)
# Sample counts for people, not JSON.
assert "20 samples" in html and '{&quot;' not in html and '{"samples"' not in html, html
assert 'id="plot-notes"' not in html  # both runs log their loss (private_diagnostics)
PY
# A private run without diagnostics has no loss curve, and the report says why.
sed -e 's/^private_diagnostics = true.*//' -e 's/^name = "tiny-k1"/name = "tiny-quiet"/' -e '/^\[\[eval\]\]/,$d' "$tmp/k1.toml" > "$tmp/quiet.toml"
"$privdiff" run "$tmp/quiet.toml" --out "$tmp/quiet" >/dev/null 2>&1 || fail "run quiet failed"
out=$("$privdiff" compare "$tmp/k1" "$tmp/quiet" --out "$tmp/report2" 2>&1) || fail "compare quiet: $out"
grep -q "No loss curve for tiny-quiet, stage 'stage0': a private stage: its loss is a noise-free statistic" "$tmp/report2/report.html" \
  || fail "the report does not say why a run has no loss curve"
[ -s "$tmp/k1/eval-0.json" ] && [ -s "$tmp/k1/samples/eval0-images-idx3-ubyte.gz" ] || fail "[[eval]] wrote no results"
grep -q '"eval"' "$tmp/k1/metrics.jsonl" || fail "[[eval]] result not in metrics.jsonl"
printf '[[eval]]\nevaluators = ["dpdm_classifiers"]\n[eval.dpdm_classifiers]\nclassifiers = ["cnnn"]\n' >> "$tmp/k2.toml"
out=$("$privdiff" validate "$tmp/k2.toml" 2>&1) && fail "validated an unknown classifier"
grep -q "eval\[0\].dpdm_classifiers.classifiers: expected " <<<"$out" || fail "no classifier message: $out"
# --out: an earlier report is replaced whole (nothing stale left); any other non-empty directory is refused.
touch "$tmp/report/plots/stale.svg"
out=$("$privdiff" compare "$tmp/k2" --out "$tmp/report" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "holds an earlier report; add --force to replace it" <<<"$out" || fail "an earlier report was replaced without --force: exit $code: $out"
out=$("$privdiff" compare "$tmp/k2" --out "$tmp/report" --force 2>&1) || fail "replacing a report: $out"
grep -q "replacing the earlier report" <<<"$out" || fail "no replacing note: $out"
[ ! -e "$tmp/report/plots/stale.svg" ] && [ ! -e "$tmp/report/grids/0-tiny-k1.png" ] || fail "stale report files left"
out=$("$privdiff" compare "$tmp/k2" --out "$tmp/k1" 2>&1); code=$?
[ $code -eq 2 ] || fail "compare into a run directory: exit $code: $out"
grep -q "is not empty and holds no earlier report" <<<"$out" || fail "no --out refusal: $out"
out=$("$privdiff" compare "$tmp/k1" "$tmp/nowhere" --out "$tmp/r2" 2>&1); code=$?
[ $code -eq 2 ] || fail "compared a missing run: exit $code: $out"
grep -q "nowhere: not a directory" <<<"$out" || fail "no missing-run message: $out"
mkdir "$tmp/empty"
out=$("$privdiff" compare "$tmp/empty" 2>&1) && fail "compared an empty directory"
grep -q "not a finished privdiff run (no summary.json)" <<<"$out" || fail "no unfinished-run message: $out"
# Issue 67, finding 4: compare's epsilon is the release gate's, from the run's ledger: not what privacy.json
# or summary.json say (edited to 0.01), and a ledger.json that disagrees with checkpoint.pt's copy is refused.
cp -r "$tmp/k1" "$tmp/k1-lying"
python3 - "$tmp/k1-lying" <<'PY'
import json, sys
for name, key in (("summary.json", "privacy"), ("privacy.json", "results")):
    s = json.load(open(f"{sys.argv[1]}/{name}"))
    for r in s[key]:
        r["epsilon"] = 0.01
    json.dump(s, open(f"{sys.argv[1]}/{name}", "w"))
PY
out=$("$privdiff" compare "$tmp/k1" "$tmp/k1-lying" --out "$tmp/report3" 2>&1) || fail "compare of an edited privacy.json: $out"
python3 - "$tmp/report3/compare.csv" <<'PY' || fail "compare took epsilon from privacy.json: $(cat "$tmp/report3/compare.csv")"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 2 and all(float(r["epsilon_rdp"]) > 0.1 for r in rows), rows
assert rows[0]["epsilon_rdp"] == rows[1]["epsilon_rdp"] and rows[0]["epsilon_prv"] == rows[1]["epsilon_prv"], rows
PY
cp -r "$tmp/k1" "$tmp/k1-sigma"
sed -i 's/"noise_multiplier": *\([0-9.e+-]*\)/"noise_multiplier": 1\1/' "$tmp/k1-sigma/ledger.json"
out=$("$privdiff" compare "$tmp/k1-sigma" --out "$tmp/report4" 2>&1); code=$?
[ $code -eq 2 ] || fail "compare of a run whose ledgers disagree: exit $code: $out"
grep -qF "$tmp/k1-sigma/ledger.json and $tmp/k1-sigma/checkpoint.pt disagree about what the run spent" <<<"$out" \
  || fail "no disagreement message: $out"
echo "1 passed, 0 failed"
