#!/usr/bin/env bash
# privdiff check-mechanism end to end: the shipped DP-SGD mechanisms pass (exit 0); each planted-bug
# plugin (tests/fixtures/plugins/planted_mechanisms.cpp) fails (exit 1) with the check that finds it
# named; privdiff audit runs the plugin's own code (a plugin that forgets to clip fails it); a stage
# that releases statistics but reports none fails; recipes without a private stage are refused (exit 2).
# Usage: check_mechanism_test.sh PRIVDIFF PLANTED_PLUGIN_DIR
set -u
privdiff=$1 planted=$2
repo=$(cd "$(dirname "$0")/../.." && pwd)
source "$(dirname "$0")/common.sh"
passed=0
recipe() {  # recipe FILE MECHANISM [STAGE_LINE...]
  local file=$1 mechanism=$2
  shift 2
  {
    printf '[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\ndataset = "fashion-mnist"\n%s\n' "$tiny_model"
    printf '[[stage]]\nname = "train"\nmechanism = "%s"\nbatch_size = 64\nsteps = 10\n' "$mechanism"
    printf '%s\n' "$@"
  } > "$file"
}
check() { "$privdiff" --plugin-path "$planted" check-mechanism "$@" --canaries 1000 2>&1; }

# dpsgd also on the recipe's model (the slow part: dpdm's K = 32 rows per example there, stand-in only).
for shipped in dpsgd dpdm; do
  recipe "$tmp/$shipped.toml" "$shipped" 'physical_batch_size = 16'
  out=$(check "$tmp/$shipped.toml" $([ "$shipped" = dpdm ] && echo --stand-in-only)); rc=$?
  [ "$rc" = 0 ] || fail "$shipped: rc $rc: $out"
  if [ "$shipped" = dpsgd ]; then
    for line in "and on the recipe's model (a, b)" "(b) noise, the recipe's model: passed"; do
      grep -qF "$line" <<<"$out" || fail "$shipped: not on the recipe's model: no '$line': $out"
    done
  fi
  for line in "(a) record replay: passed" "(b) noise: passed" "(c) gradient canaries: passed" "mechanism check passed"; do
    grep -qF "$line" <<<"$out" || fail "$shipped: no '$line': $out"
  done
  passed=$((passed + 1))
done

# Each planted bug, and the check that must find it.
while read -r id finds; do
  recipe "$tmp/$id.toml" "$id"
  out=$(check "$tmp/$id.toml" --stand-in-only); rc=$?
  [ "$rc" = 1 ] || fail "$id: rc $rc (expected 1): $out"
  grep -qF "MECHANISM CHECK FAILED" <<<"$out" || fail "$id: no verdict: $out"
  grep -qF "$finds" <<<"$out" || fail "$id: '$finds' not reported: $out"
  passed=$((passed + 1))
done <<'CASES'
planted_no_clipping (a) record replay: FAILED
planted_twice_sensitivity (a) record replay: FAILED
planted_noise_per_chunk (a) record replay: FAILED
planted_half_noise (b) noise: FAILED
planted_data_seeded_noise (b) noise: FAILED
planted_data_dependent_chunks an internal count or decision depends on x's content
planted_no_noise_on_norms VIOLATION: tensor norm.weight (4 values) is the same in every replay: it receives no noise
planted_noise_reused the second step's noise repeats the first's
planted_mean_norm_clipping x reaches a later step through something the mechanism did not release with noise
planted_raw_count_clipping x reaches a later step through something the mechanism did not release with noise
planted_unaccounted_count_clipping x reaches a later step through something the mechanism did not release with noise
planted_two_events_per_step epsilon is under-counted
planted_noiseless_subspace a direction of the parameter space gets almost no noise
CASES
grep -q "more than the declared sensitivity" <<<"$(check "$tmp/planted_twice_sensitivity.toml" --stand-in-only)" ||
  fail "2C: the distance is not reported"
# On the recipe's model, (b) names the UNet's norm tensors that get no noise.
out=$(check "$tmp/planted_no_noise_on_norms.toml" | sed -n "/(b) noise, the recipe's model: FAILED/,/^(c)/p")
grep -q "VIOLATION: tensor [a-z0-9_.]*norm[a-z0-9_.]* ([0-9]* values) is the same in every replay" <<<"$out" ||
  fail "no noise on norms: (b) on the recipe's model does not name a norm tensor: $out"
passed=$((passed + 1))
# Noise per chunk is too much noise (private, but costs utility: a note) whose amount follows the number of
# chunks, and so the realised batch (the replay: x's presence changes the noise drawn).
grep -q "note: the update: the noise's std is 1.9.* more noise than the ledger states is private" <<<"$(check "$tmp/planted_noise_per_chunk.toml" --stand-in-only)" ||
  fail "noise per chunk: the excess noise is not noted"

# A correct GEP (fixture_gep) reads public data, on the stand-in, the recipe's model and the canary model,
# and states its noise basis: it passes (a), (b) on both models and (c); privdiff audit runs it too.
{
  printf '[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data.private]\ndataset = "fashion-mnist"\n'
  printf '[data.public]\ndataset = "glyphs"\ncharacters = "AB"\nper_class = 4\n%s\n' "$tiny_model"
  printf '[[stage]]\nname = "train"\nmechanism = "fixture_gep"\ndata = "private"\nbatch_size = 64\nsteps = 10\n'
} > "$tmp/gep.toml"
out=$(check "$tmp/gep.toml"); rc=$?
[ "$rc" = 0 ] || fail "fixture_gep: rc $rc: $out"
for line in "with public data 'public'" "3 directions of 'embedding'" "(b) noise, the recipe's model: passed" \
    "(c) gradient canaries: passed" "mechanism check passed"; do
  grep -qF "$line" <<<"$out" || fail "fixture_gep: no '$line': $out"
done
out=$("$privdiff" --plugin-path "$planted" audit "$tmp/gep.toml" --canaries 1000 --fillers 300 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "public data 'public' on the fillers' coordinates" <<<"$out" || fail "audit of fixture_gep: rc $rc: $out"
passed=$((passed + 1))

# privdiff audit runs the plugin's code: the unclipped plugin's canaries (norm 8 C) stand out.
out=$("$privdiff" --plugin-path "$planted" audit "$tmp/planted_no_clipping.toml" --canaries 2000 --fillers 300 --canary-norm 8 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "AUDIT FAILED" <<<"$out" || fail "audit of the unclipped plugin: rc $rc: $out"
grep -q "planted_no_clipping from .*libfixture_planted_mechanisms.so, its own code" <<<"$out" || fail "audit names no plugin: $out"
passed=$((passed + 1))

# A private stage without DP-SGD's keys is replayed as one that releases statistics (PE's and PrivImage's:
# e2e.private_evolution_cli). central_images reports each query's noisy sums: the quickstart's passes,
# with x in every subsample. A plugin that releases without reporting fails: there is nothing to replay.
out=$(check "$repo/examples/recipes/quickstart.toml" --stage central); rc=$?
[ "$rc" = 0 ] && grep -q "sampling_rate 0.1 set to 1 for the replay" <<<"$out" \
  && grep -q "x = every pixel +1, noisy class sums, query 5 " <<<"$out" && grep -q "^PASSED" <<<"$out" \
  || fail "central_images (the quickstart's): rc $rc: $out"
{
  printf '[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\ndataset = "fashion-mnist"\n%s\nnum_classes = 2\n' "$tiny_model"
  printf '[[stage]]\nname = "sums"\nmechanism = "planted_unreported_release"\n'
} > "$tmp/unreported.toml"
out=$(check "$tmp/unreported.toml"); rc=$?
[ "$rc" = 1 ] && grep -q "reported no released statistic" <<<"$out" && grep -q "^FAILED" <<<"$out" \
  || fail "planted_unreported_release: rc $rc: $out"
passed=$((passed + 2))

# Refusals: a non-private stage.
recipe "$tmp/public.toml" nonprivate
sed -i 's/dataset = "fashion-mnist"/dataset = "fashion-mnist"\npublic = true/' "$tmp/public.toml"
out=$(check "$tmp/public.toml"); rc=$?
[ "$rc" = 2 ] && grep -q "no private stage to check" <<<"$out" || fail "nonprivate: rc $rc: $out"
out=$(check "$tmp/public.toml" --stage train); rc=$?
[ "$rc" = 2 ] && grep -q "stage 'train' (nonprivate) is not private" <<<"$out" || fail "--stage train: rc $rc: $out"
passed=$((passed + 1))
echo "$passed passed, 0 failed"
