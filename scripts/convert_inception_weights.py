#!/usr/bin/env python3
"""Converts pytorch-fid's Inception-V3 weights into the file privdiff reads.

Usage: /usr/bin/python3 scripts/convert_inception_weights.py IN OUT
  IN:  pt_inception-2015-12-05-6726825d.pth, pytorch-fid's release
       (https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth),
       or any state dict of torchvision's Inception3(num_classes=1008, aux_logits=False).
  OUT: the same tensors as a plain dict (name -> float32 CPU tensor) saved by torch.save in its
       zip format.

Why: LibTorch reads torch.save files with torch::pickle_load, which (LibTorch 1.13 and 2.x) reads
only the zip format (torch >= 1.6; the release predates it) and turns the collections.OrderedDict
that state_dict() returns into None. A plain dict in the zip format loads.

The key set is checked against torchvision's Inception3 (num_batches_tracked may be present or
not; AuxLogits must not be); the shapes are checked by privdiff when it loads OUT. Needs torch and
torchvision.
"""
import sys

import torch


def expected_names():
    import torchvision

    net = torchvision.models.inception_v3(num_classes=1008, aux_logits=False, init_weights=False)
    return {k for k in net.state_dict() if not k.endswith("num_batches_tracked")}


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        return torch.load(path, map_location="cpu")


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    source, target = argv[1], argv[2]
    try:
        state = load(source)
    except Exception as e:  # noqa: BLE001 (any reason torch.load gives is the message)
        sys.exit(f"{source}: torch.load cannot read it: {e}")
    if not isinstance(state, dict):
        sys.exit(f"{source}: not a state dict (found {type(state).__name__})")
    names = {k for k in state if not k.endswith("num_batches_tracked")}
    want = expected_names()
    missing, unexpected = sorted(want - names), sorted(names - want)
    if missing or unexpected:
        sys.exit(f"{source}: not the FID Inception-V3's state dict: {len(missing)} names missing "
                 f"(e.g. {missing[:3]}), {len(unexpected)} unexpected (e.g. {unexpected[:3]})")
    plain = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state.items()
             if not k.endswith("num_batches_tracked")}
    torch.save(plain, target)
    print(f"{target}: {len(plain)} tensors")


if __name__ == "__main__":
    main(sys.argv)
