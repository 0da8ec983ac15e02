"""Writes tests/fixtures/weights/diffusers/<name>/: tiny random diffusers models saved as diffusers
saves them (config.json + diffusion_pytorch_model.safetensors) and reference.safetensors with inputs
and diffusers' own forward output, which privdiff's port must reproduce (within 1e-5 relative).
Each UNet also has a DDPMScheduler (scheduler/scheduler_config.json) and, in ddpm_*, the denoised
estimate x0 = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t) at noise the scheduler added: what
privdiff's "discrete" objective must give.
Every parameter is drawn at random (diffusers zero-initialises none of these, but the draw makes
every path carry signal)."""
import sys
from pathlib import Path

import torch
from diffusers import AutoencoderKL, DDPMScheduler, UNet2DModel
from safetensors.torch import save_file

SCHEDULERS = {"unet2d_classes": dict(),  # DDPMScheduler's defaults: linear betas 1e-4 .. 0.02, 1000 steps
              "unet2d_two_attention": dict(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012)}

UNETS = {
    # attention at the second resolution and in the middle, class-conditional
    "unet2d_classes": dict(sample_size=8, in_channels=1, out_channels=1, layers_per_block=1,
                           block_out_channels=(8, 16), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                           up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=4,
                           attention_head_dim=4, num_class_embeds=3),
    # attention at two resolutions, two residual blocks per level, three channels, no labels
    "unet2d_two_attention": dict(sample_size=8, in_channels=3, out_channels=3, layers_per_block=2,
                                 block_out_channels=(8, 16, 16),
                                 down_block_types=("DownBlock2D", "AttnDownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "AttnUpBlock2D", "UpBlock2D"),
                                 norm_num_groups=8, attention_head_dim=8, norm_eps=1e-6),
}


AUTOENCODERS = {
    # two levels, one block each, one channel, mid attention (latent diffusion's layout, tiny)
    "autoencoder_kl_small": dict(in_channels=1, out_channels=1, latent_channels=2, block_out_channels=(8, 16),
                                 down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                                 layers_per_block=1, norm_num_groups=4, sample_size=8),
    # three levels, two blocks each, three channels, without the quant convolutions
    "autoencoder_kl_three_levels": dict(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16, 16),
                                        down_block_types=("DownEncoderBlock2D",) * 3,
                                        up_block_types=("UpDecoderBlock2D",) * 3, layers_per_block=2,
                                        norm_num_groups=8, sample_size=16, use_quant_conv=False,
                                        use_post_quant_conv=False),
}


def randomised(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return model.eval()


def write_autoencoders(out: Path) -> None:
    for name, config in AUTOENCODERS.items():
        torch.manual_seed(0)
        model = randomised(AutoencoderKL(**config))
        folder = out / "diffusers" / name
        model.save_pretrained(folder, safe_serialization=True)
        size, factor = config["sample_size"], 2 ** (len(config["block_out_channels"]) - 1)
        images = torch.randn(2, config["in_channels"], size, size)
        latents = torch.randn(2, config["latent_channels"], size // factor, size // factor)
        with torch.no_grad():
            posterior = model.encode(images).latent_dist
            decoded = model.decode(latents).sample
        save_file({"images": images, "mean": posterior.mean.contiguous(), "logvar": posterior.logvar.contiguous(),
                   "latents": latents, "decoded": decoded.contiguous()}, str(folder / "reference.safetensors"))
        print(f"wrote {folder}: {sum(p.numel() for p in model.parameters())} parameters")


def main(out: Path) -> None:
    write_autoencoders(out)
    for name, config in UNETS.items():
        torch.manual_seed(0)
        model = UNet2DModel(**config).eval()
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn_like(p) * 0.2)
        folder = out / "diffusers" / name
        model.save_pretrained(folder, safe_serialization=True)
        channels, size = config["in_channels"], config["sample_size"]
        sample = torch.randn(3, channels, size, size)
        timestep = torch.tensor([3.0, 250.0, 999.0])
        inputs = {"sample": sample, "timestep": timestep}
        labels = None
        if config.get("num_class_embeds"):
            labels = torch.tensor([0, 2, 1])
            inputs["class_labels"] = labels
        scheduler = DDPMScheduler(**SCHEDULERS[name])
        scheduler.save_config(folder / "scheduler")
        x0, noise, steps = torch.randn_like(sample), torch.randn_like(sample), torch.tensor([3, 250, 999])
        noisy = scheduler.add_noise(x0, noise, steps)
        abar = scheduler.alphas_cumprod[steps].reshape(-1, 1, 1, 1)
        with torch.no_grad():
            output = model(sample, timestep, class_labels=labels).sample
            eps = model(noisy, steps, class_labels=labels).sample
        x0_pred = (noisy - (1 - abar).sqrt() * eps) / abar.sqrt()
        save_file({**inputs, "output": output.contiguous(), "ddpm_x0": x0, "ddpm_noise": noise, "ddpm_t": steps,
                   "ddpm_x0_pred": x0_pred.contiguous(), "alphas_cumprod": scheduler.alphas_cumprod.contiguous()},
                  str(folder / "reference.safetensors"))
        print(f"wrote {folder}: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
