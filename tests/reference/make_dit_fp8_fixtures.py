#!/usr/bin/env python3
"""The tiny Z-Image DiT of make_dit_fixtures.py saved as ComfyUI's FP8 files, for
tests/diffusion/z_image_dit_fp8_test.cpp.

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_dit_fp8_fixtures.py
(torch, safetensors and diffusers; run make_dit_fixtures.py's seed and config, imported from it).
Every 2-D linear weight is quantized per tensor as ComfyUI's scaled FP8 files are: scale =
max|w| / 448, stored torch's (w / scale).to(float8_e4m3fn) with the scale beside it; but
x_embedder.weight, stored plain float8_e5m2 with no scale (ComfyUI casts such weights as they
are). The reference is diffusers' ZImageTransformer2DModel in float32 on the dequantized weights,
q.float() * scale. Writes into tests/data/diffusion/:
- dit_tiny_fp8.safetensors: the old layout (comfy/utils.py convert_old_quants reads it): a
  `scaled_fp8` marker tensor (empty, float8_e4m3fn), `X.scale_weight` F32 scalars, and a
  `X.scale_input` of 1.0 on the attention's qkv (unused when the weights are dequantized).
- dit_tiny_fp8_mixed.safetensors: the newer layout (comfy/ops.py mixed precision): the scales as
  `X.weight_scale`, each quantized layer's `X.comfy_quant` (uint8 bytes of the JSON
  {"format": "float8_e4m3fn"}), no marker.
- dit_tiny_fp8_case.safetensors: "out0", "out1": what ComfyUI's NextDiT returns for
  dit_tiny_case.safetensors' latent, caption and sigmas with the dequantized weights.
"""
import json
import os

import torch
from safetensors.torch import load_file, save_file

from make_dit_fixtures import CONFIG, OUT, comfy_names, randomize
from diffusers import ZImageTransformer2DModel

E4M3_MAX = 448.0
PLAIN_E5M2 = "x_embedder.weight"


def quantize(weights):
    """(stored tensors, scales, dequantized F32 weights) of ComfyUI-named weights."""
    stored, scales, dequantized = {}, {}, {}
    for name, w in weights.items():
        if w.ndim != 2 or not name.endswith(".weight"):
            stored[name], dequantized[name] = w.to(torch.bfloat16), w.to(torch.bfloat16).float()
        elif name == PLAIN_E5M2:
            stored[name] = w.to(torch.float8_e5m2)
            dequantized[name] = stored[name].float()
        else:
            scale = (w.abs().max() / E4M3_MAX).float().reshape(())
            stored[name] = (w / scale).to(torch.float8_e4m3fn)
            scales[name[: -len(".weight")]] = scale
            dequantized[name] = stored[name].float() * scale
    return stored, scales, dequantized


def diffusers_names(comfy, reference):
    """comfy-named weights back under diffusers' names (the inverse of comfy_names)."""
    out = {}
    for key in reference:
        if ".attention.to_q." in key or ".attention.to_k." in key or ".attention.to_v." in key:
            part = ".to_q." if ".to_q." in key else ".to_k." if ".to_k." in key else ".to_v."
            qkv = comfy[key.replace(part, ".qkv.")]
            n = qkv.shape[0] // 3
            i = [".to_q.", ".to_k.", ".to_v."].index(part)
            out[key] = qkv[i * n:(i + 1) * n]
            continue
        new = (key.replace("all_final_layer.2-1.", "final_layer.").replace("all_x_embedder.2-1.", "x_embedder.")
               .replace(".attention.to_out.0.", ".attention.out.").replace(".attention.norm_q.", ".attention.q_norm.")
               .replace(".attention.norm_k.", ".attention.k_norm."))
        out[key] = comfy[new]
    return out


def main():
    gen = torch.Generator().manual_seed(23)
    model = ZImageTransformer2DModel(**CONFIG).float().eval()
    randomize(model, gen)
    stored, scales, dequantized = quantize(comfy_names(model.state_dict()))
    model.load_state_dict(diffusers_names(dequantized, model.state_dict()))

    case = load_file(os.path.join(OUT, "dit_tiny_case.safetensors"))
    out = {}
    with torch.no_grad():
        for i, sigma in enumerate(case["sigmas"].tolist()):
            t = 1.0 - torch.tensor([sigma], dtype=torch.float32)
            y = model([case["latent"][0].unsqueeze(1)], t, [case["caption"]])[0][0]
            out[f"out{i}"] = (-y.squeeze(1)).unsqueeze(0).contiguous()

    old = dict(stored)
    old["scaled_fp8"] = torch.empty(0, dtype=torch.float8_e4m3fn)
    for layer, s in scales.items():
        old[layer + ".scale_weight"] = s
        if layer.endswith(".attention.qkv"):
            old[layer + ".scale_input"] = torch.tensor(1.0)
    mixed = dict(stored)
    conf = torch.tensor(list(json.dumps({"format": "float8_e4m3fn"}).encode("utf-8")), dtype=torch.uint8)
    for layer, s in scales.items():
        mixed[layer + ".weight_scale"] = s
        mixed[layer + ".comfy_quant"] = conf.clone()
    save_file(old, os.path.join(OUT, "dit_tiny_fp8.safetensors"))
    save_file(mixed, os.path.join(OUT, "dit_tiny_fp8_mixed.safetensors"))
    save_file(out, os.path.join(OUT, "dit_tiny_fp8_case.safetensors"))
    print(len(scales), "scaled FP8 weights; out0 absmax", out["out0"].abs().max().item(),
          "out1 absmax", out["out1"].abs().max().item())


if __name__ == "__main__":
    main()
