"""Writes tests/fixtures/weights/compvis/<name>/: tiny random latent diffusion models built by
CompVis's own code (github.com/CompVis/latent-diffusion, the commit DP-LDM forks; run from a
checkout, never copied here): its UNetModel and KL autoencoder (Encoder, Decoder and the quant
convolutions of ldm.models.autoencoder.AutoencoderKL), with the ClassEmbedder and the noise schedule
LatentDiffusion keeps. Each is saved as LatentDiffusion's checkpoints are (one state_dict, with its
config as a YAML file beside it, as DP-LDM ships them) and converted by
scripts/convert_to_safetensors.py --ldm-config exactly as a user converts a published one.
reference.safetensors holds inputs and CompVis's outputs, which privdiff's ports must reproduce
within 1e-5 relative.

    python compvis_reference.py COMPVIS_CHECKOUT OUT_DIR"""
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

MODELS = {
    # DP-LDM's EMNIST layout shrunk: scale-shift norm, residual up/down-sampling, SpatialTransformers
    # attending to a class embedding, attention in the autoencoder's levels
    "ldm_dpldm": dict(
        unet=dict(image_size=4, in_channels=3, out_channels=3, model_channels=32, attention_resolutions=[1, 2],
                  num_res_blocks=1, channel_mult=[1, 1], num_heads=2, use_spatial_transformer=True,
                  transformer_depth=1, use_scale_shift_norm=True, resblock_updown=True, context_dim=5),
        first_stage=dict(embed_dim=3, ddconfig=dict(double_z=True, z_channels=3, resolution=8, in_channels=3, out_ch=3,
                                                    ch=32, ch_mult=[1, 1], num_res_blocks=1, attn_resolutions=[8],
                                                    dropout=0.0)),
        classes=4, linear_start=0.0015, linear_end=0.0155, timesteps=1000, scale_factor=0.7),
    # the unconditional kind (DP-LDM's CelebA 32): the legacy attention blocks, heads by channel
    # count, convolutional resampling, two levels of attention, no autoencoder attention
    "ldm_unconditional": dict(
        unet=dict(image_size=8, in_channels=4, out_channels=4, model_channels=32, attention_resolutions=[2, 4],
                  num_res_blocks=2, channel_mult=[1, 1, 1], num_head_channels=16),
        first_stage=dict(embed_dim=4, ddconfig=dict(double_z=True, z_channels=4, resolution=16, in_channels=1, out_ch=1,
                                                    ch=32, ch_mult=[1, 1], num_res_blocks=1, attn_resolutions=[],
                                                    dropout=0.0)),
        classes=0, linear_start=0.0015, linear_end=0.0195, timesteps=1000, scale_factor=1.0),
}


def import_ldm(checkout: Path):
    """CompVis's ldm package without what its network code never calls: ldm.util's caption drawing
    (PIL), the text encoders beside the ClassEmbedder (clip, kornia) and omegaconf."""
    pil = types.ModuleType("PIL")
    for name in ("Image", "ImageDraw", "ImageFont"):
        setattr(pil, name, None)
    sys.modules["PIL"] = pil
    sys.modules["clip"] = types.ModuleType("clip")
    sys.modules["kornia"] = types.ModuleType("kornia")
    listconfig = types.ModuleType("omegaconf.listconfig")  # UNetModel only checks context_dim's type
    listconfig.ListConfig = type("ListConfig", (), {})
    sys.modules["omegaconf"] = types.ModuleType("omegaconf")
    sys.modules["omegaconf.listconfig"] = listconfig
    sys.path.insert(0, str(checkout))
    from ldm.modules.diffusionmodules.model import Decoder, Encoder
    from ldm.modules.diffusionmodules.openaimodel import UNetModel
    from ldm.modules.diffusionmodules.util import make_beta_schedule
    from ldm.modules.encoders.modules import ClassEmbedder
    return UNetModel, Encoder, Decoder, make_beta_schedule, ClassEmbedder


class KLAutoencoder(torch.nn.Module):
    """ldm.models.autoencoder.AutoencoderKL's network without PyTorch Lightning: the same modules
    under the same names, encode and decode as it defines them."""

    def __init__(self, Encoder, Decoder, embed_dim, ddconfig):
        super().__init__()
        self.encoder = Encoder(**ddconfig)
        self.decoder = Decoder(**ddconfig)
        self.quant_conv = torch.nn.Conv2d(2 * ddconfig["z_channels"], 2 * embed_dim, 1)
        self.post_quant_conv = torch.nn.Conv2d(embed_dim, ddconfig["z_channels"], 1)

    def encode(self, x):
        mean, logvar = torch.chunk(self.quant_conv(self.encoder(x)), 2, dim=1)
        return mean, torch.clamp(logvar, -30.0, 20.0)  # DiagonalGaussianDistribution's

    def decode(self, z):
        return self.decoder(self.post_quant_conv(z))


def config_yaml(spec):
    """The config as DP-LDM's configs/latent-diffusion/*.yaml give it."""
    params = dict(linear_start=spec["linear_start"], linear_end=spec["linear_end"], timesteps=spec["timesteps"],
                  scale_factor=spec["scale_factor"], image_size=spec["unet"]["image_size"],
                  channels=spec["unet"]["in_channels"],
                  unet_config=dict(target="ldm.modules.diffusionmodules.openaimodel.UNetModel", params=spec["unet"]),
                  first_stage_config=dict(target="ldm.models.autoencoder.AutoencoderKL", params=spec["first_stage"]))
    if spec["classes"]:
        params.update(conditioning_key="crossattn", cond_stage_key="class_label", cond_stage_trainable=True,
                      cond_stage_config=dict(target="ldm.modules.encoders.modules.ClassEmbedder",
                                             params=dict(n_classes=spec["classes"],
                                                         embed_dim=spec["unet"]["context_dim"], key="class_label")))
    return {"model": {"target": "ldm.models.diffusion.ddpm.LatentDiffusion", "params": params}}


def randomised_(module, scale=0.2):
    """Random weights that half precision holds exactly: the checkpoint stores them as F16 (a
    published checkpoint's common dtype, and half the fixture's size) while the reference runs in F32."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.randn_like(p) * scale).half().float())


def half(state):
    return {k: v.half() for k, v in state.items()}


def write(name, spec, ldm, converter: Path, out: Path):
    UNetModel, Encoder, Decoder, make_beta_schedule, ClassEmbedder = ldm
    torch.manual_seed(0)
    unet = UNetModel(**spec["unet"]).eval()
    autoencoder = KLAutoencoder(Encoder, Decoder, **spec["first_stage"]).eval()
    randomised_(unet)
    randomised_(autoencoder)
    state = {f"model.diffusion_model.{k}": v for k, v in half(unet.state_dict()).items()}
    state.update({f"first_stage_model.{k}": v for k, v in half(autoencoder.state_dict()).items()})
    embedder = None
    if spec["classes"]:
        embedder = ClassEmbedder(spec["unet"]["context_dim"], spec["classes"], key="class_label")
        randomised_(embedder, 1.0)
        state.update({f"cond_stage_model.{k}": v for k, v in half(embedder.state_dict()).items()})
    # What LatentDiffusion.register_schedule keeps (privdiff reads alphas_cumprod and scale_factor).
    betas = torch.tensor(make_beta_schedule("linear", spec["timesteps"], spec["linear_start"], spec["linear_end"]),
                         dtype=torch.float32)
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    state.update(betas=betas, alphas_cumprod=alphas_cumprod, sqrt_alphas_cumprod=alphas_cumprod.sqrt(),
                 scale_factor=torch.tensor(spec["scale_factor"]))
    folder = out / "compvis" / name
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint, config = Path(tmp) / "model.ckpt", Path(tmp) / "config.yaml"
        torch.save({"state_dict": state, "global_step": 7}, checkpoint)
        config.write_text(yaml.safe_dump(config_yaml(spec)))
        subprocess.run([sys.executable, str(converter), str(checkpoint), str(folder / "model.safetensors"),
                        "--key", "state_dict", "--ldm-config", str(config)], check=True)
    u = spec["unet"]
    x = torch.randn(3, u["in_channels"], u["image_size"], u["image_size"])
    timesteps = torch.tensor([3.0, 250.0, 999.0])
    inputs = {"unet_x": x, "unet_t": timesteps}
    context = None
    if embedder is not None:
        labels = torch.tensor([0, 3, 1])
        inputs["labels"] = labels
        with torch.no_grad():
            context = embedder({"class_label": labels})
        inputs["context"] = context.contiguous()
    d = spec["first_stage"]["ddconfig"]
    images = torch.randn(2, d["in_channels"], d["resolution"], d["resolution"])
    factor = 2 ** (len(d["ch_mult"]) - 1)
    latents = torch.randn(2, spec["first_stage"]["embed_dim"], d["resolution"] // factor, d["resolution"] // factor)
    with torch.no_grad():
        output = unet(x, timesteps, context=context)
        mean, logvar = autoencoder.encode(images)
        decoded = autoencoder.decode(latents)
    save_file({**inputs, "unet_output": output.contiguous(), "images": images, "mean": mean.contiguous(),
               "logvar": logvar.contiguous(), "latents": latents, "decoded": decoded.contiguous()},
              str(folder / "reference.safetensors"))
    print(f"wrote {folder}: {len(state)} tensors")


def main(checkout: Path, out: Path) -> None:
    ldm = import_ldm(checkout)
    converter = Path(__file__).resolve().parent.parent / "convert_to_safetensors.py"
    for name, spec in MODELS.items():
        write(name, spec, ldm, converter, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
