"""Converts a pickled PyTorch checkpoint (.ckpt, .pt, .pth, .bin: CompVis latent diffusion, DPDM,
diffusers' older diffusion_pytorch_model.bin) into safetensors, the only weights format privdiff
reads, so that privdiff never runs a pickle. The pickle is opened with PyTorch's weights_only
loader, which refuses code and objects other than tensors, containers and plain values.

    python convert_to_safetensors.py IN.ckpt OUT.safetensors [--key state_dict]
    python convert_to_safetensors.py DPDM.pth OUT.safetensors --dpdm [--live-weights]
    python convert_to_safetensors.py LDM.ckpt OUT.safetensors --key state_dict --ldm-config CONFIG.yaml

Nested dictionaries are flattened with dots ("model.diffusion_model.input_blocks.0.0.weight");
non-tensor values are skipped and listed. --dpdm reads a checkpoint of DPDM's training script
(github.com/nv-tlabs/DPDM: 'model' the wrapped network's state, 'ema' its moving average as a list
in parameter order) and writes the network's EMA weights, which DPDM samples with, under the
network's own names (all_modules.N...); --live-weights writes the trained weights instead.
--ldm-config keeps a CompVis latent-diffusion model's architecture with its weights: the YAML's
model.params (UNet, autoencoder, class embedder, noise schedule), as JSON in the metadata key
"ldm.config" (the YAML is read as data, never instantiated). Tensors that share storage are written as copies (the
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


def dpdm_weights(tree, source, live):
    """DPDM's network weights: the EMA shadow parameters named by the model's state (the network has
    no buffers, so its parameters are its state, in order), without the DDP and denoiser prefixes."""
    if "model" not in tree or "ema" not in tree:
        sys.exit(f"{source}: not a DPDM checkpoint (expected 'model' and 'ema' entries; it has: {', '.join(map(str, tree))})")
    names = list(tree["model"])
    values = list(tree["model"].values()) if live else tree["ema"]["shadow_params"]
    if len(values) != len(names):
        sys.exit(f"{source}: {len(values)} EMA parameters for {len(names)} model entries")
    out = {}
    for name, value in zip(names, values):
        short = name.removeprefix("module.").removeprefix("model.")
        if value.shape != tree["model"][name].shape:
            sys.exit(f"{source}: EMA parameter for {name} has shape {tuple(value.shape)}, the model's {tuple(tree['model'][name].shape)}")
        out[short] = value.detach().contiguous().clone()
    return out


def ldm_config(path):
    """The YAML's model.params without the training-only sections, as JSON."""
    import json
    import yaml
    with open(path) as f:
        config = yaml.safe_load(f)
    try:
        params = dict(config["model"]["params"])
    except (KeyError, TypeError):
        sys.exit(f"{path}: no model.params (not a latent-diffusion config)")
    for training_only in ("scheduler_config", "lossconfig", "monitor", "ckpt_path", "ignore_keys"):
        params.pop(training_only, None)
    first_stage = params.get("first_stage_config", {}).get("params", {})
    for training_only in ("lossconfig", "monitor", "ckpt_path"):
        first_stage.pop(training_only, None)
    return json.dumps(params, sort_keys=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--key", help="the entry holding the weights (e.g. state_dict, model, ema); default: all")
    parser.add_argument("--dpdm", action="store_true", help="a DPDM checkpoint: write its network's EMA weights")
    parser.add_argument("--live-weights", action="store_true", help="with --dpdm: the trained weights, not the EMA")
    parser.add_argument("--ldm-config", help="a CompVis latent-diffusion YAML config: its model.params go into the metadata")
    args = parser.parse_args()
    tree = torch.load(args.source, map_location="cpu", weights_only=True)
    if args.dpdm:
        tensors = dpdm_weights(tree, args.source, args.live_weights)
        kind = "live" if args.live_weights else "ema"
        save_file(tensors, args.target, metadata={"format": "pt", "source": "dpdm", "weights": kind,
                                                   "converted_from": args.source.split("/")[-1]})
        print(f"wrote {args.target}: DPDM's network ({kind} weights), {len(tensors)} tensors, "
              f"{sum(t.numel() for t in tensors.values()):,} values")
        return
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
    metadata = {"format": "pt", "converted_from": args.source.split("/")[-1]}
    if args.ldm_config:
        metadata["ldm.config"] = ldm_config(args.ldm_config)
    save_file(tensors, args.target, metadata=metadata)
    print(f"wrote {args.target}: {len(tensors)} tensors, {sum(t.numel() for t in tensors.values()):,} values")
    if skipped:
        print(f"skipped {len(skipped)} non-tensor entries: {', '.join(skipped[:10])}{' ...' if len(skipped) > 10 else ''}")


if __name__ == "__main__":
    main()
