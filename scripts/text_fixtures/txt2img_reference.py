"""Writes tests/fixtures/text/compvis_txt2img/: a tiny random text-to-image latent diffusion model in
the layout of CompVis's txt2img-1p4B (DP-LDM's text-to-image row) built by CompVis's own code at the
commit DP-LDM forks: its UNetModel with SpatialTransformers attending to the caption, the KL
autoencoder, and the BERTEmbedder (cond_stage_model.transformer: TransformerWrapper over x-transformers'
Encoder) under conditioning_key crossattn. Saved as LatentDiffusion's checkpoints are (a state_dict and
its YAML) and converted by scripts/convert_to_safetensors.py --ldm-config, as a user converts one.
reference.safetensors holds the captions (metadata), their ids by HF's BertTokenizerFast on the
fixture vocabulary as CompVis's BERTTokenizer calls it (padding to 77), the context BERTEmbedder makes
of them, and the UNet's output for noisy latents at three timesteps.

    python txt2img_reference.py OUT_DIR COMPVIS_CHECKOUT"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file
from transformers import BertTokenizerFast

root = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(root / "scripts" / "weights_fixtures"))
import compvis_reference as cv  # noqa: E402  (its LDM import and helpers)

CAPTIONS = ["The woman has wavy hair and high cheekbones.", "a photo of the sneaker.", ""]
UNET = dict(image_size=4, in_channels=3, out_channels=3, model_channels=32, attention_resolutions=[1, 2],
            num_res_blocks=1, channel_mult=[1, 1], num_heads=2, use_spatial_transformer=True, transformer_depth=1,
            context_dim=32)
FIRST_STAGE = dict(embed_dim=3, ddconfig=dict(double_z=True, z_channels=3, resolution=8, in_channels=3, out_ch=3,
                                              ch=32, ch_mult=[1, 1], num_res_blocks=1, attn_resolutions=[],
                                              dropout=0.0))


def main(out: Path, checkout: Path) -> None:
    UNetModel, Encoder, Decoder, make_beta_schedule, _ = cv.import_ldm(checkout)
    from ldm.modules.x_transformer import Encoder as XEncoder, TransformerWrapper
    vocab = out / "bert_vocab.txt"
    vocab_size = sum(1 for _ in vocab.open())
    torch.manual_seed(5)
    unet = UNetModel(**UNET).eval()
    autoencoder = cv.KLAutoencoder(Encoder, Decoder, **FIRST_STAGE).eval()
    # BERTEmbedder(n_embed=32, n_layer=2, vocab_size, max_seq_len=77).transformer
    bert = TransformerWrapper(num_tokens=vocab_size, max_seq_len=77, attn_layers=XEncoder(dim=32, depth=2)).eval()
    for m in (unet, autoencoder, bert):
        cv.randomised_(m)
    state = {f"model.diffusion_model.{k}": v for k, v in cv.half(unet.state_dict()).items()}
    state.update({f"first_stage_model.{k}": v for k, v in cv.half(autoencoder.state_dict()).items()})
    state.update({f"cond_stage_model.transformer.{k}": v for k, v in cv.half(bert.state_dict()).items()})
    betas = torch.tensor(make_beta_schedule("linear", 1000, 0.00085, 0.012), dtype=torch.float32)
    alphas_cumprod = torch.cumprod(1 - betas, 0)
    state.update(betas=betas, alphas_cumprod=alphas_cumprod, scale_factor=torch.tensor(0.18215))
    params = dict(linear_start=0.00085, linear_end=0.012, timesteps=1000, scale_factor=0.18215, image_size=4,
                  channels=3, conditioning_key="crossattn", cond_stage_key="caption", cond_stage_trainable=True,
                  unet_config=dict(target="ldm.modules.diffusionmodules.openaimodel.UNetModel", params=UNET),
                  first_stage_config=dict(target="ldm.models.autoencoder.AutoencoderKL", params=FIRST_STAGE),
                  cond_stage_config=dict(target="ldm.modules.encoders.modules.BERTEmbedder",
                                         params=dict(n_embed=32, n_layer=2, vocab_size=vocab_size)))
    folder = out / "compvis_txt2img"
    folder.mkdir(parents=True, exist_ok=True)
    converter = root / "scripts" / "convert_to_safetensors.py"
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint, config = Path(tmp) / "model.ckpt", Path(tmp) / "config.yaml"
        torch.save({"state_dict": state}, checkpoint)
        config.write_text(yaml.safe_dump({"model": {"target": "ldm.models.diffusion.ddpm.LatentDiffusion",
                                                    "params": params}}))
        subprocess.run([sys.executable, str(converter), str(checkpoint), str(folder / "model.safetensors"),
                        "--key", "state_dict", "--ldm-config", str(config)], check=True)
    # CompVis's BERTTokenizer: truncation, max_length 77, padding "max_length", input_ids.
    tokenizer = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    ids = tokenizer(CAPTIONS, truncation=True, max_length=77, padding="max_length", return_tensors="pt")["input_ids"]
    x = torch.randn(3, 3, 4, 4)
    timesteps = torch.tensor([3.0, 250.0, 999.0])
    with torch.no_grad():
        context = bert(ids, return_embeddings=True)  # BERTEmbedder.forward
        output = unet(x, timesteps, context=context)
    save_file({"ids": ids, "context": context.contiguous(), "unet_x": x, "unet_t": timesteps,
               "unet_output": output.contiguous()}, str(folder / "reference.safetensors"),
              metadata={"captions": json.dumps(CAPTIONS)})
    print(f"wrote {folder} (torch {torch.__version__})")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
