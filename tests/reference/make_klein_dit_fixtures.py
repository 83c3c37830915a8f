#!/usr/bin/env python3
"""Tiny FLUX.2 [klein] and FLUX.3 DiTs for gizml::diffusion::KleinDit (tests/diffusion/klein_dit_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_klein_dit_fixtures.py
(torch, safetensors and diffusers 0.42: Flux2Transformer2DModel and Flux3Transformer2DModel). The
references are diffusers' transformer_flux2.py and transformer_flux3.py in float32 on seeded
random weights rounded to BF16 first, so that the files hold exactly the weights used.
Writes into tests/data/diffusion/:
- klein2_tiny_diffusers.safetensors / klein2_tiny_bfl.safetensors: Flux2Transformer2DModel with
  the test config of diffusers' test_models_transformer_flux2.py (in_channels 4, 1 + 1 layers, 2
  heads of 16, joint 32, axes [4, 4, 4, 4], theta 2000, klein: no guidance embedder), BF16, in
  diffusers' names and in BFL's single-file names (what ComfyUI loads): diffusers'
  convert_flux2_transformer_checkpoint_to_diffusers inverted, checked by converting back.
- klein3_tiny_diffusers.safetensors / klein3_tiny_bfl.safetensors: Flux3Transformer2DModel alike
  (cond_in_channels 4, flow_map True: the step-distilled layout with ref_time_in, theta 10000),
  the BFL names under ComfyUI's `model.diffusion_model.` prefix
  (convert_flux3_transformer_checkpoint_to_diffusers inverted and checked the same way).
- klein_tiny_case.safetensors: "latent" [1, 4, 3, 4] (packed latent, 12 tokens), "text" [5, 32],
  "ref0" [1, 4, 2, 3], "ref1" [1, 4, 3, 2], "sigmas" [2] = 0.9, 0.35, "targets" [2] = 0.6, 0;
  for each model M in klein2, klein3 and step i: "M_out{i}" (no reference), "M_ref{i}" (ref0),
  and "M_refs0" (ref0 and ref1, step 0), each [1, 4, 3, 4]: the network's output on the latent's
  tokens, unpacked (ComfyUI's diffusion model output, the flow velocity). FLUX.2 gets timestep
  sigma and the ids of pipeline_flux2_klein.py (text (0, 0, 0, l), image (0, h, w, 0), reference
  i (10 + 10 i, h, w, 0), references after the image); FLUX.3 gets timestep sigma, target_timestep
  the target and the ids of modular_pipelines/flux3 (image (0, h / 2, w / 2, 0), reference i
  (0, h / 2, w / 2, -1 - i)).
- klein_sigmas.safetensors: "s{steps}_{seqlen}" = ComfyUI's Flux2Scheduler sigmas
  (comfy_extras/nodes_flux.py get_schedule, reproduced here in torch float32 as ComfyUI computes it).
"""
import math
import os

import torch
from diffusers import Flux2Transformer2DModel, Flux3Transformer2DModel
from diffusers.loaders.single_file_utils import (convert_flux2_transformer_checkpoint_to_diffusers,
                                                 convert_flux3_transformer_checkpoint_to_diffusers)
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")
FLUX2 = dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
             num_attention_heads=2, joint_attention_dim=32, timestep_guidance_channels=256,
             axes_dims_rope=[4, 4, 4, 4], guidance_embeds=False)
FLUX3 = dict(in_channels=4, cond_in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
             num_attention_heads=2, joint_attention_dim=32, axes_dims_rope=[4, 4, 4, 4], flow_map=True)
SIGMAS = [0.9, 0.35]
TARGETS = [0.6, 0.0]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and p.ndim == 1:  # RMSNorm gains
                v = 1 + 0.2 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
            p.copy_(v.to(torch.bfloat16).float())


def swap_halves(w):
    a, b = w.chunk(2, dim=0)
    return torch.cat([b, a], dim=0)


def flux2_bfl(sd):
    out = {}
    top = {"x_embedder.": "img_in.", "context_embedder.": "txt_in.",
           "time_guidance_embed.timestep_embedder.linear_1.": "time_in.in_layer.",
           "time_guidance_embed.timestep_embedder.linear_2.": "time_in.out_layer.",
           "double_stream_modulation_img.linear.": "double_stream_modulation_img.lin.",
           "double_stream_modulation_txt.linear.": "double_stream_modulation_txt.lin.",
           "single_stream_modulation.linear.": "single_stream_modulation.lin.", "proj_out.": "final_layer.linear."}
    double = {"attn.norm_q.weight": "img_attn.norm.query_norm.scale", "attn.norm_k.weight": "img_attn.norm.key_norm.scale",
              "attn.to_out.0.weight": "img_attn.proj.weight", "ff.linear_in.weight": "img_mlp.0.weight",
              "ff.linear_out.weight": "img_mlp.2.weight", "attn.norm_added_q.weight": "txt_attn.norm.query_norm.scale",
              "attn.norm_added_k.weight": "txt_attn.norm.key_norm.scale", "attn.to_add_out.weight": "txt_attn.proj.weight",
              "ff_context.linear_in.weight": "txt_mlp.0.weight", "ff_context.linear_out.weight": "txt_mlp.2.weight"}
    single = {"attn.to_qkv_mlp_proj.weight": "linear1.weight", "attn.to_out.weight": "linear2.weight",
              "attn.norm_q.weight": "norm.query_norm.scale", "attn.norm_k.weight": "norm.key_norm.scale"}
    for key, v in sd.items():
        if key == "norm_out.linear.weight":
            out["final_layer.adaLN_modulation.1.weight"] = swap_halves(v)
        elif key.startswith("transformer_blocks."):
            _, n, rest = key.split(".", 2)
            p = f"double_blocks.{n}."
            if rest in ("attn.to_q.weight", "attn.add_q_proj.weight"):
                stream = "img" if rest == "attn.to_q.weight" else "txt"
                k, vv = (rest.replace("to_q", "to_k"), rest.replace("to_q", "to_v")) if stream == "img" else \
                    (rest.replace("add_q", "add_k"), rest.replace("add_q", "add_v"))
                out[p + stream + "_attn.qkv.weight"] = torch.cat([v, sd[f"transformer_blocks.{n}.{k}"],
                                                                  sd[f"transformer_blocks.{n}.{vv}"]], dim=0)
            elif rest in double:
                out[p + double[rest]] = v
        elif key.startswith("single_transformer_blocks."):
            _, n, rest = key.split(".", 2)
            out[f"single_blocks.{n}.{single[rest]}"] = v
        else:
            for a, b in top.items():
                if key.startswith(a):
                    out[b + key[len(a):]] = v
                    break
            else:
                raise KeyError(key)
    return out


def flux3_bfl(sd):
    exact = {"timestep_embedder.linear_1.weight": "time_in.in_layer.weight",
             "timestep_embedder.linear_2.weight": "time_in.out_layer.weight",
             "target_timestep_embedder.linear_1.weight": "ref_time_in.in_layer.weight",
             "target_timestep_embedder.linear_2.weight": "ref_time_in.out_layer.weight",
             "proj_out.weight": "final_layer.image.linear.weight"}
    prefixes = {"x_embedders.": "emb_in.", "context_embedder.": "txt_in.", "mode_blocks.": "content_mode_blocks.",
                "single_transformer_blocks.": "single_blocks."}
    suffixes = {"attn.to_q.weight": "q_proj.weight", "attn.to_k.weight": "k_proj.weight",
                "attn.to_v.weight": "v_proj.weight", "attn.to_out.0.weight": "attn_out.weight",
                "attn.norm_q.weight": "norm.query_norm.scale", "attn.norm_k.weight": "norm.key_norm.scale",
                "ff.linear_in.weight": "mlp_in.weight", "ff.linear_out.weight": "mlp_out.weight"}
    out = {}
    for key, v in sd.items():
        if key == "norm_out.linear.weight":
            out["final_layer.image.adaLN_modulation.1.weight"] = swap_halves(v)
            continue
        if key in exact:
            out[exact[key]] = v
            continue
        new = key
        for a, b in prefixes.items():
            if new.startswith(a):
                new = b + new[len(a):]
                break
        if "modulations." in new:
            new = new.replace(".linear.weight", ".lin.weight")
        for a, b in suffixes.items():
            if new.endswith(a):
                new = new[: -len(a)] + b
                break
        out[new] = v
    return out


def check_roundtrip(bfl, sd, convert):
    back = convert({k: v.clone() for k, v in bfl.items()})
    assert set(back) == set(sd), (set(back) ^ set(sd))
    for k in sd:
        assert torch.equal(back[k], sd[k]), k


def tokens(latent):
    return latent.flatten(2).transpose(1, 2)


def ids(h, w, t=0.0, l=0.0, scale=1.0):
    grid = torch.cartesian_prod(torch.arange(h), torch.arange(w)).float() * scale
    n = h * w
    return torch.cat([torch.full((n, 1), t), grid, torch.full((n, 1), l)], dim=1)


def text_ids(n):
    return torch.cat([torch.zeros(n, 3), torch.arange(n).float()[:, None]], dim=1)


def unpack(out, h, w):
    return out[:, : h * w].transpose(1, 2).reshape(1, -1, h, w).contiguous()


def flux2_forward(model, latent, refs, text, sigma):
    h, w = latent.shape[2:]
    x, xi = [tokens(latent)], [ids(h, w)]
    for i, r in enumerate(refs):
        x.append(tokens(r))
        xi.append(ids(r.shape[2], r.shape[3], t=10.0 + 10.0 * i))
    out = model(hidden_states=torch.cat(x, 1), encoder_hidden_states=text[None], timestep=torch.tensor([sigma]),
                img_ids=torch.cat(xi, 0), txt_ids=text_ids(text.shape[0]), return_dict=False)[0]
    return unpack(out, h, w)


def flux3_forward(model, latent, refs, text, sigma, target):
    h, w = latent.shape[2:]
    kw = {}
    if refs:
        kw["image_cond_hidden_states"] = torch.cat([tokens(r) for r in refs], 1)
        kw["image_cond_ids"] = torch.cat([ids(r.shape[2], r.shape[3], l=-1.0 - i, scale=0.5)
                                          for i, r in enumerate(refs)], 0)
    out = model(hidden_states=tokens(latent), encoder_hidden_states=text[None], timestep=torch.tensor([sigma]),
                img_ids=ids(h, w, scale=0.5), txt_ids=text_ids(text.shape[0]), target_timestep=torch.tensor([target]),
                return_dict=False, **kw)[0]
    return unpack(out, h, w)


def flux2_sigmas(steps, seq_len):
    # ComfyUI comfy_extras/nodes_flux.py: compute_empirical_mu, get_schedule.
    a1, b1 = 8.73809524e-05, 1.89833333
    a2, b2 = 0.00016927, 0.45666666
    if seq_len > 4300:
        mu = a2 * seq_len + b2
    else:
        m_200 = a2 * seq_len + b2
        m_10 = a1 * seq_len + b1
        a = (m_200 - m_10) / 190.0
        b = m_200 - 200.0 * a
        mu = a * steps + b
    t = torch.linspace(1, 0, steps + 1)
    return math.exp(mu) / (math.exp(mu) + (1 / t - 1) ** 1.0)


def make_model(cls, config, gen, to_bfl, convert, name, bfl_prefix):
    """A seeded model saved in diffusers' names and in BFL's (under bfl_prefix), BF16."""
    model = cls(**config).eval()
    randomize(model, gen)
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    bfl = to_bfl(sd)
    check_roundtrip(bfl, sd, convert)
    save_file({k: v.to(torch.bfloat16) for k, v in sd.items()}, os.path.join(OUT, name + "_diffusers.safetensors"))
    save_file({bfl_prefix + k: v.to(torch.bfloat16).contiguous() for k, v in bfl.items()},
              os.path.join(OUT, name + "_bfl.safetensors"))
    return model


def main():
    os.makedirs(OUT, exist_ok=True)
    gen = torch.Generator().manual_seed(24)
    latent = torch.randn(1, 4, 3, 4, generator=gen)
    refs = [torch.randn(1, 4, 2, 3, generator=gen), torch.randn(1, 4, 3, 2, generator=gen)]
    text = torch.randn(5, 32, generator=gen)
    case = {"latent": latent, "text": text, "ref0": refs[0], "ref1": refs[1], "sigmas": torch.tensor(SIGMAS),
            "targets": torch.tensor(TARGETS)}

    torch.manual_seed(0)
    m2 = make_model(Flux2Transformer2DModel, FLUX2, gen, flux2_bfl, convert_flux2_transformer_checkpoint_to_diffusers,
                    "klein2_tiny", "")
    m3 = make_model(Flux3Transformer2DModel, FLUX3, gen, flux3_bfl, convert_flux3_transformer_checkpoint_to_diffusers,
                    "klein3_tiny", "model.diffusion_model.")

    with torch.no_grad():
        for i, (s, t) in enumerate(zip(SIGMAS, TARGETS)):
            case[f"klein2_out{i}"] = flux2_forward(m2, latent, [], text, s)
            case[f"klein2_ref{i}"] = flux2_forward(m2, latent, refs[:1], text, s)
            case[f"klein3_out{i}"] = flux3_forward(m3, latent, [], text, s, t)
            case[f"klein3_ref{i}"] = flux3_forward(m3, latent, refs[:1], text, s, t)
        case["klein2_refs0"] = flux2_forward(m2, latent, refs, text, SIGMAS[0])
        case["klein3_refs0"] = flux3_forward(m3, latent, refs, text, SIGMAS[0], TARGETS[0])
    save_file({k: v.contiguous() for k, v in case.items()}, os.path.join(OUT, "klein_tiny_case.safetensors"))

    sig = {}
    for steps, seq in [(4, 4096), (16, 4096), (16, 1024), (20, 6000), (1, 256)]:
        sig[f"s{steps}_{seq}"] = flux2_sigmas(steps, seq).float().contiguous()
    save_file(sig, os.path.join(OUT, "klein_sigmas.safetensors"))
    print({k: v.tolist() for k, v in sig.items() if k == "s4_4096"})


if __name__ == "__main__":
    main()
