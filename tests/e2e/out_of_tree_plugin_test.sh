#!/usr/bin/env bash
# Installs privdiff from the build tree into a fresh prefix, builds examples/out_of_tree_plugin
# against that *installed* SDK (find_package(privdiff) + privdiff_add_plugin), and checks that the
# installed host loads it: from --plugin-path, and from the prefix once the plugin is installed; its
# second plugin, an evaluator, scores a sample set through privdiff eval.
# Usage: out_of_tree_plugin_test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
build=$1 source=$2 work=$3
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"

step() { echo "== $*"; }
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }

step "install privdiff into $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" || { cat "$work/install.log"; fail "install"; }
privdiff="$prefix/bin/privdiff"
[ -x "$privdiff" ] || fail "no installed privdiff"

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# The SDK's config finds LibTorch the way privdiff's build did (a pip PyTorch's LibTorch is in no
# system path): its prefixes come along.
outer_prefix=$(sed -n 's/^CMAKE_PREFIX_PATH:[A-Z]*=//p' "$build/CMakeCache.txt")
torch_dir=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$build/CMakeCache.txt")
step "configure and build the out-of-tree plugin against the installed SDK"
cmake -S "$source/examples/out_of_tree_plugin" -B "$work/plugin-build" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix${outer_prefix:+;$outer_prefix}" \
  ${torch_dir:+-DTorch_DIR="$torch_dir"} -DCMAKE_INSTALL_PREFIX="$prefix" \
  > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configure"; }
cmake --build "$work/plugin-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "build"; }
lib="$work/plugin-build/libzcdp.so"
[ -f "$lib" ] || fail "no libzcdp.so"

step "the installed host loads it from --plugin-path"
out=$("$privdiff" --plugin-path "$work/plugin-build" plugins list 2>&1) || fail "plugins list: $out"
echo "$out"
grep -q "zcdp .*zero-concentrated DP" <<<"$out" || fail "zcdp not listed as loaded"
grep -q "refused" <<<"$out" && fail "a plugin was refused"

out=$("$privdiff" --plugin-path "$work/plugin-build" plugins show zcdp 2>&1) || fail "plugins show: $out"
grep -q 'zcdp (accountant)' <<<"$out" || fail "plugins show zcdp: $out"

step "installed into the prefix, it is found without --plugin-path"
cmake --install "$work/plugin-build" > /dev/null || fail "plugin install"
printf '[privacy]\ndelta = 1e-5\naccountant = "zcdp"\n' > "$work/recipe.toml"
out=$("$privdiff" validate "$work/recipe.toml" 2>&1) || fail "validate: $out"
out=$("$privdiff" run "$work/recipe.toml" --out "$work/run" 2>&1) || fail "run: $out"
grep -q "privacy     epsilon 0 (zcdp) at delta" <<<"$out" || fail "run output: $out"
[ -s "$work/run/privacy.json" ] || fail "no privacy.json"

step "an out-of-tree evaluator scores samples like the in-tree ones"
python3 - "$work" <<'PY' || fail "cannot write the sample set"
import gzip, struct, sys
with gzip.open(f"{sys.argv[1]}/s-images-idx3-ubyte.gz", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 20, 28, 28) + bytes(20 * 784))
with gzip.open(f"{sys.argv[1]}/s-labels-idx1-ubyte.gz", "wb") as f:
    f.write(struct.pack(">II", 0x801, 20) + bytes([0] * 20))
PY
json=$("$privdiff" eval "$work/s-images-idx3-ubyte.gz" --real-path "$source/tests/fixtures/data/tiny-fashion-mnist" \
       --evaluator class_balance --json 2>"$work/eval.log") || fail "eval --evaluator class_balance: $(cat "$work/eval.log")"
python3 -c 'import json,sys; m=json.loads(sys.argv[1])["evaluators"]["class_balance"]["metrics"]; assert 0.5 < m["label_tv_distance"] <= 1, m' \
  "$json" || fail "class_balance result: $json"

step "the out-of-tree mechanism: its own privacy test (the SDK's checks) and privdiff check-mechanism"
[ -x "$work/plugin-build/automatic_clipping_test" ] || fail "automatic_clipping_test was not built (GTest not found?)"
"$work/plugin-build/automatic_clipping_test" > "$work/automatic_clipping_test.log" 2>&1 ||
  { cat "$work/automatic_clipping_test.log"; fail "automatic_clipping_test"; }
grep -q "mechanism check passed" "$work/automatic_clipping_test.log" || fail "automatic_clipping_test: no verdict"
printf '[run]\nseed = 1\n[privacy]\nepsilon = 2.0\ndelta = 1e-5\n[data]\npath = "%s"\n[model]\ntype = "pixel_unet"\nchannels = 8\nchannel_mult = [1, 2]\nnum_res_blocks = 1\nattention_resolutions = []\n[[stage]]\nmechanism = "automatic_clipping"\nbatch_size = 4\nsteps = 2\nsecure_noise = false\n' \
  "$source/tests/fixtures/data/tiny-fashion-mnist" > "$work/autoclip.toml"
out=$("$privdiff" check-mechanism "$work/autoclip.toml" --canaries 1000 2>&1) || fail "check-mechanism automatic_clipping: $out"
grep -q "mechanism check passed" <<<"$out" || fail "check-mechanism: no verdict: $out"
out=$("$privdiff" run "$work/autoclip.toml" --out "$work/autoclip-run" 2>&1) || fail "run automatic_clipping: $out"

step "the adaptive-clipping example: two releases of one batch, a clip norm kept between steps"
"$work/plugin-build/adaptive_clipping_test" > "$work/adaptive_clipping_test.log" 2>&1 ||
  { cat "$work/adaptive_clipping_test.log"; fail "adaptive_clipping_test"; }
sed 's/"automatic_clipping"/"adaptive_clipping"/' "$work/autoclip.toml" > "$work/adaptive.toml"
out=$("$privdiff" check-mechanism "$work/adaptive.toml" --canaries 1000 2>&1) || fail "check-mechanism adaptive_clipping: $out"
grep -q "mechanism check passed" <<<"$out" || fail "check-mechanism adaptive_clipping: no verdict: $out"
grep -q "declared release 'unclipped count, step 1': noise std measured" <<<"$out" || fail "check-mechanism adaptive_clipping: the count unchecked: $out"
out=$("$privdiff" run "$work/adaptive.toml" --out "$work/adaptive-run" 2>&1) || fail "run adaptive_clipping: $out"
python3 - "$work/adaptive-run/ledger.json" <<'PY' || fail "adaptive_clipping's ledger: $(cat "$work/adaptive-run/ledger.json")"
import json, sys
step = json.load(open(sys.argv[1]))["entries"][0]["event"]  # SelfComposed(PoissonSampled(q, Composed([...])), 2)
assert step["type"] == "poisson_sampled" and step["event"]["type"] == "composed", step
assert [e["noise_multiplier"] for e in step["event"]["events"]][1:] == [10.0], step
PY
grep -q '"mechanism":{"clip_norm"' "$work/adaptive-run/metrics.jsonl" || fail "no clip norm in metrics.jsonl: $(head -3 "$work/adaptive-run/metrics.jsonl")"

echo "1 passed, 0 failed"
