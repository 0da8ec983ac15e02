"""Writes tests/fixtures/text/clip_text_*/: tiny random CLIPTextModels saved by transformers (config.json,
model.safetensors) and reference.safetensors, the ids they were given and what they returned, which
privdiff's port (sdk/src/text_encoders/clip_text_model.cpp) is checked against
(tests/sdk/text_encoders/clip_text_model_test.cpp).

  clip_text_sd1: SD 1.x's layout (quick_gelu, the legacy eos rule: the highest id is <|endoftext|>)
  clip_text_sd2: SD 2.x's (gelu, eos_token_id given: its first position)
and compvis_bert/: CompVis's BERTEmbedder transformer (TransformerWrapper over x-transformers' Encoder, as
ldm/modules/encoders/modules.py builds it) made by CompVis's own code at COMPVIS_SRC, its state dict as
model.safetensors under the names a checkpoint's cond_stage_model.* has, and reference.safetensors.

Usage: text_encoder_reference.py OUT_DIR COMPVIS_SRC
"""
import os
import sys

import torch
from safetensors.torch import save_file
from transformers import CLIPTextConfig, CLIPTextModel

VOCAB, POSITIONS = 120, 16


def make(out, name, hidden_act, eos_token_id, seed):
    torch.manual_seed(seed)
    config = CLIPTextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                            num_attention_heads=4, max_position_embeddings=POSITIONS, hidden_act=hidden_act,
                            eos_token_id=eos_token_id, bos_token_id=VOCAB - 2, pad_token_id=1,
                            attn_implementation="eager")
    model = CLIPTextModel(config).eval()
    with torch.no_grad():  # LayerNorms start at 1 and 0: move them so that a mix-up of the two shows
        for pname, p in model.named_parameters():
            if "layer_norm" in pname:
                p.add_(0.2 * torch.randn_like(p))
    folder = os.path.join(out, name)
    model.save_pretrained(folder, safe_serialization=True)
    eos = VOCAB - 1 if eos_token_id == 2 else eos_token_id
    ids = torch.randint(0, VOCAB - 2, (3, POSITIONS))
    ids[:, 0] = VOCAB - 2
    lengths = [5, 11, POSITIONS]
    mask = torch.zeros(3, POSITIONS, dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, length - 1] = eos
        ids[row, length:] = eos if eos_token_id == 2 else 1  # SD 1.x pads with <|endoftext|>
        mask[row, :length] = 1
    with torch.no_grad():
        plain = model(input_ids=ids)
        masked = model(input_ids=ids, attention_mask=mask)
    save_file({"ids": ids, "mask": mask, "last_hidden_state": plain.last_hidden_state.contiguous(),
               "pooled": plain.pooler_output.contiguous(), "masked_last_hidden_state": masked.last_hidden_state.contiguous(),
               "masked_pooled": masked.pooler_output.contiguous()}, os.path.join(folder, "reference.safetensors"))


def make_compvis_bert(out, compvis_src):
    """BERTEmbedder(n_embed=32, n_layer=2, vocab_size=VOCAB, max_seq_len=POSITIONS)'s transformer, random."""
    sys.path.insert(0, compvis_src)
    from ldm.modules.x_transformer import Encoder, TransformerWrapper

    torch.manual_seed(3)
    transformer = TransformerWrapper(num_tokens=VOCAB, max_seq_len=POSITIONS,
                                     attn_layers=Encoder(dim=32, depth=2)).eval()
    with torch.no_grad():  # LayerNorms at 1 and 0 would hide a mix-up of weight and bias
        for name, p in transformer.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn_like(p))
    folder = os.path.join(out, "compvis_bert")
    os.makedirs(folder, exist_ok=True)
    save_file({"transformer." + k: v.contiguous() for k, v in transformer.state_dict().items()},
              os.path.join(folder, "model.safetensors"))
    ids = torch.randint(0, VOCAB, (3, POSITIONS))
    with torch.no_grad():
        embeddings = transformer(ids, return_embeddings=True)  # BERTEmbedder.forward on tokens
    save_file({"ids": ids, "embeddings": embeddings.contiguous()}, os.path.join(folder, "reference.safetensors"))


def main():
    out, compvis_src = sys.argv[1], sys.argv[2]
    make(out, "clip_text_sd1", "quick_gelu", 2, seed=1)
    make(out, "clip_text_sd2", "gelu", VOCAB - 1, seed=2)
    make_compvis_bert(out, compvis_src)
    print(f"CLIPTextModel and BERTEmbedder fixtures in {out} (torch {torch.__version__})")


if __name__ == "__main__":
    main()
