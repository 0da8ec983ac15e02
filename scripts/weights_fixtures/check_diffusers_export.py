"""Checks a `privdiff weights export --format diffusers` folder with diffusers itself: UNet2DModel
loads it with no missing, unexpected or mismatched key, every tensor equals the file's, and the
privacy guarantee is in the file's metadata. Exit 0 when all hold.

    python check_diffusers_export.py EXPORT_DIR"""
import sys

import torch
from diffusers import UNet2DModel
from safetensors import safe_open

folder = sys.argv[1]
model, info = UNet2DModel.from_pretrained(folder, output_loading_info=True)
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
assert torch.isfinite(model(x, torch.tensor([10, 500]), class_labels=labels).sample).all()
print(f"diffusers {__import__('diffusers').__version__} loads {folder}: {len(state)} tensors, no missing or unexpected "
      f"key, epsilon {metadata['privdiff.epsilon']} at delta {metadata['privdiff.delta']}")
