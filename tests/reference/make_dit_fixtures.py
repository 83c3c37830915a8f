#!/usr/bin/env python3
"""A tiny Z-Image DiT for gizml::diffusion::ZImageDit (tests/diffusion/z_image_dit_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_dit_fixtures.py
(torch, safetensors and diffusers: `pip install diffusers`). The reference is diffusers'
ZImageTransformer2DModel (src/diffusers/models/transformers/transformer_z_image.py) in float32
on seeded random weights, rounded to BF16 first so that the file holds exactly the weights used.
Writes into tests/data/diffusion/:
- dit_tiny.safetensors: the weights in ComfyUI's single-file names (diffusers'
  convert_z_image_transformer_checkpoint_to_diffusers inverted: to_q/to_k/to_v fused into qkv,
  to_out.0 -> out, norm_q/norm_k -> q_norm/k_norm, all_x_embedder.2-1 -> x_embedder,
  all_final_layer.2-1 -> final_layer), BF16. Config: dim 48, 2 heads of 24, rope axes [4, 8, 12]
  (distinct, so that a swapped axis shows), theta 256, 2 main layers, 1 noise and 1 context
  refiner, cap_feat_dim 32, in_channels 16, patch 2.
- dit_tiny_case.safetensors: "latent" [1, 16, 6, 10] and "caption" [7, 32] F32 (seeded normal;
  15 image and 7 caption tokens, each padded to 32), "sigmas" [2], and "out0", "out1"
  [1, 16, 6, 10]: what ComfyUI's NextDiT returns at each sigma, -model(x, 1 - sigma, caption)
  (diffusers' pipeline negates the same way), so that denoised = x - sigma out.
"""
import os

import torch
from diffusers import ZImageTransformer2DModel
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")
CONFIG = dict(all_patch_size=(2,), all_f_patch_size=(1,), in_channels=16, dim=48, n_layers=2,
              n_refiner_layers=1, n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True,
              cap_feat_dim=32, rope_theta=256.0, t_scale=1000.0, axes_dims=[4, 8, 12],
              axes_lens=[256, 64, 64])
SIGMAS = [0.9, 0.3]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # RMSNorm gains
                v = 1 + 0.2 * torch.randn(p.shape, generator=gen)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
            elif "pad_token" in name:
                v = torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).float())


def comfy_names(sd):
    out = {}
    for key, v in sd.items():
        if ".attention.to_k." in key or ".attention.to_v." in key:
            continue
        if ".attention.to_q." in key:
            q = key
            out[key.replace(".to_q.", ".qkv.")] = torch.cat(
                [sd[q], sd[q.replace(".to_q.", ".to_k.")], sd[q.replace(".to_q.", ".to_v.")]], dim=0)
            continue
        new = (key.replace("all_final_layer.2-1.", "final_layer.").replace("all_x_embedder.2-1.", "x_embedder.")
               .replace(".attention.to_out.0.", ".attention.out.").replace(".attention.norm_q.", ".attention.q_norm.")
               .replace(".attention.norm_k.", ".attention.k_norm."))
        out[new] = v
    return out


def main():
    gen = torch.Generator().manual_seed(23)
    model = ZImageTransformer2DModel(**CONFIG).float().eval()
    randomize(model, gen)
    latent = torch.randn(1, 16, 6, 10, generator=gen)
    caption = torch.randn(7, CONFIG["cap_feat_dim"], generator=gen)
    case = {"latent": latent, "caption": caption, "sigmas": torch.tensor(SIGMAS, dtype=torch.float32)}
    with torch.no_grad():
        for i, sigma in enumerate(SIGMAS):
            t = 1.0 - torch.tensor([sigma], dtype=torch.float32)  # ComfyUI: 1 - sigma in float32
            out = model([latent[0].unsqueeze(1)], t, [caption])[0][0]  # [C, 1, H, W]
            case[f"out{i}"] = (-out.squeeze(1)).unsqueeze(0).contiguous()
    weights = {k: v.to(torch.bfloat16).contiguous() for k, v in comfy_names(model.state_dict()).items()}
    os.makedirs(OUT, exist_ok=True)
    save_file(weights, os.path.join(OUT, "dit_tiny.safetensors"))
    save_file({k: v.contiguous() for k, v in case.items()}, os.path.join(OUT, "dit_tiny_case.safetensors"))
    print("weights:", sum(v.numel() for v in weights.values()), "values;",
          "out0 absmax", case["out0"].abs().max().item(), "out1 absmax", case["out1"].abs().max().item())


if __name__ == "__main__":
    main()
