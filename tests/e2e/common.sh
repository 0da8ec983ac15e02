# Sourced by the end-to-end tests: a scratch directory removed on exit, fail(), a private cache
# directory, and $tiny_model, the [model] section of the tiny pixel UNet they train.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; echo "0 passed, 1 failed"; exit 1; }
export PRIVDIFF_CACHE_DIR="$tmp/cache"
tiny_model='[model]
type = "pixel_unet"
channels = 8
channel_mult = [1, 2]
num_res_blocks = 1
attention_resolutions = [14]'
# tiny_dp_recipe FIXTURE_DIR EPSILON [STAGE_LINE...]: a DP-SGD recipe of the tiny model on the tiny
# Fashion-MNIST fixture (RDP accountant, delta 1e-5, reproducible noise, batch 4) with a two-step DDIM
# sampler; the extra lines go into its stage (its steps, at least).
tiny_dp_recipe() {
  local fixtures=$1 epsilon=$2
  shift 2
  printf '[privacy]\nepsilon = %s\ndelta = 1e-5\naccountant = "rdp"\n[data]\npath = "%s/data/tiny-fashion-mnist"\n%s\n' \
    "$epsilon" "$fixtures" "$tiny_model"
  printf '[[stage]]\nmechanism = "dpsgd"\nbatch_size = 4\nsecure_noise = false\n'
  printf '%s\n' "$@"
  printf '[sampler]\ntype = "ddim"\nsteps = 2\n'
}
# attention_finetune_tables DATA_LINE...: [privacy] (epsilon 5, RDP), [data] of those lines, and a two-step
# DP-SGD stage of batch 4 that trains the attention blocks (reproducible noise): what a recipe of an
# imported model needs to fine-tune it.
attention_finetune_tables() {
  printf '[privacy]\nepsilon = 5.0\ndelta = 1e-5\naccountant = "rdp"\n[data]\n'
  printf '%s\n' "$@"
  printf '[[stage]]\nmechanism = "dpsgd"\ntrain = "attention"\nbatch_size = 4\nsteps = 2\nsecure_noise = false\n'
}
# tiny_glyph_pretraining CACHE_DIR: a two-step non-private run of the tiny model on rendered glyphs.
tiny_glyph_pretraining() {
  printf '[data]\ndataset = "glyphs"\ncharacters = "ABCDEFGHIJ"\nper_class = 3\ncache = "%s"\n%s\n' "$1" "$tiny_model"
  printf '[[stage]]\nmechanism = "nonprivate"\nbatch_size = 8\nsteps = 2\n'
}
