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
