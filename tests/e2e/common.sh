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
# captioned_faces DIR SIZE: an image folder of six one-colour SIZE x SIZE RGB PNGs with a caption each
# ("The man is smiling.", ...) in DIR/metadata.jsonl, captions = "table"'s layout: private captioned data.
captioned_faces() {
  python3 - "$1" "$2" <<'PY'
import json, os, struct, sys, zlib
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
def png(path, rgb):  # an 8-bit RGB n x n PNG of one colour
    chunk = lambda t, b: struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))
    rows = b"".join(b"\0" + bytes(rgb) * n for _ in range(n))
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", n, n, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
captions = ["The woman has wavy hair.", "The man is smiling.", "A photo of a young woman.",
            "The man has a beard.", "The woman wears a hat.", "A photo of an old man."]
with open(f"{d}/metadata.jsonl", "w") as f:
    for i, c in enumerate(captions):
        png(f"{d}/{i}.png", (40 * i, 200 - 30 * i, 90))
        f.write(json.dumps({"file_name": f"{i}.png", "text": c}) + "\n")
PY
}
# captioned_faces_tables DIR SIZE: [privacy] (epsilon 10, RDP) and the [data] table of captioned_faces DIR SIZE.
captioned_faces_tables() {
  printf '[privacy]\nepsilon = 10.0\ndelta = 1e-5\naccountant = "rdp"\n[data]\ndataset = "image_folder"\npath = "%s"\n' "$1"
  printf 'layout = "flat"\nchannels = 3\nimage_size = %s\ncaptions = "table"\ncaption_path = "%s/metadata.jsonl"\n' "$2" "$1"
}
# random_idx_data DIR SEED: 40 random 28 x 28 training images (four of each class, labels i % 10) and 20
# test images, in Fashion-MNIST's IDX layout (releases per class need every class present).
random_idx_data() {
  python3 - "$1" "$2" <<'PY'
import gzip, os, random, struct, sys
d = sys.argv[1]; os.makedirs(d); random.seed(int(sys.argv[2]))
for split, n in (("train", 40), ("t10k", 20)):
    with gzip.open(f"{d}/{split}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(random.randrange(256) for _ in range(n * 784)))
    with gzip.open(f"{d}/{split}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(i % 10 for i in range(n)))
PY
}
