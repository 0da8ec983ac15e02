"""Writes tests/fixtures/weights/dpdm/<name>/: tiny random DPDM networks (NCSN++ as DPDM's
model/ncsnpp.py builds it, run from a checkout of github.com/nv-tlabs/DPDM, never copied here),
saved as DPDM's training script saves a checkpoint and then converted by
scripts/convert_to_safetensors.py --dpdm exactly as a user converts a published one, plus
reference.safetensors with inputs and DPDM's own network output (its EMA weights, which DPDM
samples with), which privdiff's port must reproduce within 1e-5 relative.

    python dpdm_reference.py DPDM_CHECKOUT OUT_DIR"""
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch
from safetensors.torch import save_file

NETWORKS = {
    # DPDM's MNIST layout shrunk: three levels, two blocks, attention at the lowest resolution,
    # class labels with the classifier-free-guidance null class
    "ncsnpp_classes": dict(image_size=8, attn_resolutions=[2], num_in_channels=1, num_out_channels=1,
                           label_dim=3, use_cfg=True, ch_mult=(1, 2, 2), nf=8, num_res_blocks=2),
    # attention at two resolutions, one block per level, three channels, unconditional
    "ncsnpp_two_attention": dict(image_size=8, attn_resolutions=[8, 4], num_in_channels=3, num_out_channels=3,
                                 label_dim=0, ch_mult=(1, 2), nf=8, num_res_blocks=1),
}


def import_ncsnpp(checkout: Path):
    """DPDM's model package without what the forward pass never touches: its Opacus fork (only a
    grad-sampler registration) and the compiled up/down-sampling kernels (DPDM runs fir=False)."""
    register = types.ModuleType("opacus.grad_sample")
    register.register_grad_sampler = lambda *_: (lambda f: f)
    for name, module in {"src": types.ModuleType("src"), "src.opacus": types.ModuleType("src.opacus"),
                         "opacus": types.ModuleType("opacus"), "opacus.grad_sample": register,
                         "model.op": types.ModuleType("model.op")}.items():
        sys.modules[name] = module
    sys.modules["model.op"].upfirdn2d = None
    sys.path.insert(0, str(checkout))
    from model.ncsnpp import NCSNpp
    return NCSNpp


class EDMDenoiser(torch.nn.Module):
    """Stands in for DPDM's denoiser.py wrapper: only its parameter prefix ("model.") matters here."""

    def __init__(self, model):
        super().__init__()
        self.model = model


class Parallel(torch.nn.Module):
    """Stands in for DPDM's DPDDP / DDP wrapper: the "module." prefix of its checkpoints."""

    def __init__(self, module):
        super().__init__()
        self.module = module


def randomised_(parameters, scale):
    with torch.no_grad():
        for p in parameters:
            p.copy_(torch.randn_like(p) * scale)


def write(name, config, ncsnpp, converter: Path, out: Path):
    torch.manual_seed(0)
    network = ncsnpp(**config)
    wrapped = Parallel(EDMDenoiser(network))
    randomised_(wrapped.parameters(), 0.2)
    shadow = [torch.randn_like(p) * 0.2 for p in wrapped.parameters()]  # the EMA differs from the live weights
    state = {"model": wrapped.state_dict(), "step": 7, "optimizer": {"state": {}, "param_groups": []},
             "ema": {"decay": 0.999, "num_updates": 7, "shadow_params": shadow}}
    folder = out / "dpdm" / name
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = Path(tmp) / "checkpoint.pth"
        torch.save(state, checkpoint)
        subprocess.run([sys.executable, str(converter), str(checkpoint), str(folder / "model.safetensors"), "--dpdm"],
                       check=True)
    with torch.no_grad():
        for p, s in zip(wrapped.parameters(), shadow):
            p.copy_(s)
    network.eval()
    size, channels = config["image_size"], config["num_in_channels"]
    x = torch.randn(3, channels, size, size)
    c_noise = torch.tensor([-1.5, 0.1, 1.1])  # 0.25 ln(sigma), as DPDM's EDM wrapper feeds it
    inputs = {"x": x, "c_noise": c_noise}
    labels = None
    if config["label_dim"] > 0:
        labels = torch.tensor([0, 2, config["label_dim"]])  # the last: the null class
        inputs["labels"] = labels
    with torch.no_grad():
        output = network(x, c_noise, labels)
    save_file({**inputs, "output": output.contiguous()}, str(folder / "reference.safetensors"))
    print(f"wrote {folder}: {sum(p.numel() for p in network.parameters())} parameters")


def main(checkout: Path, out: Path) -> None:
    ncsnpp = import_ncsnpp(checkout)
    converter = Path(__file__).resolve().parent.parent / "convert_to_safetensors.py"
    for name, config in NETWORKS.items():
        write(name, config, ncsnpp, converter, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
