#!/usr/bin/env python3
"""A tiny MiniMax H3 transformer for gizml::diffusion::H3Model (tests/diffusion/h3_model_test.cpp).

Run:  /path/to/venv-with-torch/bin/python tests/reference/make_h3_fixtures.py
(torch, safetensors, numpy and diffusers 0.42.1 or later: `pip install diffusers`). The reference
is diffusers' MiniMaxH3Transformer3DModel (models/transformers/transformer_minimax_h3.py), its
MiniMaxH3Scheduler and the packed layout of its modular pipeline (MiniMaxH3PrepareLayoutStep,
MiniMaxH3SetTimestepsStep, MiniMaxH3LoopSchedulerStep), in float32 on seeded random weights
rounded to BF16 first, so that the file holds exactly the weights used.
Writes into tests/data/diffusion/:
- h3_tiny.safetensors: the weights under the checkpoint's own names (what diffusers'
  convert_minimax_h3_transformer_checkpoint_to_diffusers reads: blocks.N.attn.qkv_proj stacked
  [q; k; v], mlp.fc1 [gate; value], video_patch_proj, final_layer.*, time_embedder.proj_in, ...;
  the round trip through that converter is checked here). The modules diffusers keeps in F32
  (patch projections, time embedder, output heads) are F32, the rest BF16, as released.
  Config: hidden 48, 2 heads of 32 (inner 64), rope_freq_dim 4 (24 of 32 channels rotated), ffn
  40, video channels 4 in 1 x 2 x 2 patches, audio channels 6, text 24, freq 32, time 40 -> 20,
  2 blocks, 1 refiner block.
- h3_tiny_case.safetensors: a t2va layout with a first-frame keyframe: "text" [7, 24] (tags in
  "text_tags", two of them 0 as a vision block's), "keyframe" [4, 1, 4, 6], "video" [4, 3, 4, 6]
  and "audio" [2, 5, 6] (stereo, 5 latents, 6 channels) as our API takes them;
  - "block_in", "block_out" [41, 48]: the first block's input and output in that forward, with
    "block_timesteps" and "block_rows" (each row's timestep index * 3 + modality tag);
  - "video_out" [4, 3, 4, 6], "audio_out" [2, 5, 6]: one forward's velocities at video t "t_video"
    and audio t "t_audio" (the keyframe at max(t_video, 0.999)), the target video's rows only;
  - "sigmas_video" [3], "sigmas_audio" [3]: the schedules of 2 passes (shift 12 and 3), and
    "mods_step0_block1" [4 * 3, 6 * 48] / "final_step0" [4, 2 * 48]: block 1's and the output
    norm's AdaLN rows at step 0 for its timesteps (video t, audio t, keyframe t, 1.0, in that order);
  - "sample_video" [4, 3, 4, 6], "sample_audio" [2, 5, 6]: 2 Euler passes from "video"/"audio"
    as the initial noise, the keyframe held;
  - "adaln_t_table" [1025, 20]: a pruned checkpoint's AdaLN map for this model at full rank
    (silu of the time embedding over a grid of t; the released ones are rank 8, their AdaLN
    projections reduced to match), which replaces time_embedder.*;
  - "lora_video_out", "lora_audio_out": the same pass with h3_tiny_lora.safetensors merged.
- h3_tiny_lora.safetensors: a LoRA in kohya's layout (diffusion_model.<module>.lora_down/lora_up
  BF16, .alpha) on 8 of the checkpoint's linears, ranks 2 and 4; the reference merges it as
  diffusers reads it (_convert_non_diffusers_minimax_h3_lora_to_diffusers, then W += B A).
"""
import os

import numpy as np
import torch
from diffusers import MiniMaxH3Transformer3DModel
from diffusers.loaders.lora_conversion_utils import _convert_non_diffusers_minimax_h3_lora_to_diffusers
from diffusers.loaders.single_file_utils import convert_minimax_h3_transformer_checkpoint_to_diffusers
from diffusers.modular_pipelines.minimax_h3.before_denoise import (
    MiniMaxH3PrepareLayoutStep,
    MiniMaxH3SetTimestepsStep,
    patchify_video_latents,
)
from diffusers.schedulers import MiniMaxH3Scheduler
from safetensors.torch import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "diffusion")
CONFIG = dict(num_attention_heads=2, attention_head_dim=32, hidden_size=48, num_layers=2, num_refiner_layers=1,
              ffn_dim=40, in_channels=4, audio_in_channels=6, patch_size=(1, 2, 2), text_dim=24, freq_dim=32,
              time_embed_hidden_dim=40, time_embed_dim=20, rope_freq_dim=4, rope_theta=10000.0)
F32_MODULES = ("proj_in", "audio_proj_in", "time_embedder", "proj_out", "audio_proj_out")
TEXT_TAGS = [1, 1, 0, 0, 1, 1, 1]
T_VIDEO, T_AUDIO = 0.35, 0.6
STEPS = 2  # Euler passes: MiniMaxH3Scheduler.set_timesteps(STEPS + 1)
SHIFT_VIDEO, SHIFT_AUDIO = 12.0, 3.0
KEYFRAME_T = 0.999
ADALN_GRID = 1025  # the released pruned checkpoints' grid
LORA_MODULES = [  # (checkpoint module, rank, alpha)
    ("blocks.0.attn.qkv_proj", 4, 2.0), ("blocks.1.mlp.fc1", 2, 2.0), ("blocks.0.adaln_proj.linear", 2, 1.0),
    ("blocks.1.attn.out_proj", 2, 4.0), ("token_refiner.blocks.0.mlp.fc2", 2, 2.0), ("condition_proj", 2, 2.0),
    ("final_layer.video_out", 2, 2.0), ("final_layer.adaln_proj.linear", 2, 2.0),
]


def randomize(model, gen):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight") and p.ndim == 1:  # RMSNorm gains
                v = 1 + 0.2 * torch.randn(p.shape, generator=gen)
            elif name.endswith("bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5
            if "adaln_proj" in name or "norm_out.linear" in name:
                v = 0.5 * v  # modulations near the released model's small ones
            p.copy_(v.to(torch.bfloat16).float())


RENAME = [  # diffusers -> checkpoint (convert_minimax_h3_transformer_checkpoint_to_diffusers inverted)
    ("token_refiner.refiner_blocks.", "token_refiner.blocks."),
    ("time_embedder.linear_1.", "time_embedder.proj_in."),
    ("time_embedder.linear_2.", "time_embedder.proj_out."),
    ("audio_proj_in.", "audio_patch_proj."),
    ("context_embedder.", "condition_proj."),
    ("norm_out.norm.", "final_layer.norm."),
    ("norm_out.linear.", "final_layer.adaln_proj.linear."),
    ("audio_proj_out.", "final_layer.audio_out."),
    (".attn.norm_q.", ".attn.q_norm."),
    (".attn.norm_k.", ".attn.k_norm."),
    (".attn.to_out.0.", ".attn.out_proj."),
    (".ff.net.0.proj.", ".mlp.fc1."),
    (".ff.net.2.", ".mlp.fc2."),
]


def checkpoint_names(sd):
    out = {}
    for key, v in sd.items():
        if ".attn.to_k." in key or ".attn.to_v." in key:
            continue
        f32 = key.split(".")[0] in F32_MODULES
        new = key
        if new.startswith("transformer_blocks."):
            new = new.replace("transformer_blocks.", "blocks.", 1)
        if new.startswith("proj_in."):
            new = new.replace("proj_in.", "video_patch_proj.", 1)
        elif new.startswith("proj_out."):
            new = new.replace("proj_out.", "final_layer.video_out.", 1)
        for a, b in RENAME:
            new = new.replace(a, b)
        if ".attn.to_q." in key:
            new = new.replace(".attn.to_q.", ".attn.qkv_proj.")
            v = torch.cat([v, sd[key.replace("to_q", "to_k")], sd[key.replace("to_q", "to_v")]], 0)
        if ".ff.net.0.proj." in key:
            value, gate = v.chunk(2, 0)
            v = torch.cat([gate, value], 0)
        out[new] = v.to(torch.float32 if f32 else torch.bfloat16).clone()
    return out


def main():
    gen = torch.Generator().manual_seed(7)
    model = MiniMaxH3Transformer3DModel(**CONFIG).eval()
    randomize(model, gen)
    sd = model.state_dict()
    ckpt = checkpoint_names(sd)
    ckpt["rope.inv_freq"] = model.rope.inv_freq.clone()
    back = convert_minimax_h3_transformer_checkpoint_to_diffusers(dict(ckpt), config=dict(CONFIG))
    assert set(back) == set(sd), set(back) ^ set(sd)
    for k in sd:
        assert torch.equal(back[k].float(), sd[k]), k

    c, pt, ph, pw = CONFIG["in_channels"], *CONFIG["patch_size"]
    text = torch.randn(7, CONFIG["text_dim"], generator=gen)
    keyframe = torch.randn(c, 1, 4, 6, generator=gen)
    video = torch.randn(c, 3, 4, 6, generator=gen)
    audio = torch.randn(2, 5, CONFIG["audio_in_channels"], generator=gen)  # [stereo, latents, channels]

    position_ids, token_tags, video_idx, audio_idx, text_idx, n_cond, _ = \
        MiniMaxH3PrepareLayoutStep.build_packed_sequence(
            torch.tensor(TEXT_TAGS), 3, 4, 6, 5, (pt, ph, pw), 2, 2, 0, ("first",))
    position_ids = position_ids.float()

    def forward(video_lat, audio_lat, t_video, t_audio):
        timesteps, timestep_idx = MiniMaxH3SetTimestepsStep.build_row_timesteps(
            video_idx, audio_idx, n_cond, 0, len(TEXT_TAGS), t_video, t_audio, max(t_video, KEYFRAME_T), 1.0)
        rows = torch.cat([patchify_video_latents(keyframe[None], (pt, ph, pw)),
                          patchify_video_latents(video_lat[None], (pt, ph, pw))])
        with torch.no_grad():
            v, a = model(hidden_states=rows[None], audio_hidden_states=audio_lat.reshape(-1, audio_lat.shape[-1])[None],
                         encoder_hidden_states=text[None], timestep=timesteps, timestep_indices=timestep_idx,
                         token_tags=token_tags, position_ids=position_ids, video_indices=video_idx,
                         audio_indices=audio_idx, text_indices=text_idx, return_dict=False)
        return v[0], a[0], timesteps, timestep_idx

    def unpatchify(rows):  # [frames * h/2 * w/2, c*2*2] -> [c, frames, h, w]
        f, h, w = 3, 4 // ph, 6 // pw
        return rows.reshape(f, h, w, c, pt, ph, pw).permute(3, 0, 4, 1, 5, 2, 6).reshape(c, f * pt, h * ph, w * pw)

    case = {"text": text, "text_tags": torch.tensor(TEXT_TAGS, dtype=torch.int32), "keyframe": keyframe,
            "video": video, "audio": audio, "t_video": torch.tensor([T_VIDEO]), "t_audio": torch.tensor([T_AUDIO])}

    captured = {}
    hook = model.transformer_blocks[0].register_forward_hook(
        lambda mod, args, out: captured.update(block_in=args[0][0].clone(), block_out=out[0].clone(),
                                               block_rows=args[2].clone()))
    v, a, timesteps, _ = forward(video, audio, T_VIDEO, T_AUDIO)
    hook.remove()
    case.update(block_in=captured["block_in"], block_out=captured["block_out"],
                block_rows=captured["block_rows"].to(torch.int32), block_timesteps=timesteps.float())
    case["video_out"] = unpatchify(v[n_cond:])
    case["audio_out"] = a.reshape(2, 5, -1)

    # The schedules and a 2-pass sample, as MiniMaxH3SetTimestepsStep and MiniMaxH3LoopSchedulerStep run them.
    sched, asched = MiniMaxH3Scheduler(shift=SHIFT_VIDEO), MiniMaxH3Scheduler(shift=SHIFT_AUDIO)
    sched.set_timesteps(STEPS + 1)
    asched.set_timesteps(STEPS + 1)
    case["sigmas_video"], case["sigmas_audio"] = sched.sigmas.clone(), asched.sigmas.clone()
    t0v, t0a = float(sched.timesteps[0]), float(asched.timesteps[0])
    ts = torch.tensor([t0v, t0a, max(t0v, KEYFRAME_T), 1.0])
    with torch.no_grad():
        temb = model.time_embedder(model.time_proj(ts))
        mods = model.transformer_blocks[1].adaln_proj(temb)  # 6 x [4 * 3, hidden]
        case["mods_step0_block1"] = torch.cat(mods, -1)
        case["final_step0"] = model.norm_out.linear(torch.nn.functional.silu(temb))
    x, xa = video.clone(), audio.clone().reshape(10, -1)
    for i, t in enumerate(sched.timesteps):
        v, a, _, _ = forward(x, xa.reshape(2, 5, -1), float(t), float(asched.timesteps[i]))
        xrows = patchify_video_latents(x[None], (pt, ph, pw))
        xrows = sched.step(v[n_cond:], t, xrows, return_dict=False)[0]
        x = unpatchify(xrows)
        xa = asched.step(a, asched.timesteps[i], xa, return_dict=False)[0]
    case["sample_video"], case["sample_audio"] = x, xa.reshape(2, 5, -1)

    # A pruned checkpoint's AdaLN map at full rank: what every AdaLN projection reads,
    # silu(time_embedder(t)), sampled at 1025 points of t in [0, 1].
    with torch.no_grad():
        grid = torch.linspace(0, 1, ADALN_GRID)
        case["adaln_t_table"] = torch.nn.functional.silu(model.time_embedder(model.time_proj(grid)))

    # A LoRA in kohya's layout on the checkpoint's names (what ai-toolkit and musubi write, under the
    # diffusion_model. prefix, with alphas), merged into the model by diffusers' own reading of it:
    # its converter's lora_A / lora_B on diffusers' modules (qkv split, fc1's halves swapped), each
    # weight += B A, as peft's merge does at scale 1.
    lora = {}
    for module, rank, alpha in LORA_MODULES:
        out_f, in_f = ckpt[module + ".weight"].shape
        lora[f"diffusion_model.{module}.lora_down.weight"] = (torch.randn(rank, in_f, generator=gen) / in_f ** 0.5).to(torch.bfloat16)
        lora[f"diffusion_model.{module}.lora_up.weight"] = (0.5 * torch.randn(out_f, rank, generator=gen)).to(torch.bfloat16)
        lora[f"diffusion_model.{module}.alpha"] = torch.tensor(float(alpha))
    converted = _convert_non_diffusers_minimax_h3_lora_to_diffusers({k: v.float() for k, v in lora.items()})
    merged = {k: v.clone() for k, v in sd.items()}
    for key, a in converted.items():
        if ".lora_A." in key:
            target = key.removeprefix("transformer.").replace(".lora_A.weight", ".weight")
            merged[target] += converted[key.replace("lora_A", "lora_B")] @ a
    model.load_state_dict(merged)
    v, a, _, _ = forward(video, audio, T_VIDEO, T_AUDIO)
    case["lora_video_out"], case["lora_audio_out"] = unpatchify(v[n_cond:]), a.reshape(2, 5, -1)

    os.makedirs(OUT, exist_ok=True)
    save_file(lora, os.path.join(OUT, "h3_tiny_lora.safetensors"))
    save_file(ckpt, os.path.join(OUT, "h3_tiny.safetensors"))
    save_file({k: t.contiguous() for k, t in case.items()}, os.path.join(OUT, "h3_tiny_case.safetensors"))
    print("timesteps", timesteps.tolist(), "sigmas", case["sigmas_video"].tolist(), case["sigmas_audio"].tolist())


if __name__ == "__main__":
    main()
