#!/usr/bin/env python3
"""A random Z-Image DiT of a chosen size in ComfyUI's single-file names, for measuring memory.

Run:  /path/to/venv-with-torch/bin/python bench/make_zimage_dit_sized.py OUT.safetensors
          [--dim 1536] [--hidden 4096] [--layers 7] [--dtype bf16|f16|f32|fp8]
(torch and safetensors). Its head dim is 24 and its caption width 32, those of the tiny model of
tests/data/diffusion, so that it replaces that model's DiT in a `giz paint` folder (whose
zimage.json sets rope_axes [4, 8, 12]); 1 noise and 1 context refiner. The defaults make about
255 M weights (510 MB in BF16). fp8: the block linears scaled float8_e4m3fn as ComfyUI stores them
(`X.scale_weight` beside each, the `scaled_fp8` marker), everything else BF16.
"""
import argparse

import torch
from safetensors.torch import save_file

HEAD = 24
CAPTION = 32
CHANNELS = 16
PATCH = 2
ADALN = 256
MID = 1024
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "fp8": torch.bfloat16}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--dim", type=int, default=1536)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=7)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    a = p.parse_args()
    assert a.dim % HEAD == 0
    gen = torch.Generator().manual_seed(0)
    d, dtype = a.dim, DTYPES[a.dtype]
    w = {}

    def linear(name, out, inp, bias=True, block=False):
        v = torch.randn(out, inp, generator=gen) / inp ** 0.5
        if a.dtype == "fp8" and block:
            scale = v.abs().max() / 448.0
            w[name + ".weight"] = (v / scale).to(torch.float8_e4m3fn)
            w[name + ".scale_weight"] = scale.reshape(())
        else:
            w[name + ".weight"] = v.to(dtype)
        if bias:
            w[name + ".bias"] = (0.1 * torch.randn(out, generator=gen)).to(dtype)

    def gain(name, n):
        w[name] = (1 + 0.1 * torch.randn(n, generator=gen)).to(dtype)

    def block(prefix, modulated):
        linear(prefix + ".attention.qkv", 3 * d, d, bias=False, block=True)
        linear(prefix + ".attention.out", d, d, bias=False, block=True)
        gain(prefix + ".attention.q_norm.weight", HEAD)
        gain(prefix + ".attention.k_norm.weight", HEAD)
        for n in ("attention_norm1", "attention_norm2", "ffn_norm1", "ffn_norm2"):
            gain(prefix + "." + n + ".weight", d)
        linear(prefix + ".feed_forward.w1", a.hidden, d, bias=False, block=True)
        linear(prefix + ".feed_forward.w2", d, a.hidden, bias=False, block=True)
        linear(prefix + ".feed_forward.w3", a.hidden, d, bias=False, block=True)
        if modulated:
            linear(prefix + ".adaLN_modulation.0", 4 * d, ADALN)

    linear("t_embedder.mlp.0", MID, 256)
    linear("t_embedder.mlp.2", ADALN, MID)
    gain("cap_embedder.0.weight", CAPTION)
    linear("cap_embedder.1", d, CAPTION)
    linear("x_embedder", d, PATCH * PATCH * CHANNELS)
    w["x_pad_token"] = torch.randn(1, d, generator=gen).to(dtype)
    w["cap_pad_token"] = torch.randn(1, d, generator=gen).to(dtype)
    block("noise_refiner.0", True)
    block("context_refiner.0", False)
    for i in range(a.layers):
        block(f"layers.{i}", True)
    linear("final_layer.adaLN_modulation.1", d, ADALN)
    linear("final_layer.linear", PATCH * PATCH * CHANNELS, d)
    if a.dtype == "fp8":
        w["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    save_file(w, a.out)
    print(a.out, sum(t.numel() for t in w.values()), "values")


if __name__ == "__main__":
    main()
