#!/usr/bin/env python3
"""ComfyUI 4-bit "W4A8" layers (comfy_quant format asym_w4a8_int8, comfy_kitchen's
AsymW4A8Int8Layout) and a tiny pruned W4A8 MiniMax H3 transformer, as ComfyUI publishes them
(minimax_h3_ref2va_pruned_w4a8_mixed.safetensors), for gizml's asym_w4a8_int8 loader and linears.

Run:  /work/venv-torch/bin/python tests/reference/make_w4a8_fixtures.py
(torch, safetensors, diffusers 0.42.1 or later with MiniMax H3, comfy-kitchen 0.2.40; reads the
committed h3_tiny.safetensors and h3_tiny_case.safetensors of make_h3_fixtures.py and imports
make_h3_int8_fixtures.py's helpers). CPU only, deterministic.

Storage (AsymW4A8Int8Layout.state_dict_tensors' suffixes on the prefix "weight"), layer X:
    X.weight            I8 [N, K/2]: 4-bit codes, two a byte, even column in the low nibble
                        (6-bit: I8 [N, 3K/4], the K/2-byte low-nibble plane then a K/4-byte plane
                        of each code's top 2 bits, column c in byte c//4 at bit 2*(c%4));
    X.weight_s_rel      F8_E4M3 [N, K/16]: per-group relative scale (w2: the same bytes as U8, as
                        older tools store them);
    X.weight_s_channel  F32 [N]: per-output-row scale;
    X.weight_codebook   F32 [16]: only with a codebook (4-bit default);
    X.weight_correction F32 [K/16, N]: only when asymmetric (w3);
    X.comfy_quant       U8: the UTF-8 bytes of json.dumps({"format": "asym_w4a8_int8",
                        "group_size": 16, "convrot_groupsize": G}) (default separators; 72 bytes
                        for G 256, 71 for G 64 / 16; no comfy_quant writer is installed to copy
                        the keys from, so these are the keys the loader reads).
The weight's decode (comfy_kitchen.backends.eager.w4a8_int8):
    _dequant_int4_grouped_to_int8(qdata, s_rel, codebook, 16): v = codebook[code] (no codebook:
        code - 8 at 4 bits, code - 32 at 6), v * float(s_rel[n, group]), round half to even,
        clamp [-127, 127] -> the INT8 grid [N, K];
    dequantize_w4a8_int8_weight(qdata, s_rel, s_channel, codebook, correction, 16, G,
        output_dtype=torch.float32): grid * s_channel[n] (+ correction[group, n]), then the
        ConvRot rotation (rotate_int8_convrot_weight: the normalised regular Hadamard over groups
        of G columns, its own inverse);
    w4a8_int8_linear(x, qdata, s_rel, s_channel, codebook, correction, None, 16, G,
        out_dtype=torch.float32): no correction: int8_linear(x, grid, s_channel, bias=None,
        out_dtype, convrot=True, convrot_groupsize=G) (x rotated by the Hadamard over groups of
        G, quantized per row: scale amax|row| / 127, round, clamp; INT32 product; times
        x_scale[row] * s_channel[n]); with a correction: F.linear(x, the dequantized weight).
Quantization: comfy_kitchen.backends.eager.w4a8_int8.quantize_w4a8_int8_weight(w.float(),
group_size=16, convrot_groupsize=G, ...) (the ConvRot rotation, the codebook decision, ALS
group-scale refinement), the function AsymW4A8Int8Layout.quantize dispatches to.

Writes into tests/data/diffusion/:
- w4a8_comfy_layers.safetensors: layers w0..w4, weights torch.randn(N, K, generator=
  torch.Generator().manual_seed(100 + i)) / sqrt(K), quantized with
    w0 [32, 256]  4-bit, default codebook (checked == default_w4a8_codebook()), G 256;
    w1 [16, 512]  bits=6 (uniform, no codebook), G 256: weight I8 [16, 384];
    w2 [24, 256]  4-bit codebook, G 64, weight_s_rel stored U8 (the fp8 bytes);
    w3 [8, 256]   symmetric=False, codebook=False (uniform 4-bit, min/max per group), G 256:
                  weight_correction F32 [16, 8], no codebook;
    w4 [16, 256]  codebook=False (symmetric uniform, code - 8), G 16.
- w4a8_comfy_layers_case.safetensors, per layer wN: "wN.x" F32 [3, K] (torch.randn,
  manual_seed(200 + i)); "wN.int8" I8 [N, K] (_dequant_int4_grouped_to_int8); "wN.dequant" F32
  [N, K] (dequantize_w4a8_int8_weight, float32); "wN.out" F32 [3, N] (w4a8_int8_linear eager,
  out_dtype float32).
- h3_tiny_w4a8.safetensors: make_h3_int8_fixtures.py's h3_tiny_int8.safetensors (the tiny H3 of
  make_h3_fixtures.py made pruned: adaln_t_table [1025, 20] for time_embedder.*, AdaLN biases
  blocks.N.adaln_proj.linear.bias F16, every name under "model.diffusion_model."), except that
  in blocks.N. (N = 0, 1; not token_refiner.) these are asym_w4a8_int8, 4-bit, codebook (the one
  quantize_w4a8_int8_weight decides), group 16:
    attn.qkv_proj [192, 48]: G 16 -> .weight I8 [192, 24], .weight_s_rel F8_E4M3 [192, 3],
        .weight_s_channel F32 [192], .weight_codebook F32 [16], .comfy_quant U8 [71];
    attn.out_proj [48, 64]:  G 64 -> I8 [48, 32], F8_E4M3 [48, 4], F32 [48], F32 [16], U8 [71];
    mlp.fc1       [80, 48]:  G 16 -> I8 [80, 24], F8_E4M3 [80, 3], F32 [80], F32 [16], U8 [71];
  and mlp.fc2 [48, 40] (40 is no multiple of 16) left BF16 as in h3_tiny.safetensors.
- h3_tiny_w4a8_case.safetensors (inputs in h3_tiny_case.safetensors: text, text_tags, keyframe,
  video, audio, t_video, t_audio; make_h3_int8_fixtures.py's forward and layout):
    "f32_video_out" [4, 3, 4, 6], "f32_audio_out" [2, 5, 6]: diffusers' MiniMaxH3Transformer3DModel
      in float32 on the file's weights read back (the W4A8 linears by dequantize_w4a8_int8_weight
      in float32, the F16 biases as F16, the rest as stored; time embedded by h3_tiny's
      time_embedder, which the table samples);
    "w4a8_video_out", "w4a8_audio_out": the same with the 6 W4A8 linears run by the eager
      w4a8_int8_linear(x, weight, s_rel, s_channel, codebook, None, None, 16, G, torch.float32)
      on the stored tensors. diffusers' to_q/to_k/to_v and SwiGLU's [value; gate] are row slices
      of the stored qkv_proj / fc1 (weight, s_rel and s_channel rows sliced alike), which gives
      the stacked weight's linear's columns exactly (checked here).
h3_tiny_w4a8.safetensors holds 68 tensors; every block linear got the default codebook.
Measured: w0..w4 rel |w - dequant| / |w| 0.072, 0.020, 0.072, 0.071, 0.088; max |wN.out| 2.0-3.4,
max |out - x dequant^T| up to 2.3e-2 (the activations' INT8 rounding; 0 for w3, which runs
F.linear). H3: max |f32 out| 3.53 (video), 2.33 (audio), rms about 1; max |w4a8 - f32| 1.2e-2
(video), 3.2e-3 (audio), rms 2.0e-3 / 1.4e-3; max |f32 - h3_tiny_case's BF16 outputs| 7.4e-2 /
7.3e-2 (the weights' 4-bit rounding).
"""
import json
import math
import os
import sys

import torch
from comfy_kitchen.backends.eager.w4a8_int8 import (
    _dequant_int4_grouped_to_int8,
    dequantize_w4a8_int8_weight,
    quantize_w4a8_int8_weight,
    w4a8_int8_linear,
)
from comfy_kitchen.tensor.w4a8_int8 import AsymW4A8Int8Layout
from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_h3_fixtures as h3  # noqa: E402
from make_h3_int8_fixtures import case_forward, checkpoint_modules, diffusers_model, pruned  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
GROUP = 16

# name: (N, K, G, quantize kwargs, s_rel stored as U8)
LAYERS = {
    "w0": (32, 256, 256, {}, False),
    "w1": (16, 512, 256, {"bits": 6}, False),
    "w2": (24, 256, 64, {}, True),
    "w3": (8, 256, 256, {"symmetric": False, "codebook": False}, False),
    "w4": (16, 256, 16, {"codebook": False}, False),
}
H3_W4A8 = {"attn.qkv_proj": 16, "attn.out_proj": 64, "mlp.fc1": 16}


def comfy_quant(g):
    conf = {"format": "asym_w4a8_int8", "group_size": GROUP, "convrot_groupsize": g}
    return torch.tensor(list(json.dumps(conf).encode("utf-8")), dtype=torch.uint8)


def quantize(w, g, **kwargs):
    """{suffix after the layer name: stored tensor} and the operands for the eager functions."""
    qdata, s_rel, s_channel, correction, codebook = quantize_w4a8_int8_weight(
        w.float(), group_size=GROUP, convrot_groupsize=g, **kwargs)
    params = AsymW4A8Int8Layout.Params(
        scale=s_rel, s_channel=s_channel, correction=correction, codebook=codebook,
        orig_dtype=torch.float32, orig_shape=tuple(w.shape), group_size=GROUP, convrot_groupsize=g)
    stored = {"weight" + k: v.contiguous() for k, v in AsymW4A8Int8Layout.state_dict_tensors(qdata, params).items()}
    stored["comfy_quant"] = comfy_quant(g)
    ops = dict(qdata=qdata, s_rel=s_rel, s_channel=s_channel, codebook=codebook, correction=correction,
               group_size=GROUP, convrot_groupsize=g)
    return stored, ops


def dequant(ops):
    return dequantize_w4a8_int8_weight(**ops, output_dtype=torch.float32)


def linear(x, ops):
    return w4a8_int8_linear(x, **ops, out_dtype=torch.float32)


def make_layers():
    layers, case = {}, {}
    for i, (name, (n, k, g, kwargs, u8)) in enumerate(LAYERS.items()):
        w = torch.randn(n, k, generator=torch.Generator().manual_seed(100 + i)) / math.sqrt(k)
        stored, ops = quantize(w, g, **kwargs)
        if name == "w0":
            assert torch.equal(ops["codebook"], default_w4a8_codebook()), "w0: not the default codebook"
        if u8:
            stored["weight_s_rel"] = stored["weight_s_rel"].view(torch.uint8)
        layers.update({f"{name}.{k2}": v for k2, v in stored.items()})
        x = torch.randn(3, k, generator=torch.Generator().manual_seed(200 + i))
        case[f"{name}.x"] = x
        case[f"{name}.int8"] = _dequant_int4_grouped_to_int8(ops["qdata"], ops["s_rel"], ops["codebook"], GROUP)
        case[f"{name}.dequant"] = dequant(ops)
        case[f"{name}.out"] = linear(x, ops)
        ref = x @ case[f"{name}.dequant"].t()
        print(f"{name}: " + ", ".join(f"{k2} {str(v.dtype).removeprefix('torch.')} {list(v.shape)}"
                                      for k2, v in stored.items())
              + f" | rel|w-deq| {(case[f'{name}.dequant'] - w).norm() / w.norm():.4f}"
              f" max|out| {case[f'{name}.out'].abs().max():.3f} max|out - x deq^T| {(case[f'{name}.out'] - ref).abs().max():.2e}")
    save_file(layers, os.path.join(OUT, "w4a8_comfy_layers.safetensors"))
    save_file({k: v.contiguous() for k, v in case.items()}, os.path.join(OUT, "w4a8_comfy_layers_case.safetensors"))
    return layers


def w4a8_layer(layer, w):
    """The blocks' (not the refiner's) H3_W4A8 linears as asym_w4a8_int8; the rest kept."""
    parts = layer.split(".", 2)
    if parts[0] != "blocks" or len(parts) != 3 or parts[2] not in H3_W4A8:
        return None
    q, ops = quantize(w, H3_W4A8[parts[2]])
    return q, dequant(ops), ops


def rows_of(ops, rows):
    out = dict(ops)
    for key in ("qdata", "s_rel", "s_channel"):
        out[key] = ops[key][rows].contiguous()
    return out


def w4a8_patches(model, ops_by_layer):
    return [(layer, module, rows, rows_of(ops, rows))
            for layer, ops in ops_by_layer.items()
            for module, rows in checkpoint_modules(model, layer, ops["qdata"].shape[0])]


def make_h3():
    ckpt = load_file(os.path.join(OUT, "h3_tiny.safetensors"))
    case = load_file(os.path.join(OUT, "h3_tiny_case.safetensors"))
    forward = case_forward(case)  # make_h3_int8_fixtures.py's pass

    v, a = forward(diffusers_model(ckpt))  # the same pass as the committed outputs
    assert (v - case["video_out"]).abs().max() < 1e-5 and (a - case["audio_out"]).abs().max() < 1e-5

    stored, readback, ops_by_layer = pruned(ckpt, case["adaln_t_table"], w4a8_layer)
    model = diffusers_model(readback)
    out = {}
    out["f32_video_out"], out["f32_audio_out"] = forward(model)

    patches = w4a8_patches(model, ops_by_layer)
    gen = torch.Generator().manual_seed(5)
    for layer, module, picked, ops in patches:
        assert torch.equal(dequant(ops), module.weight.detach()), layer
        x = torch.randn(5, ops["qdata"].shape[1] * 2, generator=gen)
        assert torch.equal(linear(x, ops), linear(x, ops_by_layer[layer])[:, picked]), layer
    for _, module, _, ops in patches:
        module.forward = (lambda ops: lambda x: linear(x, ops))(ops)
    out["w4a8_video_out"], out["w4a8_audio_out"] = forward(model)
    for _, module, *_ in patches:
        del module.forward

    save_file(stored, os.path.join(OUT, "h3_tiny_w4a8.safetensors"))
    save_file({k: t.contiguous() for k, t in out.items()}, os.path.join(OUT, "h3_tiny_w4a8_case.safetensors"))

    print("h3 tensors:", len(stored))
    for layer, ops in ops_by_layer.items():
        cb = ops["codebook"]
        print(f"  {layer}: G {ops['convrot_groupsize']} default codebook {torch.equal(cb, default_w4a8_codebook())}")
    for k in ("video", "audio"):
        f32, w4 = out[f"f32_{k}_out"], out[f"w4a8_{k}_out"]
        print(f"{k}: max|f32| {f32.abs().max():.4f}  rms {f32.pow(2).mean().sqrt():.4f}  "
              f"max|w4a8-f32| {(w4 - f32).abs().max():.3e}  rms {(w4 - f32).pow(2).mean().sqrt():.3e}  "
              f"max|f32-bf16 model| {(f32 - case[f'{k}_out']).abs().max():.3e}")


def main():
    os.makedirs(OUT, exist_ok=True)
    print("comfy_quant G 256:", bytes(comfy_quant(256).tolist()))
    make_layers()
    make_h3()


if __name__ == "__main__":
    main()
