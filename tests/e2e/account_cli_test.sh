#!/usr/bin/env bash
# `privdiff account` as scripts use it: the JSON contract, the table, calibration, a run
# directory's ledger, and exit code 2 for every kind of bad argument.
# Usage: account_cli_test.sh PRIVDIFF FIXTURE_PLUGIN_DIR
set -u
privdiff=$1 fixture_plugins=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 checks=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
run() { out=$("$@" 2>&1); code=$?; checks=$((checks + 1)); }
# json_check 'python expression over j' : evaluated on the last output
json_check() {
  checks=$((checks + 1))
  python3 -c "import json,sys; j=json.loads(sys.stdin.read()); assert $1, 'assertion failed'" <<<"$out" 2>&1 \
    || fail "JSON check failed: $1"$'\n'"$out"
}

run "$privdiff" account --noise-multiplier 1.1 --sample-rate 0.01 --steps 10000 --delta 1e-5 --json
[ "$code" = 0 ] || fail "json query exit $code: $out"
json_check "{r['accountant'] for r in j['results']} == {'rdp', 'prv'}"
json_check "all(r['delta'] == 1e-5 for r in j['results'])"
json_check "[r for r in j['results'] if r['accountant']=='rdp'][0]['optimal_order'] > 1"
json_check "[r for r in j['results'] if r['accountant']=='prv'][0]['epsilon_lower'] <= [r for r in j['results'] if r['accountant']=='prv'][0]['epsilon_estimate'] <= [r for r in j['results'] if r['accountant']=='prv'][0]['epsilon']"
json_check "[r for r in j['results'] if r['accountant']=='prv'][0]['epsilon'] < [r for r in j['results'] if r['accountant']=='rdp'][0]['epsilon']"
json_check "j['skipped'][0]['accountant'] == 'analytic_gaussian'"

run "$privdiff" account --accountant rdp --accountant prv --sample-rate 0.01 --steps 3000 --epsilon 3 --delta 1e-5 --calibrate --json
[ "$code" = 0 ] || fail "calibrate exit $code: $out"
json_check "len(j['results']) == 2 and all('noise_multiplier' in r and r['epsilon'] <= 3 for r in j['results'])"

run "$privdiff" account --accountant analytic_gaussian --sample-rate 1 --steps 1 --epsilon 1 --delta 1e-5 --calibrate --json
json_check "abs(j['results'][0]['noise_multiplier'] - 3.7306316348159418) < 1e-8"

run "$privdiff" account --accountant rdp --conversion classic --noise-multiplier 1.1 --sample-rate 0.01 --steps 1000 --delta 1e-5 --json
classic=$out
run "$privdiff" account --accountant rdp --noise-multiplier 1.1 --sample-rate 0.01 --steps 1000 --delta 1e-5 --json
checks=$((checks + 1))
python3 -c "import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); assert a['results'][0]['epsilon'] > b['results'][0]['epsilon']" "$classic" "$out" \
  || fail "classic conversion should give a larger epsilon"

run "$privdiff" account --history 1.1:0.01:5000 --history 2:0.05:1000 --epsilon 2 --json
json_check "all(0 < r['delta'] < 1 and r['epsilon'] == 2 for r in j['results'])"

# Calibration after earlier events (DP-FETA: 5 central-image queries at sigma 5, q 0.1, then DP-SGD on
# MNIST/F-MNIST, q = 4096/60000, 2197 steps, epsilon 1): the history costs noise, never the target.
run "$privdiff" account --accountant rdp --sample-rate 0.0682666667 --steps 2197 --epsilon 1 --delta 1e-5 --calibrate --json
alone=$out
run "$privdiff" account --accountant rdp --history 5:0.1:5 --sample-rate 0.0682666667 --steps 2197 --epsilon 1 --delta 1e-5 --calibrate --json
[ "$code" = 0 ] || fail "calibrate after a history: exit $code: $out"
checks=$((checks + 1))
python3 -c "
import json, sys
a = json.loads(sys.argv[1])['results'][0]; b = json.loads(sys.argv[2])['results'][0]
assert b['noise_multiplier'] > a['noise_multiplier'], (a, b)
assert b['epsilon'] <= 1 and b['epsilon'] > 0.999, b
assert 12.5 < a['noise_multiplier'] < 13.5 and 12.8 < b['noise_multiplier'] < 13.8, (a, b)  # DP-FETA Table V: 12.8 -> 13.2
" "$alone" "$out" || fail "history calibration: $alone / $out"
run "$privdiff" account --accountant rdp --history 5:0.1:5 --sample-rate 0.0682666667 --steps 2197 --epsilon 1 --delta 1e-5 --calibrate
grep -q "^after the history: " <<<"$out" || fail "no history line: $out"

run "$privdiff" account --noise-multiplier 1.1 --sample-rate 0.01 --steps 10000 --delta 1e-5
[ "$code" = 0 ] || fail "table exit $code"
grep -q "^rdp " <<<"$out" || fail "table lacks rdp: $out"

# A run directory's ledger.
mkdir -p "$tmp/run"
cat > "$tmp/run/ledger.json" <<'JSON'
{"format": "privdiff-ledger", "version": 1, "entries": [
  {"type": "self_composed", "count": 10000, "event": {"type": "poisson_sampled", "sampling_rate": 0.01,
   "event": {"type": "gaussian", "noise_multiplier": 1.1}}}]}
JSON
printf '[privacy]\ndelta = 1e-05\n' > "$tmp/run/recipe.toml"
run "$privdiff" account "$tmp/run" --accountant rdp --json
[ "$code" = 0 ] || fail "account RUN_DIR exit $code: $out"
json_check "abs(j['results'][0]['epsilon'] - 5.631992368681539) < 1e-9 and j['results'][0]['delta'] == 1e-5"

# Bad arguments: exit 2 with a message, never a crash.
bad() {
  run "$privdiff" account "$@"
  [ "$code" = 2 ] || fail "expected exit 2 for: $* (got $code): $out"
  grep -qE "terminate called|Aborted|Segmentation" <<<"$out" && fail "crash for: $*"
}
bad --noise-multiplier -1 --sample-rate 0.1 --steps 10 --delta 1e-5
bad --noise-multiplier 1 --sample-rate 0 --steps 10 --delta 1e-5
bad --noise-multiplier 1 --sample-rate 1.5 --steps 10 --delta 1e-5
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 0
bad --noise-multiplier 1 --sample-rate 0.1 --steps 0 --delta 1e-5
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1e-5 --epsilon 1
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1e-5 --accountant analytic_gaussian
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1e-5 --accountant rpd
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1e-5 --conversion fancy
bad --history 1:x:3 --delta 1e-5
bad --history 1:0.1 --delta 1e-5
bad --sample-rate 0.1 --steps 10 --delta 1e-5 --calibrate
bad --noise-multiplier 1 --sample-rate 0.1 --steps 10 --epsilon 1 --delta 1e-5 --calibrate
bad --history 5:0.1:5 --epsilon 1 --delta 1e-5 --calibrate
bad --history 5:0.1:5 --noise-multiplier 1 --sample-rate 0.1 --steps 10 --delta 1e-5
# A target no noise can meet: the question is wrong (exit 2, said so), not the work.
bad --sample-rate 0.01 --steps 1000 --epsilon 1e-9 --delta 1e-5 --calibrate --accountant rdp
grep -q "no noise multiplier up to" <<<"$out" || fail "an unreachable target not said: $out"
bad --sample-rate 0.01 --steps 1000 --epsilon 1e-9 --delta 1e-5 --calibrate --accountant prv
grep -q "prv: calibration: no noise multiplier up to 10000" <<<"$out" || fail "prv, an unreachable target: $out"
# A target where a guarantee promises nothing: refused, not searched for (PRV's grid grows with epsilon).
bad --sample-rate 0.01 --steps 1000 --epsilon 1e6 --delta 1e-5 --calibrate --accountant prv
grep -q "target epsilon 1e+06 is above 1000, where a guarantee promises nothing" <<<"$out" || fail "epsilon 1e6: $out"
# ... and with no --accountant (every installed one tried): exit 2, each one's reason in words, no JSON.
bad --sample-rate 0.01 --steps 1000 --epsilon 1e6 --delta 1e-5 --calibrate
grep -q "no accountant could answer: .*rdp: calibration: target epsilon 1e+06 is above 1000" <<<"$out" &&
  ! grep -q '"reason"' <<<"$out" || fail "epsilon 1e6, every accountant: $out"
bad "$tmp/nonexistent"
bad --noise-multiplier x --sample-rate 0.1 --steps 10 --delta 1e-5

# --epsilon shows the accountant's warnings too (issue 51: Accountant::delta returns a bare number).
run "$privdiff" --plugin-path "$fixture_plugins" account --accountant fixture_approximate_accountant \
  --noise-multiplier 2 --sample-rate 1 --steps 1 --epsilon 3
[ "$code" = 0 ] && grep -q "warning: fixture_approximate_accountant is an approximation, not an upper bound" <<<"$out" \
  || fail "--epsilon: no warning from an approximate accountant: $out"

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
