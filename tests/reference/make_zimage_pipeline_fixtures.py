#!/usr/bin/env python3
"""The whole Z-Image pipeline on tiny models, for gizml::diffusion::ZImagePipeline and
convertZImageText (tests/diffusion/z_image_pipeline_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_zimage_pipeline_fixtures.py
(torch, transformers 5, diffusers, safetensors, numpy, Pillow). Deterministic.

The stages, as ComfyUI runs Z-Image Turbo (cfg 1, one prompt):
- text: the prompt in ComfyUI's template (comfy/text_encoders/z_image.py ZImageTokenizer:
  "<|im_start|>user\\n{}<|im_end|>\\n<|im_start|>assistant\\n", which is diffusers'
  apply_chat_template(enable_thinking=True) too), tokenized whole by Qwen3's real tokenizer
  (../shared/data/tokenizers/qwen3; no padding is kept: ComfyUI pads nothing, diffusers drops
  the padded rows by the attention mask), then transformers' Qwen3 hidden_states[-2] (the
  residual after all but the last layer, no final norm; ComfyUI's layer_idx -2).
- noise: torch.randn([1, 16, h/8, w/8], generator=torch.manual_seed(seed)) (comfy/sample.py).
- sampling: flow_sigmas(8, 3.0) and res_multistep transcribed in make_sampler_fixtures.py, the
  denoiser ComfyUI's: out = -diffusers ZImageTransformer2DModel(x, 1 - sigma, text) (the tiny DiT
  of make_dit_fixtures.py, rebuilt from its seed and checked against dit_tiny.safetensors),
  denoised = x - out * sigma in float32.
- decode: make_vae_fixtures.py's FLUX.1 decoder (z / 0.3611 + 0.1159 first) on a tiny VAE of
  4 levels (so 8x upscaling as FLUX.1's), then clamp((x + 1) / 2) and uint8(clip(255 x))
  truncated (ComfyUI's process_output and SaveImage).

The tiny text encoder is a Qwen3 (hidden 32 = the DiT's cap_feat_dim, 2 heads of 16, 1 KV head,
3 layers, tied embedding as Qwen3-4B's) over the real tokenizer's vocabulary (151,936 rows). So
that it stays small, only the embedding rows of the tokens the prompts use are random, the rest
zero; the committed files hold those rows alone and the test writes the Hugging Face folder back
(zimage_text_tiny/hf_folder in the test: config.json, model.safetensors, the tokenizer files).

Writes into tests/data/diffusion/:
- zimage_text_tiny/config.json: the encoder's config (Qwen3ForCausalLM).
- zimage_text_tiny/weights.safetensors: its tensors in Hugging Face's names but the embedding,
  BF16; "embed_ids" I64 [K] and "embed_rows" BF16 [K, 32]: the embedding's non-zero rows.
- vae_tiny8.safetensors: the 4-level VAE decoder (ch 32, ch_mult [1, 1, 1, 1], 1 block a
  level), BF16.
- zimage_pipeline_case.safetensors: for PROMPT, seed 42, 64 x 64: "tokens" I64 [T], "text"
  [T, 32], "sigmas" [9], "noise" [1, 16, 8, 8], "latents" [8, 1, 16, 8, 8] (x after each step),
  "decoded" [1, 3, 64, 64] (the VAE's output), "bytes" U8 [64, 64, 3].
- zimage_tiny_seed42.png: the same prompt and seed at 256 x 256, the reference's bytes.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers as tf
from diffusers import ZImageTransformer2DModel
from PIL import Image
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_dit_fixtures as dit_fixtures  # noqa: E402
import make_sampler_fixtures as sampler  # noqa: E402
import make_vae_fixtures as vae_fixtures  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
TOKENIZER = os.path.join(HERE, "..", "..", "..", "shared", "data", "tokenizers", "qwen3")
TEMPLATE = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
PROMPT = "A red fox in fresh snow, watercolor"
SEED, STEPS, SHIFT = 42, 8, 3.0
TEXT_CONFIG = dict(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                   rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
                   tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)


def tokenizer():
    return tf.PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKENIZER, "tokenizer.json"))


def text_encoder(used_ids, gen, config=TEXT_CONFIG):
    """A random Qwen3 of config, BF16 values in f32; of the embedding only the used_ids rows."""
    model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**config)).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                v = 1 + 0.2 * torch.randn(p.shape, generator=gen)
            elif name == "model.embed_tokens.weight":
                v = torch.zeros(p.shape)
                v[used_ids] = torch.randn(len(used_ids), p.shape[1], generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).float())
    return model


def save_text_encoder(encoder, used, folder, architecture="Qwen3ForCausalLM", embed_name="model.embed_tokens.weight"):
    """folder/config.json and folder/weights.safetensors: the tensors, BF16, the embedding
    (embed_name) as its used rows (embed_ids, embed_rows); no lm_head (the tests tie it)."""
    os.makedirs(folder, exist_ok=True)
    config = encoder.config.to_dict()
    config["architectures"] = [architecture]
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in encoder.state_dict().items()
               if k not in (embed_name, "lm_head.weight")}
    embed = encoder.state_dict()[embed_name]
    tensors["embed_ids"] = torch.tensor(used, dtype=torch.int64)
    tensors["embed_rows"] = embed[used].to(torch.bfloat16).contiguous()
    save_file(tensors, os.path.join(folder, "weights.safetensors"))


def dit():
    """make_dit_fixtures.py's model, rebuilt from its seed; checked against its committed file."""
    model = ZImageTransformer2DModel(**dit_fixtures.CONFIG).float().eval()
    dit_fixtures.randomize(model, torch.Generator().manual_seed(23))
    stored = load_file(os.path.join(OUT, "dit_tiny.safetensors"))
    for k, v in dit_fixtures.comfy_names(model.state_dict()).items():
        assert torch.equal(v.to(torch.bfloat16), stored[k]), k
    return model


def vae():
    vae_fixtures.CH, vae_fixtures.CH_MULT, vae_fixtures.NUM_RES_BLOCKS = 32, [1, 1, 1, 1], 0
    weights = vae_fixtures.make_weights(torch.Generator().manual_seed(29))
    return weights, {k: v.float() for k, v in weights.items()}


def paint(encoder, tok, transformer, vae_weights, width, height):
    ids = tok(TEMPLATE.format(PROMPT), add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        text = encoder(torch.tensor([ids]), output_hidden_states=True).hidden_states[-2][0]
    noise = torch.randn([1, 16, height // 8, width // 8], dtype=torch.float32, generator=torch.manual_seed(SEED))
    sigmas = sampler.flow_sigmas(STEPS, SHIFT)

    def denoise(i, x):
        t = 1.0 - torch.tensor([sigmas[i]], dtype=torch.float32)
        with torch.no_grad():
            out = -transformer([torch.from_numpy(x)[0].unsqueeze(1)], t, [text])[0][0].squeeze(1).unsqueeze(0)
        return x - out.numpy() * sigmas[i]

    latents = sampler.res_multistep(noise.numpy(), sigmas, denoise)
    with torch.no_grad():
        decoded = vae_fixtures.decode(vae_weights, torch.from_numpy(latents[-1]))
    pixels = torch.clamp((decoded[0] + 1.0) / 2.0, 0.0, 1.0).permute(1, 2, 0).numpy()
    data = np.clip(255.0 * pixels, 0, 255).astype(np.uint8)
    return dict(tokens=torch.tensor(ids, dtype=torch.int64), text=text.contiguous(), sigmas=torch.from_numpy(sigmas),
                noise=noise, latents=torch.from_numpy(latents), decoded=decoded.contiguous(),
                bytes=torch.from_numpy(np.ascontiguousarray(data)))


def main():
    tok = tokenizer()
    used = sorted(set(tok(TEMPLATE.format(PROMPT), add_special_tokens=False)["input_ids"]))
    encoder = text_encoder(used, torch.Generator().manual_seed(31))
    transformer = dit()
    vae_stored, vae_weights = vae()

    save_text_encoder(encoder, used, os.path.join(OUT, "zimage_text_tiny"))
    save_file(vae_stored, os.path.join(OUT, "vae_tiny8.safetensors"))

    case = paint(encoder, tok, transformer, vae_weights, 64, 64)
    save_file(case, os.path.join(OUT, "zimage_pipeline_case.safetensors"))
    golden = paint(encoder, tok, transformer, vae_weights, 256, 256)
    Image.fromarray(golden["bytes"].numpy(), "RGB").save(os.path.join(OUT, "zimage_tiny_seed42.png"))
    for name, c in (("64x64", case), ("256x256", golden)):
        b = c["bytes"].numpy()
        print(name, "tokens", len(c["tokens"]), "text absmax", c["text"].abs().max().item(), "latent absmax",
              c["latents"][-1].abs().max().item(), "decoded", c["decoded"].min().item(), c["decoded"].max().item(),
              "saturated", int(((b == 0) | (b == 255)).sum()), "of", b.size, "byte std", b.std())


if __name__ == "__main__":
    main()
