#!/usr/bin/env python3
"""FLUX.2 [klein]'s text conditioning on a tiny Qwen3, for gizml::diffusion::KleinText and
convertTextEncoder (tests/diffusion/klein_text_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_klein_text_fixtures.py
(torch, transformers 5, diffusers 0.42, safetensors). Deterministic.

The reference is diffusers' own Flux2KleinPipeline._get_qwen3_prompt_embeds (a static method,
called here with the tiny encoder and Qwen3's real tokenizer, ../shared/data/tokenizers/qwen3):
apply_chat_template(enable_thinking=False), padding="max_length" to 512 with <|endoftext|> on the
right, the attention mask of the real tokens, and hidden_states 9, 18 and 27 side by side. The
script checks that ComfyUI's way (comfy/text_encoders/flux.py: KleinTokenizer's template string
tokenized whole, padded to min_length 512 with 151643, sd1_clip's mask ending at the first
151643) gives the same ids and mask for these prompts (both under 512 tokens: past that diffusers
truncates and ComfyUI does not).

The tiny encoder is a Qwen3 of 28 layers (so that states 9, 18 and 27 exist and the last layer is
left out), hidden 16, 2 heads of 8, 1 KV head, tied embedding, over the real tokenizer's
vocabulary (151,936 rows); only the embedding rows the prompts and the padding use are random,
the rest zero, and the committed file holds those rows alone (the test writes the Hugging Face
folder back, as tests/diffusion/zimage_tiny.h writeTextHf does for Z-Image's encoder).

Writes into tests/data/diffusion/:
- klein_text_tiny/config.json: the encoder's config (Qwen3ForCausalLM).
- klein_text_tiny/weights.safetensors: its tensors in Hugging Face's names but the embedding,
  BF16; "embed_ids" I64 [K] and "embed_rows" BF16 [K, 16]: the embedding's non-zero rows.
- klein_text_case.safetensors: per prompt i (PROMPTS): "tokens_i" I64 [T] (the template's ids,
  unpadded), "mask_i" I64 [512], "text_i" F32 [512, 48] (diffusers' prompt_embeds[0]).
"""
import os
import sys

import torch
import transformers as tf
from diffusers.pipelines.flux2.pipeline_flux2_klein import Flux2KleinPipeline
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_zimage_pipeline_fixtures as zimage  # noqa: E402
OUT = os.path.join(HERE, "..", "data", "diffusion")
COMFY_TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
PAD, LENGTH, LAYERS = 151643, 512, (9, 18, 27)
PROMPTS = ["A red fox in fresh snow, watercolor",
           "Ein Leuchtturm bei Nacht, 35 mm film grain; «neon» signs reading 'OPEN 24/7'"]
CONFIG = dict(vocab_size=151936, hidden_size=16, intermediate_size=32, num_hidden_layers=28,
              num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=1024,
              rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
              tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)


def comfy_ids(tok, prompt):
    """ComfyUI's tokens and mask: the template whole, padded to 512, the mask ending at the first pad."""
    ids = tok(COMFY_TEMPLATE.format(prompt), add_special_tokens=False)["input_ids"]
    ids = ids + [PAD] * max(0, LENGTH - len(ids))
    end = ids.index(PAD) if PAD in ids else len(ids)
    return ids, [1] * end + [0] * (len(ids) - end)


def main():
    tok = tf.AutoTokenizer.from_pretrained(zimage.TOKENIZER)
    assert tok.pad_token_id == PAD and tok.padding_side == "right"
    used = sorted({PAD} | {t for p in PROMPTS for t in comfy_ids(tok, p)[0]})
    model = zimage.text_encoder(used, torch.Generator().manual_seed(37), CONFIG)
    zimage.save_text_encoder(model, used, os.path.join(OUT, "klein_text_tiny"))

    case = {}
    for i, prompt in enumerate(PROMPTS):
        text = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
        inputs = tok(text, padding="max_length", truncation=True, max_length=LENGTH)
        ids, mask = comfy_ids(tok, prompt)
        assert text == COMFY_TEMPLATE.format(prompt), text
        assert inputs["input_ids"] == ids and inputs["attention_mask"] == mask
        with torch.no_grad():
            embeds = Flux2KleinPipeline._get_qwen3_prompt_embeds(
                model, tok, prompt, dtype=torch.float32, device=torch.device("cpu"), max_sequence_length=LENGTH,
                hidden_states_layers=LAYERS)
        assert embeds.shape == (1, LENGTH, 3 * CONFIG["hidden_size"]), embeds.shape
        real = sum(mask)
        case[f"tokens_{i}"] = torch.tensor(ids[:real], dtype=torch.int64)
        case[f"mask_{i}"] = torch.tensor(mask, dtype=torch.int64)
        case[f"text_{i}"] = embeds[0].float().contiguous()
        print(f"prompt {i}: {real} tokens, states absmax {embeds.abs().max().item():.3g}, "
              f"padding rows absmax {embeds[0, real:].abs().max().item():.3g}")
    save_file(case, os.path.join(OUT, "klein_text_case.safetensors"))


if __name__ == "__main__":
    main()
