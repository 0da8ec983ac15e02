#!/usr/bin/env bash
# Regenerates tests/fixtures/text/ (a caption corpus, a small BERT vocabulary, the first 3,000 of CLIP's
# merges, and the ids the reference tokenizers give the corpus; tiny random CLIPTextModels and their
# outputs, CompVis's BERTEmbedder and a tiny txt2img latent diffusion model built by CompVis's code) with the pinned packages of
# scripts/text_fixtures/requirements.txt, in a virtual environment kept in
# ~/.cache/privdiff/text-venv (PRIVDIFF_CACHE), rebuilt only when the pins change. CLIP's merges and
# open_clip's tokenizer come from the open-clip-torch wheel below, unpacked without its dependencies
# (torch is not needed to tokenize).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
open_clip_wheel=open-clip-torch==3.3.0
source "$root/scripts/pinned_venv.sh"
pinned_venv text-venv "$root/scripts/text_fixtures/requirements.txt"
wheel_dir="$venv/open_clip_wheel"
if [ ! -f "$wheel_dir/open_clip/tokenizer.py" ]; then
  "$venv/bin/pip" download --quiet --no-deps "$open_clip_wheel" -d "$wheel_dir"
  (cd "$wheel_dir" && "$venv/bin/python" -m zipfile -e open_clip_torch-*.whl .)
fi
"$venv/bin/python" "$root/scripts/text_fixtures/tokenizer_reference.py" "$root/tests/fixtures/text" "$wheel_dir/open_clip"
source "$root/scripts/compvis_source.sh"
compvis_source  # CompVis's BERTEmbedder is built by its own x-transformers code
"$venv/bin/python" "$root/scripts/text_fixtures/text_encoder_reference.py" "$root/tests/fixtures/text" "$compvis"
"$venv/bin/python" "$root/scripts/text_fixtures/txt2img_reference.py" "$root/tests/fixtures/text" "$compvis"
