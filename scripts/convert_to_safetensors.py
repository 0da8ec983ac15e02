"""Converts a pickled PyTorch checkpoint (.ckpt, .pt, .pth, .bin: CompVis latent diffusion, DPDM,
diffusers' older diffusion_pytorch_model.bin) into safetensors, the only weights format privdiff
reads, so that privdiff never runs a pickle. The pickle is opened with PyTorch's weights_only
loader, which refuses code and objects other than tensors, containers and plain values.

    python convert_to_safetensors.py IN.ckpt OUT.safetensors [--key state_dict]

Nested dictionaries are flattened with dots ("model.diffusion_model.input_blocks.0.0.weight");
non-tensor values are skipped and listed. Tensors that share storage are written as copies (the
format has no aliasing). Run it in the environment of scripts/weights_fixtures/requirements.txt."""
import argparse
import sys

import torch
from safetensors.torch import save_file


def flatten(tree, prefix, out, skipped):
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, torch.Tensor):
            out[name] = value.detach().contiguous().clone()
        elif isinstance(value, dict):
            flatten(value, name + ".", out, skipped)
        else:
            skipped.append(f"{name} ({type(value).__name__})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--key", help="the entry holding the weights (e.g. state_dict, model, ema); default: all")
    args = parser.parse_args()
    tree = torch.load(args.source, map_location="cpu", weights_only=True)
    if args.key:
        if args.key not in tree:
            sys.exit(f"{args.source}: no entry '{args.key}' (it has: {', '.join(map(str, tree))})")
        tree = tree[args.key]
    if not isinstance(tree, dict):
        sys.exit(f"{args.source}: expected a dictionary of tensors, found {type(tree).__name__}")
    tensors, skipped = {}, []
    flatten(tree, "", tensors, skipped)
    if not tensors:
        sys.exit(f"{args.source}: no tensors found")
    save_file(tensors, args.target, metadata={"format": "pt", "converted_from": args.source.split("/")[-1]})
    print(f"wrote {args.target}: {len(tensors)} tensors, {sum(t.numel() for t in tensors.values()):,} values")
    if skipped:
        print(f"skipped {len(skipped)} non-tensor entries: {', '.join(skipped[:10])}{' ...' if len(skipped) > 10 else ''}")


if __name__ == "__main__":
    main()
