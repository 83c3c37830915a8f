#!/usr/bin/env python3
"""A tiny FLUX.1 VAE decoder for gizml::diffusion::FluxVae (tests/diffusion/flux_vae_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_vae_fixtures.py
(torch and safetensors only). The decoder's forward is written here in plain torch from
black-forest-labs/flux src/flux/modules/autoencoder.py (Decoder, ResnetBlock, AttnBlock,
Upsample; AutoEncoder.decode's z / scale + shift first), on random weights in BFL's names.
Writes into tests/data/diffusion/:
- vae_tiny.safetensors: the weights (ch 32, ch_mult [1, 2], num_res_blocks 1, so 2 blocks a
  level, z 16; GroupNorm(32) as BFL hard-codes), stored as BF16 to stay small; the reference
  computes in float32 from the same BF16 values.
- vae_tiny_case.safetensors: "latent" [1, 16, 6, 10] F32 (seeded normal), "image" [1, 3, 12, 20]
  F32 (the decoder's output), "bytes" [12, 20, 3] U8 (ComfyUI's VAE process_output
  clamp((x + 1) / 2, 0, 1), then SaveImage's uint8(clip(255 x, 0, 255)), in float32).
With --flux1 DIR: vae_flux1.safetensors and vae_flux1_case.safetensors in DIR, the same at FLUX.1's sizes (ch 128, ch_mult [1, 2, 4, 4],
num_res_blocks 2, F32 weights, about 200 MB; latent [1, 16, 16, 24]), not committed.
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")

CH, CH_MULT, NUM_RES_BLOCKS, Z, OUT_CH = 32, [1, 2], 1, 16, 3
SCALE, SHIFT = 0.3611, 0.1159
GROUPS, EPS = 32, 1e-6
LATENT = [1, Z, 6, 10]
WEIGHT_DTYPE, NAME = torch.bfloat16, "vae_tiny"
if len(sys.argv) == 3 and sys.argv[1] == "--flux1":
    OUT = sys.argv[2]
    CH, CH_MULT, NUM_RES_BLOCKS, LATENT, WEIGHT_DTYPE, NAME = 128, [1, 2, 4, 4], 2, [1, Z, 16, 24], torch.float32, "vae_flux1"


def make_weights(gen):
    w = {}

    def conv(name, cin, cout, k):
        bound = 1.0 / np.sqrt(cin * k * k)
        w[name + ".weight"] = (torch.rand(cout, cin, k, k, generator=gen) * 2 - 1) * bound
        w[name + ".bias"] = (torch.rand(cout, generator=gen) * 2 - 1) * bound

    def norm(name, c):
        w[name + ".weight"] = 1 + 0.2 * torch.randn(c, generator=gen)
        w[name + ".bias"] = 0.2 * torch.randn(c, generator=gen)

    def resnet(name, cin, cout):
        norm(name + ".norm1", cin)
        conv(name + ".conv1", cin, cout, 3)
        norm(name + ".norm2", cout)
        conv(name + ".conv2", cout, cout, 3)
        if cin != cout:
            conv(name + ".nin_shortcut", cin, cout, 1)

    block_in = CH * CH_MULT[-1]
    conv("decoder.conv_in", Z, block_in, 3)
    resnet("decoder.mid.block_1", block_in, block_in)
    norm("decoder.mid.attn_1.norm", block_in)
    for p in ("q", "k", "v", "proj_out"):
        conv("decoder.mid.attn_1." + p, block_in, block_in, 1)
    resnet("decoder.mid.block_2", block_in, block_in)
    for level in reversed(range(len(CH_MULT))):
        block_out = CH * CH_MULT[level]
        for b in range(NUM_RES_BLOCKS + 1):
            resnet(f"decoder.up.{level}.block.{b}", block_in, block_out)
            block_in = block_out
        if level != 0:
            conv(f"decoder.up.{level}.upsample.conv", block_in, block_in, 3)
    norm("decoder.norm_out", block_in)
    conv("decoder.conv_out", block_in, OUT_CH, 3)
    return {k: v.to(WEIGHT_DTYPE).contiguous() for k, v in w.items()}


def decode(w, z):
    def conv(name, x, pad):
        return F.conv2d(x, w[name + ".weight"], w[name + ".bias"], padding=pad)

    def norm(name, x):
        return F.group_norm(x, GROUPS, w[name + ".weight"], w[name + ".bias"], EPS)

    def swish(x):
        return x * torch.sigmoid(x)

    def resnet(name, x):
        h = conv(name + ".conv1", swish(norm(name + ".norm1", x)), 1)
        h = conv(name + ".conv2", swish(norm(name + ".norm2", h)), 1)
        if name + ".nin_shortcut.weight" in w:
            x = conv(name + ".nin_shortcut", x, 0)
        return x + h

    def attn(name, x):
        h = norm(name + ".norm", x)
        b, c, hh, ww = x.shape
        q, k, v = (conv(f"{name}.{p}", h, 0).reshape(b, 1, c, hh * ww).transpose(2, 3) for p in "qkv")
        o = F.scaled_dot_product_attention(q, k, v)
        o = o.transpose(2, 3).reshape(b, c, hh, ww)
        return x + conv(name + ".proj_out", o, 0)

    h = z / SCALE + SHIFT
    h = conv("decoder.conv_in", h, 1)
    h = resnet("decoder.mid.block_1", h)
    h = attn("decoder.mid.attn_1", h)
    h = resnet("decoder.mid.block_2", h)
    for level in reversed(range(len(CH_MULT))):
        for b in range(NUM_RES_BLOCKS + 1):
            h = resnet(f"decoder.up.{level}.block.{b}", h)
        if level != 0:
            h = F.interpolate(h, scale_factor=2.0, mode="nearest")
            h = conv(f"decoder.up.{level}.upsample.conv", h, 1)
    h = swish(norm("decoder.norm_out", h))
    return conv("decoder.conv_out", h, 1)


def main():
    gen = torch.Generator().manual_seed(23)
    weights = make_weights(gen)
    latent = torch.randn(LATENT, generator=gen)
    with torch.no_grad():
        image = decode({k: v.float() for k, v in weights.items()}, latent)
    pixels = torch.clamp((image[0] + 1.0) / 2.0, 0.0, 1.0).permute(1, 2, 0).numpy()
    data = np.clip(255.0 * pixels, 0, 255).astype(np.uint8)
    os.makedirs(OUT, exist_ok=True)
    save_file(weights, os.path.join(OUT, NAME + ".safetensors"))
    save_file({"latent": latent.contiguous(), "image": image.contiguous(), "bytes": torch.from_numpy(np.ascontiguousarray(data))},
              os.path.join(OUT, NAME + "_case.safetensors"))
    print("image", list(image.shape), "min", image.min().item(), "max", image.max().item(),
          "std", image.std().item(), "saturated bytes", int(((data == 0) | (data == 255)).sum()), "of", data.size)


if __name__ == "__main__":
    main()
