#!/usr/bin/env bash
# The CLI as a new user meets it: help, plugins list/show, validate on good and broken recipes,
# a run skeleton. Every failure path must exit 2 with a clear message and never crash.
# Usage: cli_contract_test.sh PRIVDIFF FIXTURE_DIR FIXTURE_PLUGIN_DIR
set -u
privdiff=$1 fixtures=$2 plugins=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0 checks=0

# expect CODE "description" -- command...: runs it, keeps stdout+stderr in $out.
expect() {
  local want=$1 what=$2; shift 3
  out=$("$@" 2>&1); local got=$?
  checks=$((checks + 1))
  if [ "$got" != "$want" ]; then
    echo "FAIL: $what: exit $got, expected $want"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
  fi
  if echo "$out" | grep -qE "terminate called|Aborted|Segmentation|stack trace|what\(\):"; then
    echo "FAIL: $what: crashed"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
  fi
}
# contains "text": the last command's output must contain text.
contains() {
  checks=$((checks + 1))
  if ! grep -qF -- "$1" <<<"$out"; then
    echo "FAIL: output lacks: $1"; echo "$out" | sed 's/^/    /'; failures=$((failures + 1))
  fi
}

good=(--plugin-path "$plugins/good")

expect 0 "help" -- "$privdiff" --help; contains "Subcommands:"; contains "validate"
expect 0 "version" -- "$privdiff" --version; contains "privdiff 0."
expect 2 "no subcommand" -- "$privdiff"
expect 2 "unknown subcommand" -- "$privdiff" frobnicate; contains "error: unknown command 'frobnicate'"; contains "commands: plugins, validate"
expect 2 "misspelt subcommand" -- "$privdiff" "${good[@]}" valdate x.toml; contains "(did you mean 'validate'?)"
expect 2 "unknown option" -- "$privdiff" validate --bogus x.toml
# A thread-count variable LibTorch would answer with a C++ stack trace (issue 69).
expect 2 "OMP_NUM_THREADS=0" -- env OMP_NUM_THREADS=0 "$privdiff" --version
contains "error: OMP_NUM_THREADS=0: expected a positive integer"
expect 2 "MKL_NUM_THREADS=two" -- env MKL_NUM_THREADS=two "$privdiff" --version; contains "MKL_NUM_THREADS=two"
expect 2 "--nproc 100000" -- "$privdiff" run x.toml --nproc 100000; contains "--nproc: Value 100000 not in range 1 to 256"
# A recipe that is a pipe or a device is refused before it is opened (it would block or never end).
mkfifo "$tmp/fifo.toml"
expect 2 "validate a FIFO" -- timeout 20 "$privdiff" validate "$tmp/fifo.toml"; contains "is not a regular file"
expect 2 "validate /dev/zero" -- timeout 20 "$privdiff" validate /dev/zero; contains "is not a regular file"
head -c 2000000 /dev/zero | tr '\0' '#' > "$tmp/huge.toml"
expect 2 "validate a 2 MB recipe" -- "$privdiff" validate "$tmp/huge.toml"; contains "a recipe is at most 1 MiB"
# Sizes no machine holds are refused by validate, not by the allocator during run (issue 69).
recipes=$(cd "$(dirname "$0")/../../examples/recipes" && pwd)
expect 2 "samples_per_class 1e9" -- "$privdiff" validate "$recipes/pe_fmnist_eps1.toml" --set stage.1.samples_per_class=1000000000
contains "stage[1].samples_per_class: expected integer in [2, 100000], got 1000000000"
expect 2 "images_per_class near 2^64 / 10" -- "$privdiff" validate "$recipes/privimage_pictograms_fmnist_eps10.toml" \
  --set stage.0.images_per_class=1844674407370955162
contains "stage[0].images_per_class: expected integer in [1, 100000]"
expect 2 "glyphs per_class 1e8" -- "$privdiff" validate "$recipes/pe_fmnist_eps1.toml" --set data.public.per_class=100000000
contains "data.public.per_class: expected integer in [1, 100000]"
expect 2 "threads 100000" -- "$privdiff" validate "$recipes/pe_fmnist_eps1.toml" --set run.threads=100000
contains "run.threads: expected integer in [0, 1024]"

expect 0 "plugins list" -- "$privdiff" "${good[@]}" plugins list
contains "fixture_model"; contains "libfixture_components.so"; contains "1.2.3"; contains "samplers:"
expect 0 "plugins list with a refused plugin" -- "$privdiff" "${good[@]}" --plugin-path "$plugins/wrong_abi" plugins list
contains "refused plugins:"; contains "refused: plugin ABI version 13, this privdiff expects 12"
expect 0 "PRIVDIFF_PLUGIN_PATH" -- env PRIVDIFF_PLUGIN_PATH="$plugins/good:$plugins/throwing_registration" "$privdiff" plugins list
contains "fixture_sampler"; contains "registration failed: fixture registration exploded"

expect 0 "plugins show" -- "$privdiff" "${good[@]}" plugins show fixture_mechanism
contains "batch_size (required)"; contains 'noise_multiplier = "auto"'; contains 'number > 0 or "auto"'
contains '[[stage]] mechanism = "fixture_mechanism"'
expect 2 "plugins show unknown" -- "$privdiff" "${good[@]}" plugins show fixture_mechansm
contains "no component 'fixture_mechansm' (did you mean 'fixture_mechanism'?)"

expect 0 "validate a good recipe" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/valid/full.toml"
contains "calibrated stage 'pretrain' noise multiplier"  # validate runs run's pre-flight checks
contains "valid"; contains "pretrain (fixture_mechanism), train (fixture_mechanism)"
expect 2 "validate a broken recipe" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/invalid/unknown_key.toml"
contains "unknown_key.toml:3:1: model.chanels: unknown key 'chanels' (did you mean 'channels'?)"; contains "4 errors"
expect 2 "validate malformed TOML" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/invalid/malformed.toml"
contains "malformed TOML"
expect 2 "validate a missing file" -- "$privdiff" validate "$tmp/none.toml"; contains "cannot read recipe file"
expect 2 "validate a directory" -- "$privdiff" validate "$tmp"; contains "cannot read recipe file"
head -c 3000 /dev/urandom > "$tmp/garbage.toml"
expect 2 "validate binary garbage" -- "$privdiff" validate "$tmp/garbage.toml"
expect 2 "validate with a bad override" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/valid/full.toml" --set stage.1.steps=many
contains "--set 'stage.1.steps=many': stage[1].steps: expected integer >= 0, got \"many\""
expect 0 "validate with overrides" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/valid/full.toml" --set stage.1.steps=3 --set model.type=fixture_model

# [plugins] search, relative to the recipe.
mkdir -p "$tmp/recipes"
ln -s "$plugins/good" "$tmp/recipes/my_plugins"
printf '[plugins]\nsearch = ["my_plugins"]\n[privacy]\ndelta = 1e-5\naccountant = "fixture_accountant"\n' > "$tmp/recipes/r.toml"
expect 0 "recipe plugin search" -- "$privdiff" validate "$tmp/recipes/r.toml"

# validate runs every check run makes before training: what run would refuse, validate refuses.
printf '' > "$tmp/empty.toml"
expect 2 "validate an empty recipe" -- "$privdiff" validate "$tmp/empty.toml"; contains "the recipe has nothing to run"
expect 2 "run an empty recipe" -- "$privdiff" run "$tmp/empty.toml" --out "$tmp/empty-run"; contains "nothing to run"
expect 2 "validate a privacy plan over the target" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/valid/full.toml" \
  --set privacy.accountant=fixture_accountant --set 'stage.1.noise_multiplier=0.1'
contains "already spend epsilon 1215 of the target 10"
expect 2 "validate a missing data path" -- "$privdiff" "${good[@]}" validate "$fixtures/recipes/valid/full.toml" \
  --set 'data.dataset="idx"' --set data.path="$tmp/no-such-data"
contains "is not a directory"

# run: writes a run directory; refuses to overwrite one.
expect 0 "run" -- "$privdiff" run "$tmp/recipes/r.toml" --out "$tmp/run1"
contains "privacy     epsilon 0 (fixture_accountant) at delta"
for f in recipe.toml ledger.json privacy.json; do
  checks=$((checks + 1)); [ -s "$tmp/run1/$f" ] || { echo "FAIL: run wrote no $f"; failures=$((failures + 1)); }
done
expect 2 "run into a used directory" -- "$privdiff" run "$tmp/recipes/r.toml" --out "$tmp/run1"
contains "already exists and is not empty"

# Careless input gets plain messages.
expect 2 "a missing --plugin-path" -- "$privdiff" --plugin-path "$tmp/nowhere" plugins list
contains "--plugin-path $tmp/nowhere: no such directory"
expect 2 "sample --count 0" -- "$privdiff" sample "$tmp/run1" --count 0
contains "must be an integer >= 1, got 0"

# Values a schema accepts but that cannot be used: refused with the key's place in the recipe, exit 2,
# nothing written (issue #37). The real plugins, on the tiny Fashion-MNIST fixture.
cat > "$tmp/real.toml" <<TOML
[privacy]
epsilon = 5.0
delta = 1e-5
[data]
path = "$fixtures/data/tiny-fashion-mnist"
[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [14]
[sampler]
type = "edm_heun"
steps = 2
[[stage]]
mechanism = "dpsgd"
batch_size = 4
steps = 2
ema = 0.5
TOML
expect 2 "an adapter's targets that are not a regex" -- "$privdiff" validate "$tmp/real.toml" \
  --set 'adapter.type="lora"' --set 'adapter.targets="(("'
contains "--set 'adapter.targets=\"((\"': adapter.targets: \"((\" is not a regular expression ("
{ cat "$tmp/real.toml"; printf '[adapter]\ntype = "ia3"\ntargets = "nothing"\n'; } > "$tmp/adapter.toml"
expect 2 "an adapter's targets that match no layer" -- "$privdiff" run "$tmp/adapter.toml" --out "$tmp/adapter-run"
contains "adapter.toml:22:11: adapter.targets: \"nothing\" matches no Linear layer's name (the model's Linear layers: sigma_mlp1, "
checks=$((checks + 1)); [ ! -e "$tmp/adapter-run" ] || { echo "FAIL: a refused run wrote $tmp/adapter-run"; failures=$((failures + 1)); }
{ head -n 5 "$tmp/real.toml"; echo 'classes = [0, 12]'; tail -n +6 "$tmp/real.toml"; } > "$tmp/classes.toml"
expect 2 "a class the data do not have" -- "$privdiff" run "$tmp/classes.toml" --out "$tmp/classes-run"
contains "classes.toml:6:11: data.classes: class 12 does not exist: tiny-fashion-mnist (train) has classes 0-9"
checks=$((checks + 1)); [ ! -e "$tmp/classes-run" ] || { echo "FAIL: a refused run wrote $tmp/classes-run"; failures=$((failures + 1)); }
expect 2 "init_from_disjoint without init_from" -- "$privdiff" validate "$tmp/real.toml" --set run.init_from_disjoint=true
contains "--set 'run.init_from_disjoint=true': run.init_from_disjoint: true states that this run's data and those of the run it starts from are disjoint, but [run] has no init_from"
sed 's/^epsilon = 5.0$/epsilon = inf/' "$tmp/real.toml" > "$tmp/inf.toml"
expect 2 "epsilon = inf" -- "$privdiff" validate "$tmp/inf.toml"
contains "inf.toml:2:11: privacy.epsilon: expected a finite number > 0, got inf"
expect 2 "steps = 1e12 (as an integer)" -- "$privdiff" validate "$tmp/real.toml" --set stage.0.steps=1000000000000
contains "stage[0].steps: expected integer in [1, 1000000000], got 1000000000000"
expect 2 "epochs = 1e300" -- "$privdiff" validate "$tmp/real.toml" --set stage.0.epochs=1e300
contains "stage[0].epochs: expected number in (0, 1000000], got 1e+300"
# A sample count that cannot fit: the numbers, before anything is allocated or written.
expect 0 "a tiny real run" -- "$privdiff" run "$tmp/real.toml" --out "$tmp/real-run"
contains "--count 10000 takes about"
expect 2 "sample --count 1e12" -- "$privdiff" sample "$tmp/real-run" --count 1000000000000
contains "sample --count 1000000000000: 1000000000000 images of 1x28x28 need 1.58 PB of memory"; contains " fit; sample fewer"
checks=$((checks + 1)); [ ! -e "$tmp/real-run/samples" ] || { echo "FAIL: a refused sample wrote $tmp/real-run/samples"; failures=$((failures + 1)); }

echo "$((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
