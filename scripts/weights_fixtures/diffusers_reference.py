"""Writes tests/fixtures/weights/diffusers/<name>/: tiny random diffusers models saved as diffusers
saves them (config.json + diffusion_pytorch_model.safetensors) and reference.safetensors with inputs
and diffusers' own forward output, which privdiff's port must reproduce (within 1e-5 relative).
Each UNet also has a DDPMScheduler (scheduler/scheduler_config.json) and, in ddpm_*, the denoised
estimate x0 = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t) at noise the scheduler added: what
privdiff's "discrete" objective must give.
Every parameter is drawn at random (diffusers zero-initialises none of these, but the draw makes
every path carry signal).

unet2d_condition_*: tiny UNet2DConditionModels (Stable Diffusion's UNet) in SD 1.x's layout (1x1-conv
projections) and SD 2.x's (linear projections, heads and transformer blocks per level), given random
encoder_hidden_states. sd_tiny/: a StableDiffusionPipeline saved by diffusers (model_index.json, unet/,
vae/, text_encoder/ (transformers' CLIPTextModel), tokenizer/ (CLIP's first 3,000 merges, as
tests/fixtures/text/), scheduler/) and, in reference.safetensors, what its tokenizer, text encoder and UNet
give two prompts, as StableDiffusionPipeline computes them."""
import sys
from pathlib import Path

import torch
import json

from diffusers import AutoencoderKL, DDPMScheduler, StableDiffusionPipeline, UNet2DConditionModel, UNet2DModel
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

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

CONDITION_UNETS = {
    # SD 1.x's layout: cross-attention at the first level and in the middle, 1x1-conv projections
    "unet2d_condition_sd1": dict(sample_size=8, in_channels=4, out_channels=4, layers_per_block=1,
                                 block_out_channels=(8, 16), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), norm_num_groups=4,
                                 cross_attention_dim=32, attention_head_dim=2),
    # SD 2.x's: linear projections, heads and transformer blocks per level, two blocks a level, classes too
    "unet2d_condition_sd2": dict(sample_size=8, in_channels=4, out_channels=4, layers_per_block=2,
                                 block_out_channels=(8, 16, 16),
                                 down_block_types=("CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"),
                                 norm_num_groups=8, cross_attention_dim=24, attention_head_dim=(2, 4, 4),
                                 transformer_layers_per_block=(1, 2, 1), use_linear_projection=True, num_class_embeds=3),
}

TOKENIZER_MERGES = 3000  # of CLIP's, as tests/fixtures/text/clip_merges.txt
PROMPTS = ["a photo of a woman with blond hair", "This man is smiling, and wears eyeglasses!"]


def write_condition_unets(out: Path) -> None:
    for name, config in CONDITION_UNETS.items():
        torch.manual_seed(0)
        model = randomised(UNet2DConditionModel(**config))
        folder = out / "diffusers" / name
        model.save_pretrained(folder, safe_serialization=True)
        size = config["sample_size"]
        inputs = {"sample": torch.randn(3, 4, size, size), "timestep": torch.tensor([3.0, 250.0, 999.0]),
                  "encoder_hidden_states": torch.randn(3, 5, config["cross_attention_dim"])}
        labels = torch.tensor([0, 2, 1]) if config.get("num_class_embeds") else None
        if labels is not None:
            inputs["class_labels"] = labels
        with torch.no_grad():
            output = model(inputs["sample"], inputs["timestep"], inputs["encoder_hidden_states"], class_labels=labels).sample
        save_file({**inputs, "output": output.contiguous()}, str(folder / "reference.safetensors"))
        print(f"wrote {folder}: {sum(p.numel() for p in model.parameters())} parameters")


def clip_vocabulary(merges_file: Path) -> list:
    """CLIP's vocabulary in open_clip's order: the byte units, each with </w>, the merges, the two specials."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "text_fixtures"))
    from tokenizer_reference import bytes_to_unicode  # the tokenizer fixtures' own, in open_clip's order
    units = bytes_to_unicode()
    merges = merges_file.read_text(encoding="utf-8").split("\n")[1:1 + TOKENIZER_MERGES]
    return units + [u + "</w>" for u in units] + ["".join(m.split()) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]


def write_sd_pipeline(out: Path, text_fixtures: Path) -> None:
    folder = out / "diffusers" / "sd_tiny"
    scratch = folder / "tokenizer-source"
    scratch.mkdir(parents=True, exist_ok=True)
    vocab = clip_vocabulary(text_fixtures / "clip_merges.txt")
    (scratch / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}, ensure_ascii=False), encoding="utf-8")
    (scratch / "merges.txt").write_text((text_fixtures / "clip_merges.txt").read_text(encoding="utf-8"), encoding="utf-8")
    merges = (text_fixtures / "clip_merges.txt").read_text(encoding="utf-8").split("\n")[1:1 + TOKENIZER_MERGES]
    tokenizer = CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges],
                              model_max_length=77)  # transformers 5 takes the vocabulary itself, not its file
    torch.manual_seed(1)  # SD 1.x's text encoder config: quick_gelu, the legacy eos rule (eos_token_id 2)
    text_encoder = randomised(CLIPTextModel(CLIPTextConfig(
        vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        max_position_embeddings=77, hidden_act="quick_gelu", bos_token_id=0, eos_token_id=2, pad_token_id=1,
        attn_implementation="eager")))
    torch.manual_seed(2)
    unet = randomised(UNet2DConditionModel(**{**CONDITION_UNETS["unet2d_condition_sd1"], "sample_size": 8}))
    torch.manual_seed(3)
    vae = randomised(AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16),
                                   down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                                   layers_per_block=1, norm_num_groups=4, sample_size=16))
    scheduler = DDPMScheduler(beta_schedule="scaled_linear", beta_start=0.00085, beta_end=0.012)
    pipeline = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                       scheduler=scheduler, safety_checker=None, feature_extractor=None,
                                       requires_safety_checker=False)
    pipeline.save_pretrained(folder, safe_serialization=True)
    for f in scratch.iterdir():  # transformers 5 saves tokenizer.json only; SD checkpoints also hold these two
        f.replace(folder / "tokenizer" / f.name)
    scratch.rmdir()
    # What StableDiffusionPipeline.encode_prompt and one denoising step compute, for two prompts.
    ids = tokenizer(PROMPTS, padding="max_length", max_length=tokenizer.model_max_length, truncation=True,
                    return_tensors="pt").input_ids
    latents, timestep = torch.randn(2, 4, 8, 8), torch.tensor([10.0, 700.0])
    with torch.no_grad():
        hidden = text_encoder(ids)[0]
        eps = unet(latents, timestep, encoder_hidden_states=hidden).sample
    save_file({"ids": ids, "hidden": hidden.contiguous(), "latents": latents, "timestep": timestep, "eps": eps.contiguous()},
              str(folder / "reference.safetensors"))
    (folder / "prompts.txt").write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    print(f"wrote {folder}: a StableDiffusionPipeline, {sum(p.numel() for p in unet.parameters())} UNet parameters")


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
    write_condition_unets(out)
    write_sd_pipeline(out, out.parent / "text")
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
