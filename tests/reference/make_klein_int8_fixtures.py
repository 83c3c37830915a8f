#!/usr/bin/env python3
"""ComfyUI's INT8 files ("int8_tensorwise", ConvRot) made by comfy_kitchen (PyPI: comfy-kitchen
0.2.40), for tests/diffusion/int8_comfy_test.cpp.

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_klein_int8_fixtures.py
(torch, safetensors, diffusers 0.42 and comfy-kitchen; the tiny FLUX.2 klein of
make_klein_dit_fixtures.py, read from its committed BFL file). Each quantized weight is
comfy_kitchen's TensorWiseINT8Layout.quantize (I8 codes, a per-channel [out, 1] or per-tensor F32
scale, the codes' rows rotated by its regular Hadamard matrix over groups of convrot_groupsize)
stored as ComfyUI's files do: `X.weight` I8, `X.weight_scale`, `X.comfy_quant` (uint8 bytes of
the JSON {"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": G}). Writes into
tests/data/diffusion/:
- int8_comfy_layers.safetensors: layers c0..c3 (out, in, rotation): (8, 512, 256), (6, 192, 64),
  (5, 48, 16), (4, 64, none, one scale for the tensor).
- int8_comfy_layers_case.safetensors: for each layer cN, "cN.x" [3, in] seeded normal rows,
  "cN.dequant" [out, in] (TensorWiseINT8Layout.dequantize in float32) and "cN.out" [3, out]
  (comfy_kitchen's int8_linear of x on the stored codes, float32, its eager CPU backend).
- klein2_tiny_int8.safetensors: klein2_tiny_bfl.safetensors with its block linears quantized as
  ComfyUI's converter chooses groups (the largest of 256, 64, 16 dividing the inputs: 16 for the
  inputs of 32, 64 for single_blocks.0.linear2's 128), but double_blocks.0.txt_mlp.2 quantized
  without ConvRot (one scale for the tensor); the other weights BF16 as they were.
- klein2_int8_case.safetensors: "out0" and "ref0": diffusers' Flux2Transformer2DModel in float32
  on the dequantized weights, for klein_tiny_case.safetensors' latent, text and sigma 0.9,
  without and with reference ref0 (as make_klein_dit_fixtures.py's klein2_out0 / klein2_ref0).
"""
import json
import os
import re

import torch
from comfy_kitchen.backends.eager.quantization import int8_linear
from comfy_kitchen.tensor.int8 import TensorWiseINT8Layout
from diffusers import Flux2Transformer2DModel
from diffusers.loaders.single_file_utils import convert_flux2_transformer_checkpoint_to_diffusers
from safetensors.torch import load_file, save_file

from make_klein_dit_fixtures import FLUX2, OUT, SIGMAS, flux2_forward

LAYERS = [(8, 512, 256), (6, 192, 64), (5, 48, 16), (4, 64, None)]
PLAIN_INT8 = "double_blocks.0.txt_mlp.2"


def comfy_quant(rotation):
    conf = {"format": "int8_tensorwise"}
    if rotation:
        conf.update({"convrot": True, "convrot_groupsize": rotation})
    return torch.tensor(list(json.dumps(conf).encode("utf-8")), dtype=torch.uint8)


def quantize(w, rotation):
    """(stored tensors of layer X's suffixes, dequantized float32 weight)."""
    if rotation:
        q, p = TensorWiseINT8Layout.quantize(w.float(), per_channel=True, convrot=True, convrot_groupsize=rotation)
    else:
        q, p = TensorWiseINT8Layout.quantize(w.float(), per_channel=False)
    stored = {"weight": q.contiguous(), "weight_scale": p.scale.float().contiguous(), "comfy_quant": comfy_quant(rotation)}
    return stored, TensorWiseINT8Layout.dequantize(q, p).float()


def group_for(k):
    return next(g for g in (256, 64, 16) if k % g == 0)


def layers():
    gen = torch.Generator().manual_seed(31)
    tensors, case = {}, {}
    for i, (out, inp, rotation) in enumerate(LAYERS):
        w = torch.randn(out, inp, generator=gen) * 0.05
        w[0, 3] = 1.5  # an outlier the rotation spreads
        stored, deq = quantize(w, rotation)
        tensors.update({f"c{i}.{k}": v for k, v in stored.items()})
        x = torch.randn(3, inp, generator=gen)
        y = int8_linear(x, stored["weight"], stored["weight_scale"], None, torch.float32, convrot=rotation is not None,
                        convrot_groupsize=rotation or 256)
        case.update({f"c{i}.x": x, f"c{i}.dequant": deq.contiguous(), f"c{i}.out": y.contiguous()})
    save_file(tensors, os.path.join(OUT, "int8_comfy_layers.safetensors"))
    save_file(case, os.path.join(OUT, "int8_comfy_layers_case.safetensors"))


def klein():
    bfl = load_file(os.path.join(OUT, "klein2_tiny_bfl.safetensors"))
    stored, dequantized = {}, {}
    for name, w in bfl.items():
        layer = name[: -len(".weight")]
        in_block = re.match(r"(double|single)_blocks\.\d+\.", name) is not None
        if w.ndim == 2 and name.endswith(".weight") and in_block:
            rotation = None if layer == PLAIN_INT8 else group_for(w.shape[1])
            parts, deq = quantize(w, rotation)
            stored.update({f"{layer}.{k}": v for k, v in parts.items()})
            dequantized[name] = deq
        else:
            stored[name] = w
            dequantized[name] = w.float()
    save_file(stored, os.path.join(OUT, "klein2_tiny_int8.safetensors"))

    model = Flux2Transformer2DModel(**FLUX2).eval()
    model.load_state_dict(convert_flux2_transformer_checkpoint_to_diffusers(dequantized))
    case = load_file(os.path.join(OUT, "klein_tiny_case.safetensors"))
    with torch.no_grad():
        out = {"out0": flux2_forward(model, case["latent"], [], case["text"], SIGMAS[0]),
               "ref0": flux2_forward(model, case["latent"], [case["ref0"]], case["text"], SIGMAS[0])}
    save_file({k: v.contiguous() for k, v in out.items()}, os.path.join(OUT, "klein2_int8_case.safetensors"))


def main():
    layers()
    klein()


if __name__ == "__main__":
    main()
