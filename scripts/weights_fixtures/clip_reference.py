"""Writes tests/fixtures/weights/clip/clip_tiny/: a tiny random CLIPModel saved by transformers
(config.json, model.safetensors) with CLIP's first 3,000 merges as its tokenizer (merges.txt, vocab.json,
as tests/fixtures/text/), and reference.safetensors: what transformers gives, which privdiff's port
(sdk/src/text_encoders/clip_model.cpp) and the clip_score evaluator are checked against
(tests/sdk/text_encoders/clip_model_test.cpp):
  pixel_values, image_embeds   CLIPModel's normalised image embeddings of random pixel values
  ids, text_embeds             its normalised text embeddings of the prompts in prompts.txt
  images, processed            8-bit RGB images (as [-1, 1] floats) and CLIPImageProcessor's pixel values
  image_text_cosines           cos(image i, prompt j) of those images processed so, CLIPModel's
  clip_score                   torchmetrics' CLIP score of image i with prompt i: 100 max(cos, 0), averaged

Usage: clip_reference.py OUT_DIR (tests/fixtures/weights)"""
import json
import sys
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diffusers_reference import PROMPTS, TOKENIZER_MERGES, clip_vocabulary, randomised  # noqa: E402

SIZE = 16


def main(out: Path) -> None:
    folder = out / "clip" / "clip_tiny"
    folder.mkdir(parents=True, exist_ok=True)
    text_fixtures = out.parent / "text"
    vocab = clip_vocabulary(text_fixtures / "clip_merges.txt")
    merges = (text_fixtures / "clip_merges.txt").read_text(encoding="utf-8").split("\n")[1:1 + TOKENIZER_MERGES]
    tokenizer = CLIPTokenizer(vocab={t: i for i, t in enumerate(vocab)}, merges=[tuple(m.split()) for m in merges],
                              model_max_length=77)
    config = CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=77, eos_token_id=len(vocab) - 1,
                         bos_token_id=len(vocab) - 2, pad_token_id=len(vocab) - 1),
        vision_config=dict(hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=3,
                           image_size=SIZE, patch_size=4, hidden_act="gelu"),
        projection_dim=20)
    torch.manual_seed(5)
    model = randomised(CLIPModel(config).eval())
    model.config._attn_implementation = "eager"
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text((text_fixtures / "clip_merges.txt").read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "prompts.txt").write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    ids = tokenizer(PROMPTS, padding="max_length", max_length=77, truncation=True, return_tensors="pt").input_ids
    pixel_values = torch.randn(3, 3, SIZE, SIZE)
    with torch.no_grad():
        outputs = model(input_ids=ids, pixel_values=pixel_values[:2])
        image_embeds = model(input_ids=ids[:1].expand(3, -1), pixel_values=pixel_values).image_embeds
    # CLIPImageProcessor on 8-bit images of another size: resize the shorter side, centre crop, normalise.
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=(2, 20, 28, 3), dtype=np.uint8)
    processor = CLIPImageProcessor(size={"shortest_edge": SIZE}, crop_size={"height": SIZE, "width": SIZE})
    processed = processor(images=list(raw), return_tensors="pt").pixel_values
    images = torch.from_numpy(raw).permute(0, 3, 1, 2).float() / 127.5 - 1
    with torch.no_grad():
        both = model(input_ids=ids, pixel_values=processed)
    cosines = both.image_embeds @ both.text_embeds.t()
    clip_score = (100 * cosines.diagonal().clamp(min=0)).mean()
    save_file({"pixel_values": pixel_values, "image_embeds": image_embeds.contiguous(), "ids": ids,
               "text_embeds": outputs.text_embeds.contiguous(), "images": images.contiguous(),
               "processed": processed.contiguous(), "image_text_cosines": cosines.contiguous(),
               "clip_score": clip_score.reshape(1)}, str(folder / "reference.safetensors"))
    print("cosines", cosines.tolist(), "clip_score", clip_score.item())
    print(f"wrote {folder}: {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
