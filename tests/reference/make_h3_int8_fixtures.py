#!/usr/bin/env python3
"""A tiny "pruned" INT8 ConvRot MiniMax H3 transformer as ComfyUI publishes them
(minimax_h3_*_pruned_int8_convrot.safetensors), for gizml::diffusion::H3Model's INT8 (W8A8) path.

Run:  /work/venv-torch/bin/python tests/reference/make_h3_int8_fixtures.py
(torch, safetensors, diffusers 0.42.1 or later with MiniMax H3, comfy-kitchen 0.2.40; reads the
committed h3_tiny.safetensors, h3_tiny_case.safetensors and h3_tiny_lora.safetensors of
make_h3_fixtures.py and imports its helpers and make_klein_int8_fixtures.py's). Deterministic.

The model is make_h3_fixtures.py's tiny H3 (hidden 48, 2 heads of 32, ffn 40, 2 blocks, 1 refiner
block, time width 20), made pruned as that script's "adaln_t_table" variant is (time_embedder.*
replaced by the case's adaln_t_table [1025, 20], the AdaLN projections left at full rank), then:
- each block's (blocks.N., not token_refiner.blocks.N.) attn.qkv_proj, attn.out_proj, mlp.fc1 and
  mlp.fc2 weight quantized by comfy_kitchen's TensorWiseINT8Layout.quantize(w.float(),
  per_channel=True, convrot=True, convrot_groupsize=G) (make_klein_int8_fixtures.quantize), G
  chosen as ComfyUI's converter does, the largest of 256, 64, 16 dividing the inputs:
    blocks.N.attn.qkv_proj [192, 48]: G 16    blocks.N.attn.out_proj [48, 64]: G 64
    blocks.N.mlp.fc1       [80, 48]:  G 16    blocks.N.mlp.fc2       [48, 40]: none (40 has none
  of 256, 64, 16 as a divisor): quantized without ConvRot and with one scale for the tensor,
  TensorWiseINT8Layout.quantize(w.float(), per_channel=False), comfy_quant {"format":
  "int8_tensorwise"}, as make_klein_int8_fixtures.py's plain layer;
  stored as ComfyUI's files do: X.weight I8 [out, in] (ConvRot: the rows rotated by the regular
  Hadamard matrix over groups of G before quantizing), X.weight_scale F32 ([out, 1] per channel,
  [] for fc2), X.comfy_quant U8 (the JSON's UTF-8 bytes: {"format": "int8_tensorwise",
  "convrot": true, "convrot_groupsize": G}, 71 bytes; fc2's {"format": "int8_tensorwise"}, 29);
- blocks.N.adaln_proj.linear.bias stored F16, as released (these BF16 values are exact in F16);
- every name prefixed "model.diffusion_model.".
qkv_proj stays stacked [q; k; v] and fc1 [gate; value], as the original checkpoint.

The references are diffusers' MiniMaxH3Transformer3DModel in float32 on the file's weights read
back exactly (INT8 linears by TensorWiseINT8Layout.dequantize in float32, the F16 biases as F16,
the rest as stored), for h3_tiny_case.safetensors' layout, the forward make_h3_fixtures.py
computes as "video_out"/"audio_out" (MiniMaxH3PrepareLayoutStep's packed sequence, video t
"t_video", audio t "t_audio", the keyframe at max(t_video, 0.999)). diffusers cannot read the
table (its converter refuses a pruned file), so the forward embeds t with h3_tiny.safetensors'
time_embedder, whose silu the table samples: a loader reading the table linearly between its
grid points differs by that interpolation's error only (about 1e-6, as h3_model_test.cpp's
PrunedAdalnMapNearTheTimeEmbedder measures).
W8A8 reference: each of the 8 quantized block linears' forward replaced by comfy_kitchen's eager
CPU int8_linear (comfy_kitchen.backends.eager.quantization.int8_linear) on the stored codes and
scales, as ComfyUI's TensorWiseINT8Layout linear runs them:
    int8_linear(x, weight_i8, weight_scale, None, torch.float32, convrot=G is not None,
                convrot_groupsize=G or 256)
x the float32 activation [1, rows, in]; it rotates x by the same Hadamard over groups of G (for
ConvRot), quantizes it per row (quantize_int8_rowwise: scale amax|row| / 127, round half to even,
clamp [-128, 127]), takes the integer product (torch int8 matmul, INT32 accumulators) and scales it
by x_scale[row] * weight_scale[out]. diffusers' to_q/to_k/to_v and SwiGLU's [value; gate] are row
slices of the stored qkv_proj / fc1 (codes and per-channel scales sliced alike), which gives the
same numbers as one int8_linear on the stacked weight (checked here).
Writes into tests/data/diffusion/:
- h3_tiny_int8.safetensors: 60 tensors, all under "model.diffusion_model.":
    adaln_t_table F32 [1025, 20]; rope.inv_freq F32 [4];
    video_patch_proj.weight F32 [48, 16], .bias F32 [48]; audio_patch_proj.weight F32 [48, 6],
    .bias F32 [48]; condition_proj.weight BF16 [48, 24], .bias BF16 [48];
    token_refiner.blocks.0.: norm1.weight, norm2.weight BF16 [48], attn.q_norm.weight,
    attn.k_norm.weight BF16 [32], attn.qkv_proj.weight BF16 [192, 48], attn.out_proj.weight BF16
    [48, 64], mlp.fc1.weight BF16 [80, 48], mlp.fc2.weight BF16 [48, 40];
    token_refiner.final_norm.weight BF16 [48];
    blocks.N. (N = 0, 1): norm1.weight, norm2.weight BF16 [48], attn.q_norm.weight,
    attn.k_norm.weight BF16 [32], adaln_proj.linear.weight BF16 [864, 20], adaln_proj.linear.bias
    F16 [864], attn.qkv_proj.weight I8 [192, 48] / .weight_scale F32 [192, 1] / .comfy_quant U8
    [71], attn.out_proj.weight I8 [48, 64] / .weight_scale F32 [48, 1] / .comfy_quant U8 [71],
    mlp.fc1.weight I8 [80, 48] / .weight_scale F32 [80, 1] / .comfy_quant U8 [71],
    mlp.fc2.weight I8 [48, 40] / .weight_scale F32 [] / .comfy_quant U8 [29];
    final_layer.norm.weight BF16 [48]; final_layer.adaln_proj.linear.weight BF16 [96, 20], .bias
    BF16 [96]; final_layer.video_out.weight F32 [16, 48], .bias F32 [16];
    final_layer.audio_out.weight F32 [6, 48], .bias F32 [6].
- h3_tiny_int8_case.safetensors (inputs in h3_tiny_case.safetensors: text, text_tags, keyframe,
  video, audio, t_video, t_audio):
    "f32_video_out" [4, 3, 4, 6], "f32_audio_out" [2, 5, 6]: the float32 forward on the
      dequantized weights;
    "w8a8_video_out", "w8a8_audio_out": the same with the 8 INT8 linears run W8A8 as above;
    "lora_video_out", "lora_audio_out": the float32 forward with h3_tiny_lora.safetensors merged
      as make_h3_fixtures.py merges it (diffusers' _convert_non_diffusers_minimax_h3_lora_to_diffusers,
      W += B A at strength 1), into the dequantized weights for the INT8 linears it adapts
      (blocks.0.attn.qkv_proj, blocks.1.mlp.fc1, blocks.1.attn.out_proj).
Measured: max |f32 out| 3.50 (video), 2.35 (audio), rms about 1; max |w8a8 - f32| 8.9e-3 (video),
6.2e-3 (audio), rms 2.8e-3 / 2.2e-3; max |f32 - h3_tiny_case's BF16 video_out/audio_out| 1.0e-2 /
7.2e-3 (the weights' INT8 rounding); the LoRA moves the outputs by up to 3.9 / 0.82.
"""
import os
import re
import sys

import torch
from comfy_kitchen.backends.eager.quantization import (
    dequantize_int8_convrot_weight,
    dequantize_int8_simple,
    int8_linear,
)
from diffusers import MiniMaxH3Transformer3DModel
from diffusers.loaders.lora_conversion_utils import _convert_non_diffusers_minimax_h3_lora_to_diffusers
from diffusers.loaders.single_file_utils import convert_minimax_h3_transformer_checkpoint_to_diffusers
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
    patchify_video_latents,
)
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_h3_fixtures as h3  # noqa: E402
from make_klein_int8_fixtures import group_for, quantize  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
PREFIX = "model.diffusion_model."
QUANTIZED = re.compile(r"blocks\.\d+\.(attn\.qkv_proj|attn\.out_proj|mlp\.fc1|mlp\.fc2)\.weight")
F16_BIAS = re.compile(r"blocks\.\d+\.adaln_proj\.linear\.bias")


def rotation_for(k):
    """ComfyUI's converter's group: the largest of 256, 64, 16 dividing k, or None (no ConvRot)."""
    try:
        return group_for(k)
    except StopIteration:
        return None


def pruned(ckpt, table, quantize_layer):
    """(the file's tensors, the checkpoint as read back in float32 with time_embedder kept, what
    quantize_layer returned by layer): quantize_layer(layer, w) gives None for a weight kept as it
    is, or (the layer's stored tensors, the dequantized weight, anything the caller keeps)."""
    stored, readback, kept = {}, {}, {}
    for name, w in ckpt.items():
        readback[name] = w.float()
        if name.startswith("time_embedder."):
            continue  # pruned: replaced by adaln_t_table
        layer = name[: -len(".weight")] if name.endswith(".weight") else None
        quantized = quantize_layer(layer, w) if layer else None
        if quantized:
            parts, readback[name], kept[layer] = quantized
            stored.update({f"{layer}.{k}": v for k, v in parts.items()})
        elif F16_BIAS.fullmatch(name):
            stored[name] = w.to(torch.float16)
            readback[name] = stored[name].float()
        else:
            stored[name] = w
    stored["adaln_t_table"] = table.float().contiguous()
    return {PREFIX + k: v.contiguous() for k, v in stored.items()}, readback, kept


def int8_layer(layer, w):
    """The blocks' (not the refiner's: token_refiner.) linears as int8_tensorwise, ConvRot where it fits."""
    if not QUANTIZED.fullmatch(layer + ".weight"):
        return None
    g = rotation_for(w.shape[1])
    parts, deq = quantize(w, g)
    return parts, deq, (parts["weight"], parts["weight_scale"], g)


def diffusers_model(ckpt_f32):
    model = MiniMaxH3Transformer3DModel(**h3.CONFIG).eval()
    sd = convert_minimax_h3_transformer_checkpoint_to_diffusers(dict(ckpt_f32), config=dict(h3.CONFIG))
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    return model


def checkpoint_modules(model, layer, out):
    """The diffusers modules a checkpoint linear of `out` rows becomes, each with its rows."""
    block = model.transformer_blocks[int(layer.split(".")[1])]
    if layer.endswith("attn.qkv_proj"):  # [q; k; v]
        n = out // 3
        return [(block.attn.to_q, torch.arange(0, n)), (block.attn.to_k, torch.arange(n, 2 * n)),
                (block.attn.to_v, torch.arange(2 * n, out))]
    if layer.endswith("mlp.fc1"):  # checkpoint [gate; value], SwiGLU's [value; gate]
        n = out // 2
        return [(block.ff.net[0].proj, torch.cat([torch.arange(n, out), torch.arange(0, n)]))]
    if layer.endswith("attn.out_proj"):
        return [(block.attn.to_out[0], torch.arange(out))]
    return [(block.ff.net[2], torch.arange(out))]


def w8a8_patches(model, codes):
    """Each quantized checkpoint linear's diffusers modules with their row slices of the stored codes."""
    patches = []
    for layer, (q, scale, g) in codes.items():
        for module, rows in checkpoint_modules(model, layer, q.shape[0]):
            s = scale if scale.numel() == 1 else scale[rows]
            patches.append((layer, module, rows, q[rows].contiguous(), s.contiguous(), g))
    return patches


def case_forward(case):
    """make_h3_fixtures.py's one pass over h3_tiny_case's layout (a first-frame keyframe):
    forward(model) gives the target video's rows unpatchified and the audio."""
    assert case["text_tags"].tolist() == h3.TEXT_TAGS
    c, pt, ph, pw = h3.CONFIG["in_channels"], *h3.CONFIG["patch_size"]
    _, f, hh, ww = case["video"].shape
    n_audio = case["audio"].shape[1]
    position_ids, token_tags, video_idx, audio_idx, text_idx, n_cond, _ = \
        MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            torch.tensor(h3.TEXT_TAGS), f, hh, ww, n_audio, (pt, ph, pw), 2, 2, 0, ("first",))
    position_ids = position_ids.float()
    t_video, t_audio = float(case["t_video"]), float(case["t_audio"])
    timesteps, timestep_idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
        video_idx, audio_idx, n_cond, 0, len(h3.TEXT_TAGS), t_video, t_audio, max(t_video, h3.KEYFRAME_T), 1.0)
    rows = torch.cat([patchify_video_latents(case["keyframe"][None], (pt, ph, pw)),
                      patchify_video_latents(case["video"][None], (pt, ph, pw))])
    audio_rows = case["audio"].reshape(-1, case["audio"].shape[-1])

    def forward(model):
        with torch.no_grad():
            v, a = model(hidden_states=rows[None], audio_hidden_states=audio_rows[None],
                         encoder_hidden_states=case["text"][None], timestep=timesteps, timestep_indices=timestep_idx,
                         token_tags=token_tags, position_ids=position_ids, video_indices=video_idx,
                         audio_indices=audio_idx, text_indices=text_idx, return_dict=False)
        v = v[0][n_cond:].reshape(f, hh // ph, ww // pw, c, pt, ph, pw).permute(3, 0, 4, 1, 5, 2, 6)
        return v.reshape(c, f * pt, hh, ww), a[0].reshape(case["audio"].shape)

    return forward


def run_int8(x, q, s, g):
    return int8_linear(x, q, s, None, torch.float32, convrot=g is not None, convrot_groupsize=g or 256)


def lora_merged(model, lora):
    """make_h3_fixtures.py's merge: diffusers' converter, then W += B A."""
    converted = _convert_non_diffusers_minimax_h3_lora_to_diffusers({k: v.float() for k, v in lora.items()})
    merged = {k: v.clone() for k, v in model.state_dict().items()}
    for key, a in converted.items():
        if ".lora_A." in key:
            target = key.removeprefix("transformer.").replace(".lora_A.weight", ".weight")
            merged[target] += converted[key.replace("lora_A", "lora_B")] @ a
    out = MiniMaxH3Transformer3DModel(**h3.CONFIG).eval()
    out.load_state_dict(merged)
    return out


def main():
    ckpt = load_file(os.path.join(OUT, "h3_tiny.safetensors"))
    case = load_file(os.path.join(OUT, "h3_tiny_case.safetensors"))
    lora = load_file(os.path.join(OUT, "h3_tiny_lora.safetensors"))
    forward = case_forward(case)

    # The committed file's own weights give the committed outputs: the pass is the same.
    v, a = forward(diffusers_model(ckpt))
    assert (v - case["video_out"]).abs().max() < 1e-5 and (a - case["audio_out"]).abs().max() < 1e-5

    stored, readback, codes = pruned(ckpt, case["adaln_t_table"], int8_layer)
    model = diffusers_model(readback)
    out = {}
    out["f32_video_out"], out["f32_audio_out"] = forward(model)

    patches = w8a8_patches(model, codes)
    gen = torch.Generator().manual_seed(5)
    for layer, module, picked, q, s, g in patches:
        # The slices are the dequantized weights diffusers holds, and int8_linear on a slice gives
        # the stacked weight's int8_linear's columns exactly.
        deq = dequantize_int8_convrot_weight(q, s, g) if g else dequantize_int8_simple(q, s)
        assert torch.equal(deq.float(), module.weight.detach()), layer
        x = torch.randn(5, q.shape[1], generator=gen)
        whole = run_int8(x, *codes[layer])
        assert torch.equal(run_int8(x, q, s, g), whole[:, picked]), layer
    for _, module, _, q, s, g in patches:
        module.forward = (lambda q, s, g: lambda x: run_int8(x, q, s, g))(q, s, g)
    out["w8a8_video_out"], out["w8a8_audio_out"] = forward(model)
    for _, module, *_ in patches:
        del module.forward  # back to nn.Linear's

    out["lora_video_out"], out["lora_audio_out"] = forward(lora_merged(model, lora))

    os.makedirs(OUT, exist_ok=True)
    save_file(stored, os.path.join(OUT, "h3_tiny_int8.safetensors"))
    save_file({k: t.contiguous() for k, t in out.items()}, os.path.join(OUT, "h3_tiny_int8_case.safetensors"))

    print("groups:", {k: g for k, (_, _, g) in codes.items()})
    print("tensors:", len(stored))
    for k in ("video", "audio"):
        f32, w8, lo = out[f"f32_{k}_out"], out[f"w8a8_{k}_out"], out[f"lora_{k}_out"]
        print(f"{k}: max|f32| {f32.abs().max():.4f}  rms {f32.pow(2).mean().sqrt():.4f}  "
              f"max|w8a8-f32| {(w8 - f32).abs().max():.3e}  max|lora-f32| {(lo - f32).abs().max():.3e}  "
              f"max|f32-bf16 model| {(f32 - case[f'{k}_out']).abs().max():.3e}")


if __name__ == "__main__":
    main()
