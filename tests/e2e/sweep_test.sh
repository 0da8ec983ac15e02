#!/usr/bin/env bash
# privdiff sweep: hyperparameter search with its privacy accounted. K is drawn once and recorded
# before any candidate runs; a sweep stopped after one candidate resumes without drawing again; each
# candidate's noise keeps it within the budget the selection theorem needs; only the best candidate
# is released (its model with the sweep's guarantee, its samples and scores), the others deleted;
# privdiff account reproduces the sweep's epsilon; the released model cannot be fine-tuned with a
# cost init_from cannot carry. Tiny: the plumbing and the accounting, not the numbers.
# Usage: sweep_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
{ tiny_dp_recipe "$fixtures" 5.0 'steps = 3' 'lr = 1e-3'
  printf '[[eval]]\nsamples = 20\nepochs = 1\n[eval.dpdm_classifiers]\nclassifiers = ["logreg"]\n'; } > "$tmp/tune.toml"
sweep=(sweep "$tmp/tune.toml" --param stage.0.lr=1e-4,1e-3,1e-2 --param stage.0.steps=log:2:5:int
       --score dpdm_classifiers.accuracy.logreg --gamma 0.3 --seed 4 --out "$tmp/sweep")
out=$("$privdiff" "${sweep[@]:0:6}" --score accuracy --out "$tmp/bad" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "name it EVALUATOR.METRIC" <<<"$out" || fail "a bad --score: exit $code: $out"
[ -e "$tmp/bad" ] && fail "a refused sweep wrote its directory"
# A metric the score's evaluator does not report is refused before any candidate spends (issue 52).
out=$("$privdiff" "${sweep[@]:0:6}" --score dpdm_classifiers.fid --out "$tmp/bad" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "sweep --score dpdm_classifiers.fid: dpdm_classifiers reports dpdm_classifiers.accuracy.logreg" <<<"$out" \
  && [ ! -e "$tmp/bad" ] && ! grep -q "candidate 1 of" <<<"$out" || fail "a metric no evaluator reports: exit $code: $out"
out=$("$privdiff" "${sweep[@]}" --stop-after-candidates -1 2>&1); code=$?
[ "$code" = 2 ] && grep -q "expected a count >= 0" <<<"$out" && [ ! -e "$tmp/sweep" ] || fail "--stop-after-candidates -1: exit $code: $out"
out=$("$privdiff" "${sweep[@]}" --stop-after-candidates 1 2>&1); code=$?
[ "$code" = 3 ] || fail "--stop-after-candidates 1: exit $code, not 3: $out"
drawn=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(len(s['candidates']), [c['done'] for c in s['candidates']])" "$tmp/sweep/sweep.json")
[ "${drawn%% *}" -ge 2 ] || fail "seed 4 should draw at least two candidates: $drawn"
grep -q "candidate 1 of" <<<"$out" && ! grep -q "candidate 2 of" <<<"$out" || fail "more than one candidate ran: $out"
grep -q "warning: --seed 4 lets anyone who knows it redraw K" <<<"$out" || fail "no warning for a known seed: $out"
# K and the scores are the sweep's secret: sweep.json and the candidates' runs are owner-only.
[ "$(stat -c %a "$tmp/sweep/sweep.json")" = 600 ] && [ "$(stat -c %a "$tmp/sweep/candidates")" = 700 ] \
  || fail "sweep.json / candidates/ readable by others: $(stat -c '%a %n' "$tmp/sweep/sweep.json" "$tmp/sweep/candidates")"
# A resumed sweep runs as planned: an option that would change the plan is refused, not ignored.
out=$("$privdiff" sweep --resume "$tmp/sweep" --param stage.0.lr=1 2>&1); code=$?
[ "$code" = 2 ] && grep -q "sweep --resume continues the sweep as it was planned: --param" <<<"$out" || fail "--resume --param: exit $code: $out"
out=$("$privdiff" sweep --resume "$tmp/sweep" 2>&1) || fail "resume failed: $out"
after=$(python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(len(s['candidates']))" "$tmp/sweep/sweep.json")
[ "$after" = "${drawn%% *}" ] || fail "K changed on resume: ${drawn%% *} -> $after"
[ -d "$tmp/sweep/candidates" ] && fail "the candidates' run directories were not deleted"
[ -s "$tmp/sweep/selected/model.safetensors" ] && [ -s "$tmp/sweep/selected/samples.png" ] && [ -s "$tmp/sweep/selected/eval-0.json" ] \
  || fail "the release is incomplete: $(ls "$tmp/sweep/selected")"
# Its place among the K (candidates/N) would tell that K > N: nothing released names it.
! grep -rq "candidates/" "$tmp/sweep/selected" "$tmp/sweep/privacy.json" \
  || fail "the release names the selected candidate's directory: $(grep -rl "candidates/" "$tmp/sweep/selected")"
account=$("$privdiff" account "$tmp/sweep" --json 2>&1) || fail "account of the sweep failed: $account"
python3 - "$tmp/sweep" "$account" <<'PY' || fail "the sweep's reports disagree"
import json, struct, sys
sweep, account = sys.argv[1], json.loads(sys.argv[2])
state, privacy = json.load(open(sweep + "/sweep.json")), json.load(open(sweep + "/privacy.json"))
assert abs(account["epsilon"] - state["epsilon"]) <= 1e-9 * state["epsilon"], (account, state["epsilon"])
assert privacy["epsilon"] == state["epsilon"] <= 5.0, privacy
# Theorem 2 by hand, from what the state records.
import math
b, c = state["budget"], state["count"]
mean = c["eta"] * (1 - c["gamma"]) / (c["gamma"] * (1 - c["gamma"] ** c["eta"]))
rdp = (b["rdp"] + (1 + c["eta"]) * (1 - 1 / b["order_hat"]) * b["rdp_hat"] + (1 + c["eta"]) * math.log(1 / c["gamma"]) / b["order_hat"]
       + math.log(mean) / (b["order"] - 1))
a = b["order"]
eps = rdp + math.log1p(-1 / a) - (math.log(state["delta"]) + math.log(a)) / (a - 1)
assert abs(eps - state["epsilon"]) <= 1e-9 * eps, (eps, state["epsilon"])
for cand in state["candidates"]:
    assert cand["done"] and cand["single_run_epsilon"] < state["epsilon"], cand
raw = open(sweep + "/selected/model.safetensors", "rb").read()
meta = json.loads(raw[8:8 + struct.unpack("<Q", raw[:8])[0]])["__metadata__"]
guarantee = json.loads(meta["privdiff.privacy"])
assert abs(float(meta["privdiff.epsilon"]) - state["epsilon"]) < 1e-5 and "ledger" not in guarantee, meta
assert privacy["selected"]["hyperparameters"] == state["candidates"][state["selected"]]["values"]
# A known seed is a known K: the release says so.
assert state["seed"] == 4 and privacy["candidate_draws"] == "seeded (--seed)", privacy
assert any("--seed 4" in c for c in privacy["caveats"]) and any("--seed 4" in c for c in guarantee["caveats"]), privacy
# Every candidate's caveats reach the release (the tiny recipe draws reproducible noise): privacy.json,
# the model's metadata and account (issue 50, finding 3).
for caveats in (privacy["caveats"], guarantee["caveats"], account["caveats"]):
    assert any(c.startswith("a candidate run: ") and "secure_noise" in c for c in caveats), caveats
PY
# The model card's guarantee is the sweep's, never the single run's (issue 52, finding 3).
python3 - "$tmp/sweep/selected/README.md" "$tmp/sweep/privacy.json" <<'PY' || fail "the model card's guarantee: $(cat "$tmp/sweep/selected/README.md")"
import json, sys
card, privacy = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
section = card[card.index("## Privacy guarantee"):card.index("## Loading it")]
assert "for the whole search" in section and "%.7g" % privacy["epsilon"] in section, section
assert "Caveats: none" not in card and "secure_noise" in section, section
PY
grep -q "A model selected by privdiff sweep" "$tmp/sweep/selected/README.md" || fail "the model card does not say it was selected"
# compare shows the candidates, the choice and the sweep's epsilon, marked private.
out=$("$privdiff" compare "$tmp/sweep" --out "$tmp/report" 2>&1) || fail "compare of the sweep failed: $out"
grep -q '\*\*selected\*\*' <<<"$out" && grep -q "^\*\*Private:\*\*" <<<"$out" && grep -q "The whole search: epsilon" <<<"$out" \
  && [ -s "$tmp/report/compare.md" ] || fail "compare's sweep section: $out"
# ... and a sweep alone still gets compare.csv (one row per candidate) and report.html (issue 52).
python3 - "$tmp/report" <<'PY' || fail "compare of a sweep alone: compare.csv / report.html"
import csv, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/compare.csv")))
assert rows and sum(int(r["selected"]) for r in rows) == 1 and all(r["parameters"].startswith("stage.0.lr=") for r in rows), rows
assert "<strong>selected</strong>" in open(f"{sys.argv[1]}/report.html").read()
PY
# Sampling it through a recipe works (post-processing); the note points at its metadata.
sed -n '/^\[model\]/,/^\[\[stage\]\]/p' "$tmp/tune.toml" | sed '$d' > "$tmp/sample.toml"
printf '[run]\ninit_from = "%s"\n[sampler]\ntype = "ddim"\nsteps = 2\n' "$tmp/sweep/selected" >> "$tmp/sample.toml"
out=$(cd "$tmp" && "$privdiff" sample "$tmp/sample.toml" -n 4 2>&1) || fail "sampling the sweep's release failed: $out"
grep -q "note: a privdiff export" <<<"$out" || fail "no note on the release's guarantee: $out"
# Fine-tuning the released model: its cost is not on a ledger init_from can carry, so it is refused.
tiny_dp_recipe "$fixtures" 9.0 'steps = 1' > "$tmp/again.toml"
out=$("$privdiff" run "$tmp/again.toml" --out "$tmp/again" --set "run.init_from=\"$tmp/sweep/selected\"" \
  --set run.init_from_disjoint=true 2>&1); code=$?
[ "$code" = 2 ] && grep -q "was released by privdiff sweep" <<<"$out" || fail "init_from the sweep's release: exit $code: $out"
# A score of the private training data is refused.
sed 's/^\[\[eval\]\]$/[[eval]]\nreference = "training"/' "$tmp/tune.toml" > "$tmp/train-score.toml"
out=$("$privdiff" sweep "$tmp/train-score.toml" --param stage.0.lr=1e-3 --score dpdm_classifiers.accuracy.logreg \
  --out "$tmp/train-score" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "selects by scores on held-out data only" <<<"$out" || fail "a training-data score: exit $code: $out"
# A count option the chosen distribution does not use is refused, not ignored (issue 52, finding 6).
out=$("$privdiff" sweep "$tmp/tune.toml" --param stage.0.lr=1e-3 --score dpdm_classifiers.accuracy.logreg --mu 9 \
  --out "$tmp/mu" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "sweep --mu (or \[sweep\] mu): --candidates truncated_negative_binomial does not use it" <<<"$out" \
  && [ ! -e "$tmp/mu" ] || fail "--mu with the negative binomial: exit $code: $out"
# A fixed K is offered with its honest cost and a warning.
out=$("$privdiff" sweep "$tmp/tune.toml" --param stage.0.lr=1e-3 --score dpdm_classifiers.accuracy.logreg \
  --candidates fixed --count 2 --out "$tmp/fixed" --stop-after-candidates 0 2>&1)
grep -q "warning: a fixed number of candidates" <<<"$out" || fail "no warning for a fixed K: $out"
[ ! -e "$tmp/fixed/candidates/0" ] && grep -q "sweep stopped after 0 candidates" <<<"$out" \
  || fail "--stop-after-candidates 0 ran a candidate: $out"
# A fixed K's cost is plain composition, and account says so (issue 50, finding 6f).
out=$("$privdiff" account "$tmp/fixed" --json 2>&1) && python3 -c "import json,sys; j=json.loads(sys.argv[1]); \
assert j['theorem'].startswith('composition') and not j['released'], j" "$out" || fail "account of a fixed K: $out"
# The planning's pre-flight warnings reach the user (delta not below 1/N).
out=$("$privdiff" sweep "$tmp/tune.toml" --param stage.0.lr=1e-3 --score dpdm_classifiers.accuracy.logreg --set privacy.delta=0.5 \
  --candidates fixed --count 1 --out "$tmp/delta" --stop-after-candidates 0 2>&1)
grep -q "warning: privacy.delta 0.5 is not below 1/N" <<<"$out" || fail "the delta warning was swallowed: $out"
# Without --seed, K and the draws come from the OS's secure randomness, and no seed is kept.
! grep -q "warning: --seed" <<<"$out" && python3 -c "import json,sys; assert json.load(open(sys.argv[1]))['seed'] is None" \
  "$tmp/fixed/sweep.json" || fail "an unseeded sweep kept a seed or warned: $out"
# kill -9 of the sweep mid-candidate: its candidate run stops too (a checkpoint, never an orphan still
# writing), and --resume finishes the same K candidates.
"$privdiff" sweep "$tmp/tune.toml" --param stage.0.lr=1e-3 --param stage.0.steps=400 --score dpdm_classifiers.accuracy.logreg \
  --candidates fixed --count 1 --out "$tmp/killed" > "$tmp/killed.log" 2>&1 &
sweep_pid=$!
for _ in $(seq 600); do [ -s "$tmp/killed/candidates/0/metrics.jsonl" ] && break; sleep 0.1; done
[ -s "$tmp/killed/candidates/0/metrics.jsonl" ] || fail "the candidate wrote no step within 60 s: $(cat "$tmp/killed.log")"
command -v pgrep > /dev/null || fail "this check needs pgrep (procps)"
kill -9 "$sweep_pid" 2> /dev/null
wait "$sweep_pid" 2> /dev/null
for _ in $(seq 300); do pgrep -f "$tmp/killed/candidates/0" > /dev/null || break; sleep 0.1; done
pgrep -f "$tmp/killed/candidates/0" > /dev/null && fail "the candidate run outlived the killed sweep by 30 s"
grep -q "^stopped after .* steps" "$tmp/killed.log" || fail "the candidate did not stop with a checkpoint: $(tail -3 "$tmp/killed.log")"
out=$(cd "$tmp" && "$privdiff" sweep --resume ./killed 2>&1) || fail "resume after kill -9 failed: $out"
! grep -rq "candidates/" "$tmp/killed/selected" "$tmp/killed/privacy.json" \
  || fail "a release resumed as ./DIR names candidates/: $(grep -r "candidates/" "$tmp/killed/selected" | head -3)"
python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert len(s['candidates']) == 1 and s['released'], s" \
  "$tmp/killed/sweep.json" || fail "the killed sweep's K or release: $out"
[ -s "$tmp/killed/selected/model.safetensors" ] || fail "the killed sweep released nothing: $out"

# The search in the recipe's [sweep] table: the command line's options and --param win over it;
# privdiff validate accepts the table and a bad range is reported at its line.
{ cat "$tmp/tune.toml"
  printf '[sweep]\nscore = "dpdm_classifiers.accuracy.logreg"\ncandidates = "poisson"\nmu = 3\n'
  printf '[sweep.params]\n"stage.0.lr" = [1e-4, 2e-3]\n"stage.0.steps" = "log:2:5:int"\n'; } > "$tmp/table.toml"
"$privdiff" validate "$tmp/table.toml" > /dev/null 2>&1 || fail "validate refused a [sweep] table: $("$privdiff" validate "$tmp/table.toml" 2>&1)"
out=$("$privdiff" sweep "$tmp/table.toml" --param stage.0.steps=3,4 --mu 2 --out "$tmp/table" --stop-after-candidates 0 2>&1)
python3 - "$tmp/table/sweep.json" <<'PY' || fail "the [sweep] table was not taken: $out"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["space"] == ["stage.0.lr=0.0001,0.002", "stage.0.steps=3,4"], s["space"]
assert s["score"] == "dpdm_classifiers.accuracy.logreg" and s["count"]["kind"] == "poisson" and s["count"]["mu"] == 2, s
PY
sed 's/"log:2:5:int"/"log:5:2"/' "$tmp/table.toml" > "$tmp/bad-table.toml"
out=$("$privdiff" sweep "$tmp/bad-table.toml" --out "$tmp/bad-table" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "bad-table.toml:[0-9]*:[0-9]*: sweep.params.stage.0.steps: .*LOW must be below HIGH" <<<"$out" \
  || fail "a bad [sweep.params] range: exit $code: $out"
sed 's/"log:2:5:int"/{ low = 2 }/' "$tmp/table.toml" > "$tmp/bad-table.toml"
out=$("$privdiff" validate "$tmp/bad-table.toml" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "bad-table.toml:[0-9]*:[0-9]*: sweep.params.stage.0.steps: expected a list of values" <<<"$out" \
  || fail "a [sweep.params] value of the wrong kind: exit $code: $out"

# The privacy audit's probes (issue 50). Finding 1: the recipe edited between a stop and --resume (steps
# 3 -> 6). The resume is refused; and where the plan's recipe hash is missing (a state of an older
# privdiff), the candidate that over-spends runs, and the release gate refuses the release with its cost.
cp "$tmp/tune.toml" "$tmp/edit.toml"
out=$("$privdiff" sweep "$tmp/edit.toml" --param stage.0.lr=1e-3 --score dpdm_classifiers.accuracy.logreg \
  --candidates fixed --count 2 --out "$tmp/edit" --stop-after-candidates 1 2>&1); code=$?
[ "$code" = 3 ] || fail "the edit probe's first candidate: exit $code: $out"
sed -i 's/^steps = 3$/steps = 6/' "$tmp/edit.toml"
grep -q "^steps = 6$" "$tmp/edit.toml" || fail "the probe did not edit the recipe"
out=$("$privdiff" sweep --resume "$tmp/edit" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "changed since the sweep was planned" <<<"$out" || fail "resume after a recipe edit: exit $code: $out"
[ -e "$tmp/edit/candidates/1" ] && fail "a candidate ran from the edited recipe"
python3 -c "import json,sys; p=sys.argv[1]; s=json.load(open(p)); s['recipe_sha256']=''; json.dump(s, open(p,'w'))" "$tmp/edit/sweep.json"
out=$("$privdiff" sweep --resume "$tmp/edit" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "release refused: candidate run(s) 1 spent more than the sweep planned" <<<"$out" \
  || fail "an over-spending candidate's release: exit $code: $out"
[ -e "$tmp/edit/privacy.json" ] || [ -e "$tmp/edit/selected" ] && fail "a refused release wrote privacy.json or selected/"
# Everything the sweep can check is checked before K is drawn (issue 52, finding 2): a listed value the
# recipe refuses, and a searched privacy target, are refused before any candidate spends.
out=$("$privdiff" sweep "$tmp/tune.toml" --param 'stage.0.steps=3,"many"' --score dpdm_classifiers.accuracy.logreg \
  --out "$tmp/many" 2>&1); code=$?
[ "$code" = 2 ] && grep -q 'stage.0.steps: the value "many" is refused before any candidate runs' <<<"$out" && [ ! -e "$tmp/many" ] \
  || fail "a bad listed value: exit $code: $out"
out=$("$privdiff" sweep "$tmp/tune.toml" --param privacy.epsilon=1,2 --score dpdm_classifiers.accuracy.logreg \
  --out "$tmp/eps" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "the privacy target is the whole search's" <<<"$out" && [ ! -e "$tmp/eps" ] \
  || fail "a searched privacy.epsilon: exit $code: $out"
# Finding 2: an evaluator that selects on the private training data is refused before anything runs.
{ tiny_dp_recipe "$fixtures" 5.0 'steps = 3'
  printf '[[eval]]\nsamples = 20\nevaluators = ["benchmark_classifiers"]\n[eval.benchmark_classifiers]\nselection = "real"\nepochs = 1\n'; } > "$tmp/real.toml"
out=$("$privdiff" sweep "$tmp/real.toml" --param stage.0.lr=1e-3 --score benchmark_classifiers.accuracy.mean \
  --out "$tmp/real" 2>&1); code=$?
[ "$code" = 2 ] && grep -q 'selection = "real" selects on the private training data' <<<"$out" && [ ! -e "$tmp/real" ] \
  || fail "a score fitted to the training data: exit $code: $out"
# privdiff validate checks a recipe's [sweep] as privdiff sweep does before it draws K (issue 52): every value
# the search can draw, the searched keys, the score; a valid one prints the per-candidate budget.
sweep_recipe() { cat "$tmp/tune.toml"; printf '[sweep]\nscore = "%s"\ncandidates = "poisson"\n[sweep.params]\n%s\n' "$1" "$2"; }
sweep_recipe dpdm_classifiers.accuracy.logreg '"stage.0.lr" = [1e-4, 1e-3]' > "$tmp/valid-sweep.toml"
out=$("$privdiff" validate "$tmp/valid-sweep.toml" 2>&1) || fail "validate of a valid [sweep]: $out"
grep -q "sweep: poisson (mu 4; E\[K\] 4), target epsilon 5 at delta 1e-05: each candidate within RDP" <<<"$out" \
  || fail "validate does not show the sweep's budget: $out"
for case in '"stage.0.lr" = "log:0:1e-2"|sweep.params.stage.0.lr: sweep parameter' \
            '"stage.0.lr" = "log:1e-2:1e-4"|LOW must be below HIGH' \
            '"stage.5.lr" = [1e-3]|index 5 is out of range' \
            '"privacy.epsilon" = [1.0, 2.0]|the privacy target is the whole search' \
            '"stage.0.steps" = [2, "many"]|the value "many" is refused before any candidate runs' \
            '"stage.0.lrr" = [1e-3]|unknown key .lrr.'; do
  sweep_recipe dpdm_classifiers.accuracy.logreg "${case%%|*}" > "$tmp/bad-sweep.toml"
  out=$("$privdiff" validate "$tmp/bad-sweep.toml" 2>&1); code=$?
  [ "$code" = 2 ] && grep -q -- "${case#*|}" <<<"$out" || fail "validate of [sweep.params] ${case%%|*}: exit $code: $out"
done
sweep_recipe dpdm_classifiers.accuracy.cnn '"stage.0.lr" = [1e-3]' > "$tmp/bad-sweep.toml"
out=$("$privdiff" validate "$tmp/bad-sweep.toml" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "dpdm_classifiers reports dpdm_classifiers.accuracy.logreg with the recipe" <<<"$out" \
  || fail "validate of a [sweep] score its evaluator does not report: exit $code: $out"
sweep_recipe accuracy '"stage.0.lr" = [1e-3]' > "$tmp/bad-sweep.toml"
out=$("$privdiff" validate "$tmp/bad-sweep.toml" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "name it EVALUATOR.METRIC" <<<"$out" || fail "validate of a bad [sweep] score: exit $code: $out"
echo "sweep: all checks passed"
