#!/usr/bin/env python3
"""Converts pytorch-fid's Inception-V3 weights into the file privdiff reads, after checking that
they are pytorch-fid's.

Usage:
  /usr/bin/python3 scripts/convert_inception_weights.py IN OUT
  /usr/bin/python3 scripts/convert_inception_weights.py --unverified IN OUT
  /usr/bin/python3 scripts/convert_inception_weights.py --check FILE

  IN:  pt_inception-2015-12-05-6726825d.pth, pytorch-fid's release
       (https://github.com/mseitzer/pytorch-fid/releases/download/fid_weights/pt_inception-2015-12-05-6726825d.pth).
       Its SHA-256 must be PYTORCH_FID_SHA256 below: the URL carries its first 8 hex digits
       (torch.hub's file-name convention), and other FID code pins the whole digest for that URL
       (e.g. snap-research/discoscene, models/inception_model.py). Any other file is refused.
  OUT: the same tensors as a plain dict (name -> float32 CPU tensor) saved by torch.save in its zip
       format, plus the conversion record privdiff requires: "privdiff.source_sha256" (the SHA-256
       of IN) and "privdiff.tensors_sha256" (the digest of the tensors, see tensors_sha256).
  --unverified: convert a file that is not pytorch-fid's (any state dict of torchvision's
       Inception3(num_classes=1008, aux_logits=False), e.g. a test network). Its record names its
       own SHA-256, so privdiff refuses it unless the evaluator's allow_unverified_weights = true,
       and then labels every number from it not comparable with published FIDs.
  --check FILE: prints FILE's record and tensors digest and says whether privdiff will take it as
       pytorch-fid's weights (exit status 0) or not (1).

Why a conversion: LibTorch reads torch.save files with torch::pickle_load, which (LibTorch 1.13 and
2.x) reads only the zip format (torch >= 1.6; the release predates it) and turns the
collections.OrderedDict that state_dict() returns into None. A plain dict in the zip format loads.

Why a tensors digest and not OUT's SHA-256: it identifies the network whatever the container
(zip member order, pickle protocol, torch version), and privdiff recomputes it when it loads OUT, so
tensors edited after conversion, or a record copied onto other tensors, do not pass. The key set is checked here against
torchvision's Inception3 (num_batches_tracked may be present or not; AuxLogits must not be); the
shapes are checked exactly by privdiff when it loads OUT. Needs torch and torchvision (Debian:
python3-torch, python3-torchvision).
"""
import hashlib
import sys

import torch

PYTORCH_FID_SHA256 = "6726825d0af5f729cebd5821db510b11b1cfad8faad88a03f1befd49fb9129b2"
RELEASE = "pytorch-fid's pt_inception-2015-12-05-6726825d.pth"
SOURCE_KEY = "privdiff.source_sha256"
TENSORS_KEY = "privdiff.tensors_sha256"


def file_sha256(path):
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as e:
        sys.exit(f"{path}: cannot read it: {e.strerror}")
    return digest.hexdigest()


def tensors_sha256(state):
    """privdiff's inception_tensors_sha256 (sdk/evaluation/inception_v3.hpp): SHA-256 over the
    tensors in order of their names (records and num_batches_tracked left out), each as
    name + "\\n" + shape ("32,3,3,3") + "\\n" + its values as little-endian float32, row-major."""
    digest = hashlib.sha256()
    for name in sorted(state):
        if name.startswith("privdiff.") or name.endswith("num_batches_tracked"):
            continue
        tensor = state[name].detach().to("cpu", torch.float32).contiguous()
        digest.update(f"{name}\n{','.join(str(d) for d in tensor.shape)}\n".encode())
        digest.update(tensor.numpy().astype("<f4", copy=False).tobytes())
    return digest.hexdigest()


def expected_names():
    import torchvision

    net = torchvision.models.inception_v3(num_classes=1008, aux_logits=False, init_weights=False)
    return {k for k in net.state_dict() if not k.endswith("num_batches_tracked")}


def load(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        return torch.load(path, map_location="cpu")


def read_state(path):
    try:
        state = load(path)
    except Exception as e:  # noqa: BLE001 (any reason torch.load gives is the message)
        sys.exit(f"{path}: torch.load cannot read it: {e}")
    if not isinstance(state, dict):
        sys.exit(f"{path}: not a state dict (found {type(state).__name__})")
    return state


def check(path):
    state = read_state(path)
    source, recorded = state.get(SOURCE_KEY), state.get(TENSORS_KEY)
    actual = tensors_sha256(state)
    print(f"{path}: source SHA-256 {source or '(no record)'}; tensors SHA-256 {actual}"
          f" (recorded: {recorded or 'none'})")
    if source != PYTORCH_FID_SHA256:
        print(f"{path}: NOT verified: not converted from {RELEASE} ({PYTORCH_FID_SHA256})")
        return 1
    if recorded != actual:
        print(f"{path}: NOT verified: its tensors changed since they were converted")
        return 1
    print(f"{path}: verified: {RELEASE}, converted")
    return 0


def convert(source, target, unverified):
    source_sha256 = file_sha256(source)
    verified = source_sha256 == PYTORCH_FID_SHA256
    if not verified and not unverified:
        sys.exit(f"{source}: SHA-256 {source_sha256} is not that of {RELEASE} ({PYTORCH_FID_SHA256}): FIDs on "
                 "other weights are not comparable with published ones. (--unverified converts it anyway, for "
                 "tests: privdiff then refuses it unless allow_unverified_weights = true, and labels every "
                 "number from it not comparable.)")
    state = read_state(source)
    names = {k for k in state if not k.endswith("num_batches_tracked")}
    want = expected_names()
    missing, unexpected = sorted(want - names), sorted(names - want)
    if missing or unexpected:
        sys.exit(f"{source}: not the FID Inception-V3's state dict: {len(missing)} names missing "
                 f"(e.g. {missing[:3]}), {len(unexpected)} unexpected (e.g. {unexpected[:3]})")
    plain = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in state.items()
             if not k.endswith("num_batches_tracked")}
    digest = tensors_sha256(plain)
    plain[SOURCE_KEY] = source_sha256
    plain[TENSORS_KEY] = digest
    torch.save(plain, target)
    if tensors_sha256(read_state(target)) != digest:  # read back: what privdiff will hash
        sys.exit(f"{target}: the tensors read back differ from those written")
    print(f"{target}: {len(plain) - 2} tensors; tensors SHA-256 {digest}")
    print(f"{target}: source {source} SHA-256 {source_sha256}: "
          + (f"{RELEASE}, verified" if verified else "NOT pytorch-fid's weights (--unverified): for tests only"))


def main(argv):
    args = argv[1:]
    if len(args) == 2 and args[0] == "--check":
        sys.exit(check(args[1]))
    unverified = "--unverified" in args
    args = [a for a in args if a != "--unverified"]
    if len(args) != 2 or any(a.startswith("--") for a in args):
        sys.exit(__doc__)
    convert(args[0], args[1], unverified)


if __name__ == "__main__":
    main(sys.argv)
