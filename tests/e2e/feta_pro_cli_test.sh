#!/usr/bin/env bash
# FETA-Pro end to end and tiny (issue #70): an rff_embedding stage releases one noisy random-feature
# class embedding and the images of a generator fitted to it; DP-FETA's central images follow, two
# non-private warm-ups (the authors' default order, time_freq: central images first) and dpdm with its
# noise calibrated after both releases. Checks the released files, the ledger's one Gaussian event, the
# epsilon of the release alone against the analytic Gaussian mechanism's closed form computed here,
# check-mechanism's replay of the release, and the refusal (before the run) of an unconditional model.
# Usage: feta_pro_cli_test.sh PRIVDIFF
set -u
privdiff=$1
source "$(dirname "$0")/common.sh"
random_idx_data "$tmp/data" 3
freq_stage='[[stage]]
name = "freq"
mechanism = "rff_embedding"
features = 200
noise_multiplier = 7.4
images_per_class = 3
latent_dim = 8
generator_channels = 8
generator_steps = 20
generator_batch_size = 20
secure_noise = false'
header() {  # header EPSILON ACCOUNTANT
  printf '[run]\nseed = 4\n[privacy]\nepsilon = %s\ndelta = 1e-5\naccountant = "%s"\n[data]\npath = "%s"\n%s\nnum_classes = 10\n' \
    "$1" "$2" "$tmp/data" "$tiny_model"
  printf '[sampler]\ntype = "edm_heun"\nsteps = 2\n'
}
{
  header 6.0 rdp
  cat <<TOML
[[stage]]
name = "central"
mechanism = "central_images"
queries = 2
sampling_rate = 0.5
noise_multiplier = 5.0
$freq_stage
[[stage]]
name = "warmup_time"
mechanism = "nonprivate"
data = "central"
batch_size = 20
steps = 2
[[stage]]
name = "warmup_freq"
mechanism = "nonprivate"
data = "freq"
batch_size = 10
steps = 2
[[stage]]
name = "train"
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 2
TOML
} > "$tmp/fetapro.toml"
out=$("$privdiff" run "$tmp/fetapro.toml" --out "$tmp/run" 2>&1) || fail "run: $out"
grep -q "released 30 images as data 'freq'" <<<"$out" || fail "no release line: $out"
grep -q "generator step 20/20" <<<"$out" || fail "no generator progress: $out"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz train-grid.png; do
  [ -s "$tmp/run/released-freq/$f" ] || fail "missing released-freq/$f"
done
python3 - "$tmp/run" <<'PY' || fail "ledger"
import json, sys
run = sys.argv[1]
ledger = json.load(open(f"{run}/ledger.json"))
plain = [e for e in ledger["entries"] if e["type"] == "gaussian"]
assert len(plain) == 1 and plain[0]["noise_multiplier"] == 7.4, ledger["entries"]  # the release, once, q = 1
summary = json.load(open(f"{run}/summary.json"))
freq = [s for s in summary["stages"] if s["name"] == "freq"][0]
assert freq["private"] and freq["noise_multiplier"] == 7.4, freq
assert [s for s in summary["stages"] if s["name"] == "warmup_freq"][0]["data"] == "freq"
rdp = [r for r in summary["privacy"] if r["accountant"] == "rdp"][0]
assert rdp["epsilon"] <= 6.0 + 1e-9, rdp
PY
passed=1

# The release alone under the analytic Gaussian accountant: epsilon of one Gaussian mechanism with
# sensitivity 1 and sigma 7.4 at delta 1e-5, from Balle & Wang's exact delta(epsilon), bisected here.
{ header 100 analytic_gaussian; echo "$freq_stage"; } > "$tmp/alone.toml"
out=$("$privdiff" run "$tmp/alone.toml" --out "$tmp/alone" 2>&1) || fail "release alone: $out"
python3 - "$tmp/alone/summary.json" <<'PY' || fail "epsilon of the release"
import json, math, sys
phi = lambda x: 0.5 * math.erfc(-x / math.sqrt(2))
sigma, delta = 7.4, 1e-5
d = lambda e: phi(1 / (2 * sigma) - e * sigma) - math.exp(e) * phi(-1 / (2 * sigma) - e * sigma)
lo, hi = 0.0, 10.0
for _ in range(200):
    mid = (lo + hi) / 2
    lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
got = [r for r in json.load(open(sys.argv[1]))["privacy"] if r["accountant"] == "analytic_gaussian"][0]["epsilon"]
assert abs(got - hi) <= 1e-6 * hi + 1e-9, (got, hi)
print(f"epsilon of the release: {got:.6f} (closed form {hi:.6f})")
PY
passed=2

out=$("$privdiff" check-mechanism "$tmp/fetapro.toml" --stage freq 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "generator_steps and images_per_class set to 1 for the replay" <<<"$out" \
  && grep -q "noisy random-feature class sums" <<<"$out" && grep -q "^PASSED" <<<"$out" \
  || fail "check-mechanism of the release: rc $rc: $out"
passed=3

sed 's/^num_classes = 10$/num_classes = 0/' "$tmp/alone.toml" > "$tmp/unconditional.toml"
out=$("$privdiff" run "$tmp/unconditional.toml" --out "$tmp/unconditional" 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "stage\[0\] 'freq' releases images per class: the model must be class-conditional" <<<"$out" \
  || fail "unconditional: rc $rc: $out"
passed=4
echo "$passed passed, 0 failed"
