#!/usr/bin/env bash
# DP-FETA end to end and tiny: a central_images stage releases noisy per-class images (mean, then
# mode), a non-private warm-up trains on them with RandAugment, and dpdm's noise is calibrated with
# the central queries composed. Checks the released files, the ledger, the calibration and the
# refusals (a private stage on released data; data naming a stage that releases nothing); that
# neighbouring datasets release the same, and that the ledger is on disk before any release.
# Usage: dpfeta_cli_test.sh PRIVDIFF FIXTURE_DIR
set -u
privdiff=$1 fixtures=$2
source "$(dirname "$0")/common.sh"
# 40 random 28 x 28 images, four of each class (the central images need every class present).
random_idx_data "$tmp/data" 1
recipe() {  # recipe FILE STATISTIC WITH_CENTRAL
  {
    cat <<TOML
[run]
seed = 2
[privacy]
epsilon = 4.0
delta = 1e-5
[data]
path = "$tmp/data"
$tiny_model
[sampler]
type = "edm_heun"
steps = 2
TOML
    if [ "$3" = 1 ]; then
      cat <<TOML
[[stage]]
name = "central"
mechanism = "central_images"
statistic = "$2"
queries = 2
sampling_rate = 0.5
noise_multiplier = 5.0
[[stage]]
name = "warmup"
mechanism = "nonprivate"
data = "central"
batch_size = 20
steps = 3
augment_ops = 2
ema = 0.5
TOML
    fi
    cat <<TOML
[[stage]]
name = "train"
mechanism = "dpdm"
noise_multiplicity = 2
batch_size = 4
steps = 3
ema = 0.5
TOML
  } > "$1"
}
sigma_of() { python3 -c 'import json,sys; print([s for s in json.load(open(sys.argv[1]))["stages"] if s["name"] == "train"][0]["noise_multiplier"])' "$1/summary.json"; }

recipe "$tmp/plain.toml" mean 0
"$privdiff" run "$tmp/plain.toml" --out "$tmp/plain" > /dev/null 2>&1 || fail "plain run"
for statistic in mean mode; do
  recipe "$tmp/$statistic.toml" $statistic 1
  out=$("$privdiff" run "$tmp/$statistic.toml" --out "$tmp/$statistic" 2>&1) || fail "$statistic run: $out"
  echo "$out" | head -12
  grep -q "released 20 images as data 'central'" <<<"$out" || fail "no release line: $out"
  for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz train-grid.png; do
    [ -s "$tmp/$statistic/released-central/$f" ] || fail "missing released-central/$f"
  done
  # One class per row, as samples.png: 10 rows (the classes) of 2 (the queries), not 2 rows of 10.
  python3 - "$tmp/$statistic/released-central/train-grid.png" <<'PY' || fail "$statistic: train-grid.png is not a class per row"
import struct, sys
width, height = struct.unpack(">II", open(sys.argv[1], "rb").read()[16:24])
assert (width, height) == (2 * 28 + 2, 10 * 28 + 9 * 2), (width, height)
PY
  python3 - "$tmp/$statistic" "$(sigma_of "$tmp/plain")" "$(sigma_of "$tmp/$statistic")" <<'PY' || fail "$statistic ledger/calibration"
import json, sys
run, plain, feta = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
ledger = json.load(open(f"{run}/ledger.json"))
def gaussians(e):  # (sampling_rate, noise_multiplier, count) of each ledger entry
    count = e.get("count", 1)
    e = e["event"] if e["type"] == "self_composed" else e
    return (e["sampling_rate"], e["event"]["noise_multiplier"], count)
central = [g for g in map(gaussians, ledger["entries"]) if g[1] == 5.0]
assert sum(g[2] for g in central) == 2 and all(g[0] == 0.5 for g in central), ledger  # two queries
assert sum(g[2] for g in map(gaussians, ledger["entries"]) if g[1] != 5.0) == 3, ledger  # three DP-SGD steps
summary = json.load(open(f"{run}/summary.json"))
rdp = [r for r in summary["privacy"] if r["accountant"] == "rdp"][0]
assert rdp["epsilon"] <= 4.0 + 1e-9, rdp
assert feta > plain, (feta, plain)  # the central queries leave less budget for DP-SGD
warm = [s for s in summary["stages"] if s["name"] == "warmup"][0]
assert not warm["private"] and warm["data"] == "central", warm
central_stage = [s for s in summary["stages"] if s["name"] == "central"][0]
assert central_stage["private"] and central_stage["noise_multiplier"] == 5.0, central_stage
PY
done
out=$("$privdiff" account "$tmp/mean" 2>&1) || fail "account of a DP-FETA run: $out"
# Stopped right after the release and resumed: the released images are read back from the run.
"$privdiff" run "$tmp/mean.toml" --out "$tmp/stopped" --stop-after-steps 1 > /dev/null 2>&1; code=$?
[ $code -eq 3 ] || fail "stop after the release: exit $code"
out=$("$privdiff" run --resume "$tmp/stopped" 2>&1) || fail "resume after the release: $out"
grep -q "stage 'warmup' (nonprivate, data 'central': data released by stage 'central'" <<<"$out" || fail "resumed warm-up: $out"
grep -q "released 20 images" <<<"$out" && fail "the resumed run released again: $out"

# Refusals: training privately on released data; data naming a stage that releases nothing.
recipe "$tmp/bad1.toml" mean 1
printf '[[stage]]\nname = "again"\nmechanism = "dpdm"\ndata = "central"\nbatch_size = 4\nsteps = 1\n' >> "$tmp/bad1.toml"
out=$("$privdiff" run "$tmp/bad1.toml" --out "$tmp/bad1" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "trains privately on 'central', data released by an earlier stage" <<<"$out" || fail "bad1: exit $code: $out"
recipe "$tmp/bad2.toml" mean 1
printf '[[stage]]\nname = "again"\nmechanism = "nonprivate"\ndata = "warmup"\nbatch_size = 4\nsteps = 1\n' >> "$tmp/bad2.toml"
out=$("$privdiff" run "$tmp/bad2.toml" --out "$tmp/bad2" 2>&1); code=$?
[ $code -eq 2 ] && grep -q "names stage 'warmup', whose mechanism 'nonprivate' releases no data" <<<"$out" || fail "bad2: exit $code: $out"
# Neighbouring datasets (issue 25): one more record, of a label no other record has (the model has
# 11 classes), releases as many images of the same shape as without it (class 10 empty: noise, no
# refusal), and the run directories hold the same files.
python3 - "$tmp/data" "$tmp/plus" <<'PY'
import gzip, os, shutil, struct, sys
src, dst = sys.argv[1:3]; shutil.copytree(src, dst)
images = gzip.open(f"{src}/train-images-idx3-ubyte.gz").read()[16:]
labels = gzip.open(f"{src}/train-labels-idx1-ubyte.gz").read()[8:]
n = len(labels) + 1
with gzip.open(f"{dst}/train-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, n, 28, 28) + images + bytes(i * 7 % 256 for i in range(784)))
with gzip.open(f"{dst}/train-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, n) + labels + bytes([10]))
PY
for data in data plus; do
  recipe "$tmp/n-$data.toml" mean 1
  sed -i -e "s|^path = .*|path = \"$tmp/$data\"|" -e 's/^\[model\]/[model]\nnum_classes = 11/' "$tmp/n-$data.toml"
  out=$("$privdiff" run "$tmp/n-$data.toml" --out "$tmp/n-$data" 2>&1) || fail "neighbour $data: $out"
  grep -q "released 22 images as data 'central'" <<<"$out" || fail "neighbour $data released other than 2 x 11: $out"
  (cd "$tmp/n-$data" && find . -type f | sort) > "$tmp/n-$data.files"
done
cmp -s "$tmp/n-data.files" "$tmp/n-plus.files" || fail "neighbouring runs wrote different files: $(diff "$tmp/n-data.files" "$tmp/n-plus.files")"

# The ledger is on disk before the release (issue 25): killed right before the released files are
# written, and right after, ledger.json already holds both central queries. Killed before, the
# resumed run spends them again rather than losing them; killed after, it reuses the release and
# never queries the private data again (issue 37): exactly one release on the ledger.
central_queries_at_least() {  # RUN_DIR N [exactly]: ledger.json holds at least (exactly) N central queries (sigma_c 5)
  python3 - "$1" "$2" <<'PY'
import json, sys
ledger = json.load(open(sys.argv[1] + "/ledger.json"))
def sigma(e):
    e = e["event"] if e["type"] == "self_composed" else e
    return e["event"]["noise_multiplier"]
queries = sum(e.get("count", 1) for e in ledger["entries"] if sigma(e) == 5.0)  # the central queries' sigma_c
assert queries >= int(sys.argv[2]) and (len(sys.argv) < 4 or queries == int(sys.argv[2])), (queries, ledger)
PY
}
for point in release released; do
  PRIVDIFF_TEST_KILL_AT=$point "$privdiff" run "$tmp/mean.toml" --out "$tmp/kill-$point" > "$tmp/kill.log" 2>&1; code=$?
  [ $code -eq 137 ] || fail "kill at $point: exit $code: $(tail -3 "$tmp/kill.log")"
  central_queries_at_least "$tmp/kill-$point" 2 || fail "ledger behind the release (killed at $point)"
  [ "$point" = release ] && [ -e "$tmp/kill-$point/released-central" ] && fail "released files before the kill point"
  out=$("$privdiff" run --resume "$tmp/kill-$point" 2>&1) || fail "resume after a kill at $point: $out"
  if [ "$point" = release ]; then
    central_queries_at_least "$tmp/kill-$point" 4 || fail "the resumed run lost the killed run's queries ($point)"
  else
    central_queries_at_least "$tmp/kill-$point" 2 exactly || fail "the resumed run queried the private data again"
    grep -q "stage 'central': released before this run stopped; reusing" <<<"$out" || fail "no reuse line: $out"
    grep -q "released 20 images" <<<"$out" && fail "the resumed run released again: $out"
  fi
  [ -s "$tmp/kill-$point/samples.png" ] || fail "the resumed run ($point) did not finish"
done

# The shipped DP-FETA recipes validate (pre-flight: data, the release's size, calibration after the queries).
examples="$fixtures/../../examples/recipes"
for r in "$examples"/dpfeta_*.toml; do
  out=$("$privdiff" validate "$r" 2>&1) || fail "validate $r: $out"
  grep -q "calibrated stage 'train' noise multiplier" <<<"$out" || fail "no calibration in validate $r: $out"
done
echo "1 passed, 0 failed"
