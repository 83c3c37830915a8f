#!/usr/bin/env python3
"""FLUX.2 [klein]'s whole pipeline on tiny parts, for gizml::diffusion::KleinPipeline
(tests/diffusion/klein_pipeline_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_klein_pipeline_fixtures.py
(torch, transformers 5, diffusers 0.42, safetensors, Pillow). Deterministic.

The reference is diffusers' Flux2KleinPipeline (pipelines/flux2/pipeline_flux2_klein.py, cfg 1)
in float32 built from:
- the text encoder of make_klein_text_fixtures.py (tests/data/diffusion/klein_text_tiny, Qwen3's
  real tokenizer): rows 48 wide;
- the VAE of make_flux2_vae_fixtures.py (flux2_vae_tiny_diffusers.safetensors: 32 latent
  channels, 128 patchified, scale 4);
- a tiny Flux2Transformer2DModel made here to fit them (make_klein_dit_fixtures.py's config with
  in_channels 128 and joint_attention_dim 48, its randomize and its BFL names).
The noise is passed as latents: torch.randn([1, 128, H / 4, W / 4]) from a CPU generator seeded
42, ComfyUI's noise for EmptyFlux2LatentImage's latent. The scheduler is the klein pipeline's
FlowMatchEulerDiscreteScheduler (dynamic shifting, exponential; mu from compute_empirical_mu).
The pixels become bytes as ComfyUI's SaveImage does (clamp((x + 1) / 2) x 255, truncated).
Writes into tests/data/diffusion/:
- klein_pipeline_dit.safetensors: the DiT in BFL's single-file names, BF16.
- klein_pipeline_case.safetensors: for the run r in t2i (PROMPTS[0], 48 x 32, no picture) and
  edit (PROMPTS[1], 40 x 36, the picture "picture" U8 [66, 70, 3], seeded, which the pipeline
  crops to 68 x 64; diffusers wants pictures of 64 pixels a side or more): "r_text" [512, 48],
  "r_noise", "r_sigmas" [5], "r_step{i}" the latent after step i (unpacked [1, 128, h, w]), "r_decoded" [1, 3, H, W] F32, "r_image" U8
  [H, W, 3]; for edit also "edit_ref0" [1, 128, 16, 17] (the picture's latent). And edits, the
  edit's prompt and size with two pictures, "picture" and "edits_picture1" U8 [64, 72, 3] (seeded;
  reference 1 at t = 20): only "edits_step3" and "edits_image" (its text, noise and sigmas are
  the edit's).
"""
import os
import sys

import torch
import transformers as tf
from diffusers import AutoencoderKLFlux2, Flux2KleinPipeline, Flux2Transformer2DModel, FlowMatchEulerDiscreteScheduler
from PIL import Image
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_flux2_vae_fixtures as vaefix  # noqa: E402
import make_klein_dit_fixtures as ditfix  # noqa: E402
import make_klein_text_fixtures as textfix  # noqa: E402
import make_zimage_pipeline_fixtures as zimage  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
SEED, STEPS = 42, 4
DIT = dict(ditfix.FLUX2, in_channels=128, joint_attention_dim=48)
RUNS = [("t2i", textfix.PROMPTS[0], 48, 32, 0), ("edit", textfix.PROMPTS[1], 40, 36, 1),
        ("edits", textfix.PROMPTS[1], 40, 36, 2)]


def text_encoder():
    model = tf.Qwen3ForCausalLM(tf.Qwen3Config(**textfix.CONFIG)).float().eval()
    stored = load_file(os.path.join(OUT, "klein_text_tiny", "weights.safetensors"))
    embed = torch.zeros(model.model.embed_tokens.weight.shape)
    embed[stored.pop("embed_ids")] = stored.pop("embed_rows").float()
    stored = {k: v.float() for k, v in stored.items()}
    stored["model.embed_tokens.weight"] = embed
    missing, unexpected = model.load_state_dict(stored, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}, (missing, unexpected)
    model.tie_weights()
    return model


def vae():
    model = AutoencoderKLFlux2(block_out_channels=vaefix.CHANNELS, down_block_types=("DownEncoderBlock2D",) * vaefix.LEVELS,
                               up_block_types=("UpDecoderBlock2D",) * vaefix.LEVELS, layers_per_block=vaefix.BLOCKS,
                               latent_channels=32, norm_num_groups=32).eval()
    state = load_file(os.path.join(OUT, "flux2_vae_tiny_diffusers.safetensors"))
    model.load_state_dict({k: (v.float() if v.is_floating_point() else v) for k, v in state.items()})
    return model


def unpack(tokens, h, w):
    return tokens.reshape(1, h, w, -1).permute(0, 3, 1, 2).contiguous()


def main():
    dit = Flux2Transformer2DModel(**DIT).eval()
    ditfix.randomize(dit, torch.Generator().manual_seed(43))
    sd = {k: v.to(torch.bfloat16).contiguous() for k, v in dit.state_dict().items()}
    bfl = ditfix.flux2_bfl(sd)
    ditfix.check_roundtrip(bfl, sd, ditfix.convert_flux2_transformer_checkpoint_to_diffusers)
    save_file({k: v.contiguous() for k, v in bfl.items()}, os.path.join(OUT, "klein_pipeline_dit.safetensors"))

    scheduler = FlowMatchEulerDiscreteScheduler(use_dynamic_shifting=True, time_shift_type="exponential")
    pipe = Flux2KleinPipeline(scheduler=scheduler, vae=vae(), text_encoder=text_encoder(), tokenizer=tf.AutoTokenizer.from_pretrained(zimage.TOKENIZER),
                              transformer=dit, is_distilled=True)
    gen = torch.Generator().manual_seed(44)
    picture = torch.randint(0, 256, (66, 70, 3), generator=gen, dtype=torch.uint8)
    second = torch.randint(0, 256, (64, 72, 3), generator=torch.Generator().manual_seed(45), dtype=torch.uint8)
    case = {"picture": picture, "edits_picture1": second}
    refs, original = [], pipe.prepare_image_latents

    def capture(*args, **kwargs):
        out = original(*args, **kwargs)
        refs.append(out[0])
        return out

    pipe.prepare_image_latents = capture
    for run, prompt, width, height, pictures in RUNS:
        scale = pipe.vae_scale_factor * 2
        noise = torch.randn([1, 128, height // scale, width // scale], generator=torch.Generator().manual_seed(SEED))
        h, w = noise.shape[2:]
        steps = []
        refs.clear()

        def on_step(p, i, t, kw):
            steps.append(unpack(kw["latents"], h, w))
            return {}

        with torch.no_grad():
            text = pipe.encode_prompt(prompt=prompt, device=torch.device("cpu"))[0]
            images = [Image.fromarray(p.numpy()) for p in (picture, second)[:pictures]]
            latent = pipe(prompt=prompt, image=images or None, width=width,
                           height=height, num_inference_steps=STEPS, latents=noise, guidance_scale=1.0,
                           output_type="latent", callback_on_step_end=on_step)[0]
            decoded = pipe.vae.decode(latent, return_dict=False)[0]
        pixels = (decoded[0] / 2 + 0.5).clamp(0, 1)  # the pipeline's postprocess, then SaveImage's bytes
        case[f"{run}_image"] = (pixels * 255).clamp(0, 255).to(torch.uint8).permute(1, 2, 0).contiguous()
        case[f"{run}_step{len(steps) - 1}"] = steps[-1]
        print(f"{run}: {width} x {height}, {pictures} pictures, latent absmax {steps[-1].abs().max().item():.3g}")
        if run == "edits":  # the rest is the edit's
            continue
        case[f"{run}_text"] = text[0].contiguous()
        case[f"{run}_noise"] = noise
        case[f"{run}_sigmas"] = pipe.scheduler.sigmas.float().contiguous()
        for i, s in enumerate(steps):
            case[f"{run}_step{i}"] = s
        case[f"{run}_decoded"] = decoded.contiguous()
        if pictures:
            rh, rw = 64 // scale, 68 // scale
            case["edit_ref0"] = unpack(refs[0][0], rh, rw)
    save_file(case, os.path.join(OUT, "klein_pipeline_case.safetensors"))


if __name__ == "__main__":
    main()
