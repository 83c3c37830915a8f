#!/usr/bin/env python3
"""A tiny FLUX.2 VAE for gizml::diffusion::Flux2Vae (tests/diffusion/flux2_vae_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_flux2_vae_fixtures.py
(torch, safetensors and diffusers 0.42, which has AutoencoderKLFlux2). A diffusers
AutoencoderKLFlux2 with FLUX.2's structure at a tiny size (block_out_channels [32, 32], one ResNet
block a down level and two an up level, 32 latent channels, GroupNorm(32) as BFL hard-codes,
BatchNorm eps 1e-4 over the 2 x 2 patchified latents), random weights rounded to BF16 and run in
float32. The latents are those of diffusers' Flux2KleinPipeline: encode = the posterior's mode,
patchified 2 x 2 (channel 4 c + 2 dy + dx), (z - running_mean) / sqrt(running_var + eps); decode
= the inverse, unpatchified, then vae.decode.
Writes into tests/data/diffusion/:
- flux2_vae_tiny.safetensors: the weights in BFL's / ComfyUI's names (encoder.down.0.block.0...,
  encoder.quant_conv, decoder.post_quant_conv, bn.running_mean/var), from diffusers' names by the
  inverse of diffusers' scripts/convert_flux2_to_diffusers.py (the attention's q, k, v, proj_out
  as 1 x 1 convolutions [c, c, 1, 1], as BFL stores them).
- flux2_vae_tiny_diffusers.safetensors: the same weights as diffusers saves them
  (diffusion_pytorch_model.safetensors: encoder.down_blocks.0.resnets.0..., quant_conv,
  bn.num_batches_tracked too).
- flux2_vae_tiny_case.safetensors: "pixels" [1, 3, 16, 24] F32 (seeded uniform in [-1, 1]) and
  "encoded" [1, 128, 4, 6] (its normalized patchified latents); "latents" [1, 128, 3, 5] (seeded
  normal) and "decoded" [1, 3, 12, 20] (their pixels).
- vae_tiny_diffusers_names.txt: "BFL-name diffusers-name" a line for the FLUX.1 tiny decoder of
  make_vae_fixtures.py (vae_tiny.safetensors, with nin_shortcut blocks), as diffusers'
  single_file_utils.convert_ldm_vae_checkpoint renames it (flux_vae_test.cpp loads it so renamed).
With --full DIR: the three flux2_vae_tiny* files in DIR at FLUX.2's sizes (block_out_channels
[128, 256, 512, 512], two blocks a down level, about 170 MB each; pixels [1, 3, 32, 48], latents
[1, 128, 2, 3]), not committed: copied over the fixtures, flux2_vae_test.cpp compares them (its
tiny sizes' scale check aside).
"""
import os
import re
import sys

import torch
from diffusers import AutoencoderKLFlux2
from diffusers.loaders.single_file_utils import convert_ldm_vae_checkpoint
from safetensors.torch import load_file, save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")
LEVELS, CHANNELS, BLOCKS, PIXELS, LATENTS = 2, (32, 32), 1, [1, 3, 16, 24], [1, 128, 3, 5]
FULL = len(sys.argv) == 3 and sys.argv[1] == "--full"
if FULL:
    OUT = sys.argv[2]
    LEVELS, CHANNELS, BLOCKS, PIXELS, LATENTS = 4, (128, 256, 512, 512), 2, [1, 3, 32, 48], [1, 128, 2, 3]


def bfl_name(name):
    """diffusers' name of a tensor -> BFL's (the inverse of convert_flux2_vae_checkpoint_to_diffusers)."""
    top = {"quant_conv.": "encoder.quant_conv.", "post_quant_conv.": "decoder.post_quant_conv.",
           "encoder.conv_norm_out.": "encoder.norm_out.", "decoder.conv_norm_out.": "decoder.norm_out."}
    for old, new in top.items():
        if name.startswith(old):
            return new + name[len(old):]
    name = re.sub(r"mid_block\.resnets\.(\d)\.", lambda m: f"mid.block_{int(m.group(1)) + 1}.", name)
    name = name.replace("mid_block.attentions.0.", "mid.attn_1.")
    for old, new in (("group_norm.", "norm."), ("to_q.", "q."), ("to_k.", "k."), ("to_v.", "v."),
                     ("to_out.0.", "proj_out.")):
        name = name.replace("attn_1." + old, "attn_1." + new)
    name = re.sub(r"down_blocks\.(\d+)\.resnets\.", r"down.\1.block.", name)
    name = re.sub(r"down_blocks\.(\d+)\.downsamplers\.0\.", r"down.\1.downsample.", name)
    name = re.sub(r"up_blocks\.(\d+)\.resnets\.", lambda m: f"up.{LEVELS - 1 - int(m.group(1))}.block.", name)
    name = re.sub(r"up_blocks\.(\d+)\.upsamplers\.0\.", lambda m: f"up.{LEVELS - 1 - int(m.group(1))}.upsample.", name)
    return name.replace("conv_shortcut.", "nin_shortcut.")


def patchify(z):
    b, c, h, w = z.shape
    return z.view(b, c, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, c * 4, h // 2, w // 2)


def unpatchify(z):
    b, c, h, w = z.shape
    return z.reshape(b, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(b, c // 4, h * 2, w * 2)


def flux1_names():
    """Each tensor of the FLUX.1 tiny decoder with the name diffusers' conversion gives it (found by identity)."""
    bfl = load_file(os.path.join(OUT, "vae_tiny.safetensors"))
    levels = 1 + max(int(k.split(".")[2]) for k in bfl if k.startswith("decoder.up."))
    config = {"down_block_types": ["DownEncoderBlock2D"] * levels, "up_block_types": ["UpDecoderBlock2D"] * levels}
    converted = convert_ldm_vae_checkpoint(bfl, config)
    lines = []
    for new, t in converted.items():
        old = [k for k, v in bfl.items() if v.data_ptr() == t.data_ptr() or (v.numel() == t.numel() and v.flatten().equal(t.flatten()) and v.dtype == t.dtype)]
        assert len(old) == 1, (new, old)
        lines.append(f"{old[0]} {new}\n")
    assert len(lines) == len(bfl)
    with open(os.path.join(OUT, "vae_tiny_diffusers_names.txt"), "w") as f:
        f.writelines(sorted(lines))


def main():
    if not FULL:
        flux1_names()
    torch.manual_seed(29)
    vae = AutoencoderKLFlux2(block_out_channels=CHANNELS, down_block_types=("DownEncoderBlock2D",) * LEVELS,
                             up_block_types=("UpDecoderBlock2D",) * LEVELS, layers_per_block=BLOCKS, latent_channels=32,
                             norm_num_groups=32).eval()
    gen = torch.Generator().manual_seed(31)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if "norm" in name:  # GroupNorms away from 1 and 0, so that a misplaced one shows
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn(p.shape, generator=gen))
            p.copy_(p.to(torch.bfloat16).float())
        vae.bn.running_mean.copy_((0.3 * torch.randn(128, generator=gen)).to(torch.bfloat16).float())
        vae.bn.running_var.copy_((0.5 + 1.5 * torch.rand(128, generator=gen)).to(torch.bfloat16).float())
        vae.bn.num_batches_tracked.fill_(1000)
    eps = vae.config.batch_norm_eps
    mean = vae.bn.running_mean.view(1, -1, 1, 1)
    std = torch.sqrt(vae.bn.running_var.view(1, -1, 1, 1) + eps)

    pixels = torch.rand(PIXELS, generator=gen) * 2 - 1
    latents = torch.randn(LATENTS, generator=gen)
    with torch.no_grad():
        encoded = (patchify(vae.encode(pixels).latent_dist.mode()) - mean) / std
        decoded = vae.decode(unpatchify(latents * std + mean), return_dict=False)[0]

    state = {k: (v.to(torch.bfloat16) if v.is_floating_point() else v).contiguous() for k, v in vae.state_dict().items()}
    bfl = {}
    for k, v in state.items():
        if k == "bn.num_batches_tracked":
            continue
        if re.search(r"attentions\.0\.to_(q|k|v|out\.0)\.weight$", k):
            v = v.reshape(v.shape[0], v.shape[1], 1, 1).contiguous()
        bfl[bfl_name(k)] = v
    os.makedirs(OUT, exist_ok=True)
    save_file(bfl, os.path.join(OUT, "flux2_vae_tiny.safetensors"))
    save_file(state, os.path.join(OUT, "flux2_vae_tiny_diffusers.safetensors"))
    save_file({"pixels": pixels.contiguous(), "encoded": encoded.contiguous(), "latents": latents.contiguous(),
               "decoded": decoded.contiguous()}, os.path.join(OUT, "flux2_vae_tiny_case.safetensors"))
    print("eps", eps, "encoded", list(encoded.shape), "std", encoded.std().item(), "decoded", list(decoded.shape),
          "min", decoded.min().item(), "max", decoded.max().item())
    print(sorted(bfl)[:8], len(bfl), len(state))


if __name__ == "__main__":
    main()
