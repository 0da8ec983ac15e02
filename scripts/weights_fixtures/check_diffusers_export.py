"""Checks a `privdiff weights export --format diffusers` folder with diffusers itself: UNet2DModel (or
UNet2DConditionModel, Stable Diffusion's, its LoRA folded in) loads it with no missing, unexpected or
mismatched key, every tensor equals the file's, and the privacy guarantee is in the file's metadata.
Exit 0 when all hold.

    python check_diffusers_export.py EXPORT_DIR"""
import sys

import torch
import json

from diffusers import UNet2DConditionModel, UNet2DModel
from safetensors import safe_open

folder = sys.argv[1]
conditional = json.load(open(f"{folder}/config.json"))["_class_name"] == "UNet2DConditionModel"
model, info = (UNet2DConditionModel if conditional else UNet2DModel).from_pretrained(folder, output_loading_info=True)
problems = {k: v for k, v in info.items() if v}
assert not problems, f"diffusers could not load every key: {problems}"
with safe_open(f"{folder}/diffusion_pytorch_model.safetensors", framework="pt") as f:
    metadata = f.metadata()
    state = model.state_dict()
    assert set(f.keys()) == set(state), "the key sets differ"
    for name in f.keys():
        assert torch.equal(f.get_tensor(name), state[name]), name
for key in ("privdiff.epsilon", "privdiff.delta", "privdiff.accountant", "privdiff.privacy"):
    assert key in metadata, f"no {key} in the metadata"
x = torch.randn(2, model.config.in_channels, 8, 8)
labels = torch.tensor([0, 1]) if model.config.num_class_embeds else None
context = torch.randn(2, 7, model.config.cross_attention_dim) if conditional else None
extra = {"encoder_hidden_states": context} if conditional else {}
assert torch.isfinite(model(x, torch.tensor([10, 500]), class_labels=labels, **extra).sample).all()
print(f"diffusers {__import__('diffusers').__version__} loads {folder}: {len(state)} tensors, no missing or unexpected "
      f"key, epsilon {metadata['privdiff.epsilon']} at delta {metadata['privdiff.delta']}")
