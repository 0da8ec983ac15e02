#!/usr/bin/env bash
# Code is part of a plan (issue 67, item 3): no plugin shadows another library's component id — two
# libraries registering `dpsgd` make it ambiguous, refused naming both, until the recipe's [plugins] use
# names one (and the other is said on stderr); a run and a sweep record each component's library (path,
# SHA-256), and a resume with another library for any component is refused (exit 2) naming it, the recorded
# library and the one found now. The same library resumes; a record-less (older) sweep resumes with a warning.
# Usage: plugin_code_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
tiny_dp_recipe "$fixtures" 5.0 'steps = 3' > "$tmp/r.toml"
lib=$("$privdiff" plugins show dpsgd | sed -n 's/^  plugin: .*, \(\/.*\.so\)$/\1/p')
[ -f "$lib" ] || fail "cannot find the library of dpsgd: '$lib'"
# A plugin registering the built-in's ids with other code (here: the built-in with one byte more).
mkdir -p "$tmp/shadow"
cp "$lib" "$tmp/shadow/libdpsgd_half.so" && printf '\0' >> "$tmp/shadow/libdpsgd_half.so"
shadow="$tmp/shadow/libdpsgd_half.so"

# 1. The shadowing plugin makes dpsgd ambiguous: refused (exit 2) naming both, said on stderr; no run.
out=$("$privdiff" --plugin-path "$tmp/shadow" validate "$tmp/r.toml" 2> "$tmp/err"); code=$?
both="mechanism 'dpsgd' is provided by 2 libraries, $shadow and $lib: name the one to use in the recipe's \[plugins\] use"
[ "$code" = 2 ] && grep -q "stage\[0\].mechanism: $both" "$tmp/err" && grep -q "^warning: $both" "$tmp/err" \
  || fail "a shadowing plugin was not refused as ambiguous: exit $code: $out $(cat "$tmp/err")"
"$privdiff" --plugin-path "$tmp/shadow" run "$tmp/r.toml" --out "$tmp/shadowed" > /dev/null 2>&1; code=$?
[ "$code" = 2 ] && [ ! -e "$tmp/shadowed" ] || fail "a run with a shadowing plugin: exit $code"

# 2. Named in [plugins] use, it is used; the built-in's dpsgd is said to be unused, one line.
{ cat "$tmp/r.toml"; printf '[plugins]\nuse = ["shadow/libdpsgd_half.so"]\n'; } > "$tmp/mine.toml"
"$privdiff" validate "$tmp/mine.toml" > /dev/null 2> "$tmp/err" || fail "validate with [plugins] use: $(cat "$tmp/err")"
[ "$(grep -c "^plugins: mechanism 'dpsgd' of $lib is not used: the recipe's \[plugins\] use names $shadow$" "$tmp/err")" = 1 ] \
  || fail "the unused built-in was not said once on stderr: $(cat "$tmp/err")"

# 3. A run resumes only with the library it ran: the same path with other bytes is refused.
"$privdiff" run "$tmp/mine.toml" --out "$tmp/run" --stop-after-steps 1 > "$tmp/log" 2>&1; code=$?
[ "$code" = 3 ] || fail "the run did not stop after a step: exit $code: $(cat "$tmp/log")"
before=$(sha256sum "$shadow" | cut -d' ' -f1)
printf '\0' >> "$shadow"
after=$(sha256sum "$shadow" | cut -d' ' -f1)
out=$("$privdiff" run --resume "$tmp/run" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "cannot resume $tmp/run: mechanism 'dpsgd' ran from $shadow (sha256 $before) and would now run from $shadow (sha256 $after); a resumed run must run the code it was started with" <<<"$out" \
  || fail "a resume with a changed mechanism library: exit $code: $out"
[ ! -e "$tmp/run/summary.json" ] || fail "the refused resume finished the run"
truncate -s -1 "$shadow"
out=$("$privdiff" run --resume "$tmp/run" 2>&1) || fail "a resume with the same library: $out"
python3 - "$tmp/run/summary.json" "$shadow" "$before" <<'PY' || fail "summary.json does not record the mechanism's library"
import json, sys
components = json.load(open(sys.argv[1]))["provenance"]["components"]
dpsgd = next(c for c in components if c["id"] == "dpsgd")
assert dpsgd["library"] == sys.argv[2] and dpsgd["sha256"] == sys.argv[3], dpsgd
assert all(len(c["sha256"]) == 64 for c in components), components
PY

# 4. The audit's case: a run stopped with the built-in, resumed with a shadowing plugin on the path.
"$privdiff" run "$tmp/r.toml" --out "$tmp/run2" --stop-after-steps 1 > /dev/null 2>&1
out=$("$privdiff" --plugin-path "$tmp/shadow" run --resume "$tmp/run2" 2>&1); code=$?
[ "$code" = 2 ] && grep -q "$both" <<<"$out" || fail "a resume with a shadowing plugin: exit $code: $out"

# 5. A sweep records the libraries in its plan; --resume refuses another library for any component.
{ cat "$tmp/mine.toml"; printf '[[eval]]\nsamples = 20\nepochs = 1\n[eval.dpdm_classifiers]\nclassifiers = ["logreg"]\n'; } > "$tmp/tune.toml"
sweep=(sweep "$tmp/tune.toml" --param stage.0.lr=1e-4,1e-3 --score dpdm_classifiers.accuracy.logreg --seed 4)
out=$("$privdiff" "${sweep[@]}" --out "$tmp/sweep" --stop-after-candidates 0 2>&1); code=$?
[ "$code" = 3 ] || fail "the sweep did not stop before its first candidate: exit $code: $out"
python3 - "$tmp/sweep/sweep.json" "$shadow" "$before" <<'PY' || fail "sweep.json does not record the libraries"
import json, sys
libraries = json.load(open(sys.argv[1]))["libraries"]
assert {"kind": "mechanism", "id": "dpsgd", "library": sys.argv[2], "sha256": sys.argv[3]} in libraries, libraries
assert {c["kind"] for c in libraries} >= {"model", "mechanism", "sampler", "accountant", "dataset", "evaluator"}, libraries
PY
printf '\0' >> "$shadow"
out=$("$privdiff" sweep --resume "$tmp/sweep" --stop-after-candidates 0 2>&1); code=$?
[ "$code" = 2 ] && grep -q "sweep --resume: mechanism 'dpsgd' ran from $shadow (sha256 $before) and would now run from $shadow (sha256 $after); the sweep's budget and its candidates' noise were calibrated" <<<"$out" \
  || fail "a sweep resumed with a changed mechanism library: exit $code: $out"
truncate -s -1 "$shadow"
out=$("$privdiff" sweep --resume "$tmp/sweep" --stop-after-candidates 0 2>&1); code=$?
[ "$code" = 3 ] || fail "a sweep resumed with the same library: exit $code: $out"
# A sweep planned with the built-in, resumed with a shadowing plugin on the path (the audit's case).
sed '/^\[plugins\]/,/^use/d' "$tmp/tune.toml" > "$tmp/tune2.toml"
"$privdiff" sweep "$tmp/tune2.toml" "${sweep[@]:2}" --out "$tmp/sweep2" --stop-after-candidates 0 > /dev/null 2>&1
out=$("$privdiff" --plugin-path "$tmp/shadow" sweep --resume "$tmp/sweep2" --stop-after-candidates 0 2>&1); code=$?
[ "$code" = 2 ] && grep -q "$both" <<<"$out" && ! grep -q "candidate 1 of" <<<"$out" \
  || fail "a sweep resumed with a shadowing plugin: exit $code: $out"
# A state of an older privdiff (no record): resumed, with a warning.
python3 - "$tmp/sweep2/sweep.json" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1])); del s["libraries"]
os.chmod(sys.argv[1], 0o600); open(sys.argv[1], "w").write(json.dumps(s))
PY
out=$("$privdiff" sweep --resume "$tmp/sweep2" --stop-after-candidates 0 2>&1); code=$?
[ "$code" = 3 ] && grep -q "warning: the sweep was planned by an older privdiff that did not record its components' libraries" <<<"$out" \
  || fail "an older sweep's resume: exit $code: $out"
echo "1 passed, 0 failed"
