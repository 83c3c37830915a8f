#!/usr/bin/env python3
"""Tiny MiniMax H3 video and audio decoders for gizml::diffusion::H3VideoDecoder and H3AudioDecoder
(tests/diffusion/h3_decoder_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_h3_decoder_fixtures.py
(torch, safetensors and diffusers 0.42.1, whose AutoencoderKLMiniMaxH3 and AutoencoderKLMiniMaxH3Audio are the
reference). Random weights in the models' structure at tiny widths; the decode is the pipeline's
(diffusers modular_pipelines/minimax_h3/decoders.py): latents * latents_std + latents_mean, vae.decode (the video
one chunked in time and tiled in space, as released), then for video * ImageNet std + mean, clamp to [0, 1].
Writes into tests/data/diffusion/:
- h3_video_tiny.safetensors: the video VAE's decoder side in the original checkpoint's names
  (video_vae/source/model.safetensors: decoder.x_embedder, per-head interleaved attn.to_qkv, ff.w1 as
  [gate; up], decoder.mask_token; the inverse of diffusers' scripts/convert_minimax_h3_to_diffusers.py), with
  quant_conv and encoder.conv_in as encoder tensors the decoder ignores. BF16 to stay small; the reference
  computes in float32 from the same values.
- h3_video_tiny_diffusers.safetensors: the same weights in diffusers' names.
- h3_video_tiny_case.safetensors: latents_mean, latents_std [24]; case a: latents [1, 24, 7, 3, 4] -> frames
  [1, 3, 22, 12, 16]; case b: latents [1, 24, 10, 3, 4] -> frames [1, 3, 34, 12, 16] (two chunks cross-faded,
  trailing pad frames cut). Tiles of 8 pixels overlapping by at least 4 (2 x 3 tiles a frame).
- h3_audio_tiny.safetensors: the audio VAE (names as stored, weight_g / weight_v and the resampling filters).
- h3_audio_tiny_case.safetensors: latents_mean, latents_std [32]; latents [2, 32, 6] -> samples [2, 1, 60].
"""
import os

import torch
from safetensors.torch import save_file

from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")

VIDEO = dict(
    block_out_channels=[32, 32],
    layers_per_block=1,
    spatial_downsample_factors=[2, 2],
    temporal_downsample_factors=[2, 2],
    decoder_num_layers=2,
    decoder_num_attention_heads=2,
    decoder_attention_head_dim=32,
)
TILE, TILE_OVERLAP = 8, 4
PIXEL_MEAN, PIXEL_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
AUDIO = dict(
    encoder_dim=4,
    encoder_rates=[5, 2],
    latent_dim=64,
    latent_channels=32,
    decoder_dim=32,
    decoder_rates=[5, 2],
    decoder_kernel_sizes=[9, 4],
)


def randomize(model, gen, skip=()):
    """Every parameter random (the zero-initialized scales, registers and Snake exponents too)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(s in name for s in skip):
                continue
            if name.endswith(("alpha", "beta")):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            elif name.endswith(("scale1", "scale2")) or "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen) if "norm" in name else
                        0.5 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                bound = 1.0 / max(1, p[0].numel()) ** 0.5 if p.ndim > 1 else 0.2
                p.copy_((torch.rand(p.shape, generator=gen) * 2 - 1) * bound)


def to_original(state, heads, head_dim):
    """diffusers' video VAE names to the original checkpoint's (convert_video_vae_key inverted)."""
    out = {}
    for key, t in state.items():
        if not key.startswith(("decoder.", "post_quant_conv.", "quant_conv.")) and key not in (
                "encoder.conv_in.weight", "encoder.conv_in.bias"):
            continue
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        if ".attn.to_q." in key:
            q, k, v = (state[key.replace(".to_q.", f".to_{p}.")] for p in "qkv")
            rest = t.shape[1:]
            per_head = [x.reshape(heads, head_dim, *rest) for x in (q, k, v)]
            out[key.replace(".to_q.", ".to_qkv.")] = torch.cat(per_head, dim=1).reshape(3 * heads * head_dim, *rest)
            continue
        name = key.replace("decoder.proj_in.", "decoder.x_embedder.").replace(".attn.to_out.0.", ".attn.to_out.")
        name = name.replace(".ff.net.2.", ".ff.w2.")
        if ".ff.net.0.proj." in key:
            up, gate = t.chunk(2, dim=0)
            t = torch.cat([gate, up], dim=0)
            name = name.replace(".ff.net.0.proj.", ".ff.w1.")
        out[name] = t
    out["decoder.mask_token"] = torch.zeros(state["decoder.proj_in.bias"].shape[0])
    return {k: v.contiguous() for k, v in out.items()}


def video(gen):
    vae = AutoencoderKLMiniMaxH3(**VIDEO).eval()
    randomize(vae, gen)
    with torch.no_grad():  # BF16 values, computed in float32
        for p in vae.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    vae.enable_tiling(TILE, TILE, TILE_OVERLAP, TILE_OVERLAP)
    mean = 0.3 * torch.randn(24, generator=gen)
    std = 1 + 0.3 * torch.rand(24, generator=gen)
    case = {"latents_mean": mean, "latents_std": std}
    pm, ps = torch.tensor(PIXEL_MEAN).view(1, 3, 1, 1, 1), torch.tensor(PIXEL_STD).view(1, 3, 1, 1, 1)
    for tag, frames in (("a", 7), ("b", 10)):
        z = torch.randn(1, 24, frames, 3, 4, generator=gen)
        with torch.no_grad():
            x = vae.decode(z * std.view(1, -1, 1, 1, 1) + mean.view(1, -1, 1, 1, 1), return_dict=False)[0]
        case["latents_" + tag] = z
        case["frames_" + tag] = (x * ps + pm).clamp(0, 1)
        print(f"video {tag}: latents {list(z.shape)} -> frames {list(x.shape)}, raw in [{x.min():.3f}, {x.max():.3f}]")
    state = {k: v.detach() for k, v in vae.state_dict().items()}
    decoder_side = {k: v for k, v in state.items() if k.startswith(("decoder.", "post_quant_conv."))}
    original = to_original(state, VIDEO["decoder_num_attention_heads"], VIDEO["decoder_attention_head_dim"])
    save_file({k: v.to(torch.bfloat16) for k, v in original.items()}, os.path.join(OUT, "h3_video_tiny.safetensors"))
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in decoder_side.items()},
              os.path.join(OUT, "h3_video_tiny_diffusers.safetensors"))
    save_file({k: v.contiguous() for k, v in case.items()}, os.path.join(OUT, "h3_video_tiny_case.safetensors"))


def audio(gen):
    vae = AutoencoderKLMiniMaxH3Audio(**AUDIO).eval()
    randomize(vae, gen, skip=("weight_g",))
    with torch.no_grad():  # weight_norm's g about the norm of v, so the scales stay those of an init
        for name, p in vae.named_parameters():
            if name.endswith("weight_g"):
                v = dict(vae.named_parameters())[name[:-1] + "v"]
                p.copy_(v.flatten(1).norm(dim=1).view(p.shape) * (1 + 0.2 * torch.randn(p.shape, generator=gen)))
    mean = 0.3 * torch.randn(32, generator=gen)
    std = 1 + 0.3 * torch.rand(32, generator=gen)
    z = torch.randn(2, 32, 6, generator=gen)
    with torch.no_grad():
        x = vae.decode(z * std.view(1, -1, 1) + mean.view(1, -1, 1), return_dict=False)[0]
    print(f"audio: latents {list(z.shape)} -> samples {list(x.shape)} in [{x.min():.3f}, {x.max():.3f}], "
          f"clamped {int((x.abs() >= 1).sum())}")
    save_file({k: v.detach().contiguous() for k, v in vae.state_dict().items()},
              os.path.join(OUT, "h3_audio_tiny.safetensors"))
    save_file({"latents_mean": mean, "latents_std": std, "latents": z, "samples": x.contiguous()},
              os.path.join(OUT, "h3_audio_tiny_case.safetensors"))


def main():
    os.makedirs(OUT, exist_ok=True)
    video(torch.Generator().manual_seed(31))
    audio(torch.Generator().manual_seed(32))


if __name__ == "__main__":
    main()
