#!/usr/bin/env python3
"""The whole MiniMax H3 text-to-video-and-audio (t2va) pipeline on tiny random models, for the C++ H3 pipeline.

Run:  /work/venv-torch/bin/python tests/reference/make_h3_pipeline_fixtures.py
(torch, transformers 5, diffusers 0.42.1 with MiniMax H3, safetensors, numpy). Deterministic, CPU, float32.

The reference is diffusers' own modular pipeline (modular_pipelines/minimax_h3/), run WHOLE: MiniMaxH3Blocks()
.init_pipeline() with the tiny components below put in by update_components, called as a t2va request
(prompt only): MiniMaxH3TextEncoderStep (the prompt verbatim, tokenizer(prompt, add_special_tokens=False), then
get_qwen3vl_prompt_embeds: text_encoder.model(...) with mm_token_type_ids all 0, hidden_states[50]),
MiniMaxH3NoKeyframeAnchorsStep, MiniMaxH3PrepareLayoutStep ([text | audio | video] rows and their rotary grid),
MiniMaxH3PrepareLatentsStep (the video noise [1, 24, F, h, w] drawn first, then the audio noise directly as rows
[2 * A, 32], both from the request's generator), MiniMaxH3SetTimestepsStep, MiniMaxH3DenoiseStep (one forward a
pass, MiniMaxH3Scheduler.step on the video rows and the audio rows), MiniMaxH3AfterDenoiseStep (unpacking),
MiniMaxH3VideoDecodeStep (latents * std + mean, vae.decode, * pixel std + pixel mean, clamp [0, 1]; output_type
"pt", which keeps those floats) and MiniMaxH3AudioDecodeStep. The pipeline's inputs to the transformer are
captured by a hook on its first call (the pipeline's own noise draw) and checked against the draws recorded here;
the pipeline is then run a second time with that noise passed in as latents / audio_latents, which has to give
the same outputs (so the recorded audio layout is the one the pipeline reads), and the decode is recomputed by
hand from the unpacked latents and checked equal.

The request: PROMPT, seed 42 (torch.Generator("cpu").manual_seed(42)), num_frames 120 (which the layout step
rounds up to 124 = 17 * 7 + 5: 5.17 s at 24 fps, inside MiniMax H3's 5..15 s; 37 = 5 * 7 + 2 latent frames,
round(124 / 24 * 40) = 207 audio latents a channel), num_inference_steps 3, i.e. TWO Euler passes (the
MiniMaxH3Scheduler's grid is linspace(1, 0, num_inference_steps) with the terminal 0 included), the schedulers'
shifts 12 (video, "scheduler") and 3 (audio, "audio_scheduler") as the released repository configures them. The
tiny video VAE compresses space 4 x (spatial_downsample_factors [2, 2]), so the canvas multiple is 4 x the
transformer's spatial patch 2 = 8 pixels, and the canvas is the smallest sensible one: height 8 (1 x 8),
width 16 (2 x 8) pixels, latents 2 x 4.

Models (every weight seeded random and rounded to BF16, so the files hold exactly what runs in float32):
- text encoder: transformers.Qwen3VLForConditionalGeneration (diffusers' H3 conditioner class). text_config:
  vocab 151936 (the real Qwen3 tokenizer's, ../shared/data/tokenizers/qwen3), hidden 24, intermediate
  TEXT_INTERMEDIATE = 8 (51 layers at 48 would put the folder near 600 KB: 51 x 11 tensor names alone are 69 KB
  of safetensors header), 51 layers (H3 reads hidden_states[50] and get_qwen3vl_prompt_embeds requires more than
  50 layers), 3 heads of 8, 1 KV head, rms eps 1e-6, rope theta 5e6 with mrope_section [2, 1, 1] interleaved
  (head_dim 8: 4 frequencies, t h w t); vision_config depth 1, hidden 8, intermediate 16, 1 head, patch 4,
  temporal patch 2, merge 2, 16 position embeddings, deepstack at [0], out_hidden_size 24 (never run by t2va: its
  weights are there so the folder is a whole model).
  Tied word embeddings (no lm_head tensor). Of the embedding only the rows of the prompt's tokens are random, the
  rest zero. Seed 41.
- transformer: diffusers' MiniMaxH3Transformer3DModel, make_h3_fixtures.py's CONFIG with in_channels 24,
  audio_in_channels 32, text_dim 24 (hidden 48, 2 heads of 32, rope_freq_dim 4, ffn 40, patch 1 x 2 x 2, freq 32,
  time 40 -> 20, 2 blocks, 1 refiner block), make_h3_fixtures.randomize from seed 43, the F32 modules (patch
  projections, time embedder, output heads) F32 and the rest BF16 as released.
- decoders: the committed h3_video_tiny.safetensors / h3_audio_tiny.safetensors of make_h3_decoder_fixtures.py
  (diffusers' AutoencoderKLMiniMaxH3 with its VIDEO config and AutoencoderKLMiniMaxH3Audio with its AUDIO config,
  loaded from h3_video_tiny_diffusers.safetensors, checked against h3_video_tiny.safetensors through that
  script's to_original; their latents_mean / latents_std from h3_video_tiny_case / h3_audio_tiny_case put into the
  VAE configs, where the decode steps read them; the video VAE tiled as there: tiles of 8 pixels overlapping by at
  least 4, so the 16-pixel-wide canvas decodes as 3 tiles of 2 latent columns). The audio VAE hops 10 samples.

Writes into tests/data/diffusion/:
- h3_text_tiny/config.json: the text encoder's config, the full to_dict() (a superset of what save_pretrained
  writes, which leaves out the values equal to the class defaults; checked here), "architectures"
  ["Qwen3VLForConditionalGeneration"] as save_pretrained sets it.
- h3_text_tiny/weights.safetensors: every tensor under the names save_pretrained uses (model.language_model.*,
  model.visual.*), BF16, but the embedding: "embed_ids" I64 [K] and "embed_rows" BF16 [K, 24], its non-zero rows.
- h3_pipe_tiny.safetensors: the transformer under the checkpoint's own names (make_h3_fixtures.checkpoint_names,
  the round trip through diffusers' convert_minimax_h3_transformer_checkpoint_to_diffusers checked), with
  rope.inv_freq.
- h3_pipeline_case.safetensors:
  "tokens" I64 [T]; "text" F32 [T, 24] (prompt_embeds[0]); "num_frames" I64 [1] (124); "size" I64 [2]
  (height 8, width 16 pixels); "noise_video" F32 [1, 24, 37, 2, 4]; "noise_audio" F32 [2, 207, 32] (the audio
  noise rows [414, 32] as drawn, reshaped: channel-major, stereo channel first); "latents_video"
  F32 [1, 24, 37, 2, 4] and "latents_audio" F32 [2, 32, 207] (after the 2 passes, unpacked by
  MiniMaxH3AfterDenoiseStep); "frames" F32 [1, 3, 124, 8, 16] (decoded, in [0, 1], before the video processor's
  uint8 / PIL step); "audio" F32 [2, 2070] (the decoded stereo waveform, the pipeline's audio[0]).

Worked around: transformers' Qwen3VLVideoProcessor needs torchvision, which this venv does not have; t2va never
touches a video processor, so the Qwen3VLProcessor (a real one: Qwen2VL's PIL image processor, the real
tokenizer) is built with video_processor=None, its constructor's class check of that one argument skipped. Its
create_mm_token_type_ids is what the pipeline calls. When torchvision is there, the real video processor is used.
"""
import json
import os
import sys
from unittest import mock

import torch
import transformers as tf
from diffusers import AutoencoderKLMiniMaxH3, AutoencoderKLMiniMaxH3Audio, MiniMaxH3Transformer3DModel
from diffusers.loaders.single_file_utils import convert_minimax_h3_transformer_checkpoint_to_diffusers
from diffusers.modular_pipelines.minimax_h3 import MiniMaxH3Blocks
from diffusers.modular_pipelines.minimax_h3.before_denoise import patchify_video_latents
from diffusers.modular_pipelines.minimax_h3.encoders import get_qwen3vl_prompt_embeds
from diffusers.schedulers import MiniMaxH3Scheduler
from diffusers.utils.torch_utils import randn_tensor
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_h3_decoder_fixtures as decoders  # noqa: E402
import make_h3_fixtures as h3  # noqa: E402
import make_zimage_pipeline_fixtures as zimage  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
PROMPT = "A lighthouse at dusk, waves on the rocks; «stürmisch», 35 mm"
SEED, NUM_FRAMES, STEPS = 42, 120, 2  # STEPS Euler passes: num_inference_steps = STEPS + 1
SHIFT_VIDEO, SHIFT_AUDIO = 12.0, 3.0
TEXT_LAYER = 50
TEXT_INTERMEDIATE = 8
TEXT_CONFIG = dict(
    text_config=dict(vocab_size=151936, hidden_size=24, intermediate_size=TEXT_INTERMEDIATE, num_hidden_layers=51,
                     num_attention_heads=3, num_key_value_heads=1, head_dim=8, max_position_embeddings=4096,
                     rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=5000000.0,
                                                             mrope_section=[2, 1, 1], mrope_interleaved=True),
                     tie_word_embeddings=True),
    vision_config=dict(depth=1, hidden_size=8, intermediate_size=16, num_heads=1, patch_size=4,
                       temporal_patch_size=2, spatial_merge_size=2, out_hidden_size=24, num_position_embeddings=16,
                       deepstack_visual_indexes=[0]),
    tie_word_embeddings=True)
PIPE_CONFIG = dict(h3.CONFIG, in_channels=24, audio_in_channels=32, text_dim=24)
EMBED = "model.language_model.embed_tokens.weight"


def tokenizer():
    return tf.AutoTokenizer.from_pretrained(zimage.TOKENIZER)


def processor(tok):
    """A Qwen3VLProcessor over the real tokenizer; without torchvision its video processor is None (unused by t2va)."""
    image_processor = tf.Qwen2VLImageProcessorPil()
    try:
        return tf.Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok,
                                   video_processor=tf.Qwen3VLVideoProcessor())
    except ImportError:
        check = tf.ProcessorMixin.check_argument_for_proper_class

        def skip_none_video(self, name, arg):
            return None if name == "video_processor" and arg is None else check(self, name, arg)

        with mock.patch.object(tf.ProcessorMixin, "check_argument_for_proper_class", skip_none_video):
            return tf.Qwen3VLProcessor(image_processor=image_processor, tokenizer=tok, video_processor=None)


def text_encoder(used_ids, gen):
    """A random Qwen3-VL of TEXT_CONFIG, BF16 values in f32; of the embedding only the used_ids rows."""
    model = tf.Qwen3VLForConditionalGeneration(tf.Qwen3VLConfig(**TEXT_CONFIG)).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name == EMBED:
                v = torch.zeros(p.shape)
                v[used_ids] = torch.randn(len(used_ids), p.shape[1], generator=gen)
            elif "norm" in name and name.endswith("weight"):
                v = 1 + 0.2 * torch.randn(p.shape, generator=gen)
            elif p.ndim == 1:  # biases
                v = 0.1 * torch.randn(p.shape, generator=gen)
            else:
                v = torch.randn(p.shape, generator=gen) / p[0].numel() ** 0.5
            p.copy_(v.to(torch.bfloat16).float())
    return model


def save_text_encoder(model, used, folder):
    """folder/config.json and folder/weights.safetensors (BF16, the embedding as embed_ids / embed_rows)."""
    os.makedirs(folder, exist_ok=True)
    config = model.config.to_dict()
    config["architectures"] = [type(model).__name__]
    # save_pretrained writes the values that differ from the defaults; ours has all of them, the same.
    model.config.save_pretrained(os.path.join(folder, "_diff"))
    with open(os.path.join(folder, "_diff", "config.json")) as f:
        diff = json.load(f)
    os.remove(os.path.join(folder, "_diff", "config.json"))
    os.rmdir(os.path.join(folder, "_diff"))

    def covers(full, part, path=""):
        for k, v in part.items():
            if k in ("transformers_version", "architectures"):
                continue
            assert k in full, path + k
            if isinstance(v, dict) and isinstance(full[k], dict):
                covers(full[k], v, path + k + ".")
            else:
                assert full[k] == v, (path + k, full[k], v)
    covers(config, diff)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")

    state = model.state_dict()
    assert "lm_head.weight" not in state or state["lm_head.weight"].data_ptr() == state[EMBED].data_ptr()
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in state.items() if k not in (EMBED, "lm_head.weight")}
    assert all(k.startswith(("model.language_model.", "model.visual.")) for k in tensors), list(tensors)
    tensors["embed_ids"] = torch.tensor(used, dtype=torch.int64)
    tensors["embed_rows"] = state[EMBED][used].to(torch.bfloat16).contiguous()
    save_file(tensors, os.path.join(folder, "weights.safetensors"))
    stored = load_file(os.path.join(folder, "weights.safetensors"))
    for k, v in state.items():  # the file holds exactly the weights used
        if k not in (EMBED, "lm_head.weight"):
            assert torch.equal(stored[k].float(), v), k
    rows = torch.zeros_like(state[EMBED])
    rows[stored["embed_ids"]] = stored["embed_rows"].float()
    assert torch.equal(rows, state[EMBED])


def transformer():
    model = MiniMaxH3Transformer3DModel(**PIPE_CONFIG).eval()
    h3.randomize(model, torch.Generator().manual_seed(43))
    sd = model.state_dict()
    ckpt = h3.checkpoint_names(sd)
    ckpt["rope.inv_freq"] = model.rope.inv_freq.clone()
    back = convert_minimax_h3_transformer_checkpoint_to_diffusers(dict(ckpt), config=dict(PIPE_CONFIG))
    assert set(back) == set(sd), set(back) ^ set(sd)
    for k in sd:
        assert torch.equal(back[k].float(), sd[k]), k
    return model, ckpt


def video_vae():
    """make_h3_decoder_fixtures.py's video VAE from its committed files, its statistics in its config."""
    stats = load_file(os.path.join(OUT, "h3_video_tiny_case.safetensors"))
    vae = AutoencoderKLMiniMaxH3(**decoders.VIDEO, latents_mean=stats["latents_mean"].tolist(),
                                 latents_std=stats["latents_std"].tolist()).eval()
    weights = {k: v.float() for k, v in load_file(os.path.join(OUT, "h3_video_tiny_diffusers.safetensors")).items()}
    missing, unexpected = vae.load_state_dict(weights, strict=False)
    assert not unexpected and all(not k.startswith(("decoder.", "post_quant_conv.")) for k in missing), missing
    original = load_file(os.path.join(OUT, "h3_video_tiny.safetensors"))
    ours = decoders.to_original(vae.state_dict(), decoders.VIDEO["decoder_num_attention_heads"],
                                decoders.VIDEO["decoder_attention_head_dim"])
    for k, v in ours.items():
        if k.startswith(("decoder.", "post_quant_conv.")):
            assert torch.equal(v.to(torch.bfloat16), original[k]), k
    vae.enable_tiling(decoders.TILE, decoders.TILE, decoders.TILE_OVERLAP, decoders.TILE_OVERLAP)
    return vae


def audio_vae():
    stats = load_file(os.path.join(OUT, "h3_audio_tiny_case.safetensors"))
    vae = AutoencoderKLMiniMaxH3Audio(**decoders.AUDIO, latents_mean=stats["latents_mean"].tolist(),
                                      latents_std=stats["latents_std"].tolist()).eval()
    vae.load_state_dict(load_file(os.path.join(OUT, "h3_audio_tiny.safetensors")))
    return vae


def main():
    tok = tokenizer()
    tokens = tok(PROMPT, add_special_tokens=False)["input_ids"]
    used = sorted(set(tokens))
    encoder = text_encoder(used, torch.Generator().manual_seed(41))
    proc = processor(tok)
    dit, ckpt = transformer()
    vae, avae = video_vae(), audio_vae()

    pipe = MiniMaxH3Blocks().init_pipeline()
    pipe.update_components(text_encoder=encoder, tokenizer=tok, processor=proc, transformer=dit,
                           scheduler=MiniMaxH3Scheduler(shift=SHIFT_VIDEO),
                           audio_scheduler=MiniMaxH3Scheduler(shift=SHIFT_AUDIO), vae=vae, audio_vae=avae)
    multiple = pipe.canvas_multiple
    assert pipe.vae_spatial_compression_ratio == 4 and multiple == 8, multiple
    height, width = multiple, 2 * multiple

    first_call = {}

    def capture(module, args, kwargs):
        if not first_call:
            first_call.update(video=kwargs["hidden_states"][0].clone(), audio=kwargs["audio_hidden_states"][0].clone(),
                              text=kwargs["encoder_hidden_states"][0].clone())

    hook = dit.register_forward_pre_hook(capture, with_kwargs=True)
    request = dict(prompt=PROMPT, num_frames=NUM_FRAMES, height=height, width=width, num_inference_steps=STEPS + 1,
                   output_type="pt")
    state = pipe(generator=torch.Generator("cpu").manual_seed(SEED), **request)
    hook.remove()

    num_frames = state.get("num_frames")
    frames_latent, audio_latents = state.get("num_latent_frames"), state.get("num_audio_latents")
    h, w = height // 4, width // 4
    assert (num_frames, frames_latent, audio_latents) == (124, 37, 207), (num_frames, frames_latent, audio_latents)
    assert len(pipe.scheduler.timesteps) == STEPS and len(pipe.audio_scheduler.timesteps) == STEPS

    # The noise as MiniMaxH3PrepareLatentsStep draws it: video latents first, then the audio rows.
    gen = torch.Generator("cpu").manual_seed(SEED)
    noise_video = randn_tensor((1, 24, frames_latent, h, w), generator=gen, dtype=torch.float32)
    noise_rows = randn_tensor((2 * audio_latents, 32), generator=gen, dtype=torch.float32)
    assert torch.equal(first_call["video"], patchify_video_latents(noise_video, pipe.patch_size))
    assert torch.equal(first_call["audio"], noise_rows)

    text = state.get("prompt_embeds")[0]
    assert torch.equal(first_call["text"], text)
    assert torch.equal(state.get("text_token_tags"), torch.full((len(tokens),), 1))
    with torch.no_grad():  # the function on its own, as the block calls it
        assert torch.equal(get_qwen3vl_prompt_embeds(encoder, proc, tokens, {}, TEXT_LAYER)[0], text)

    latents_video, latents_audio = state.get("latents"), state.get("audio_latents")
    videos, audio = state.get("videos"), state.get("audio")
    frames = videos.permute(0, 2, 1, 3, 4).contiguous()  # postprocess_video's [1, F, 3, H, W] back to [1, 3, F, H, W]
    assert latents_video.shape == (1, 24, 37, h, w) and latents_audio.shape == (2, 32, 207)
    assert frames.shape == (1, 3, 124, height, width) and audio.shape[:2] == (1, 2), (frames.shape, audio.shape)

    # The decode by hand from the unpacked latents.
    with torch.no_grad():
        mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
        std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
        x = vae.decode(latents_video * std + mean, return_dict=False)[0]
        pm = torch.tensor(decoders.PIXEL_MEAN).view(1, 3, 1, 1, 1)
        ps = torch.tensor(decoders.PIXEL_STD).view(1, 3, 1, 1, 1)
        assert torch.equal((x * ps + pm).clamp(0, 1), frames)
        amean = torch.tensor(avae.config.latents_mean).view(1, -1, 1)
        astd = torch.tensor(avae.config.latents_std).view(1, -1, 1)
        assert torch.equal(avae.decode(latents_audio * astd + amean, return_dict=False)[0][:, 0], audio[0])

    # Again with the recorded noise passed in (the audio as [2, 32, 207]): the same run.
    noise_audio = noise_rows.reshape(2, audio_latents, 32)
    again = pipe(latents=noise_video.clone(), audio_latents=noise_audio.permute(0, 2, 1).clone(), **request)
    for name in ("latents", "audio_latents", "videos", "audio"):
        assert torch.equal(again.get(name), state.get(name)), name

    case = dict(tokens=torch.tensor(tokens, dtype=torch.int64), text=text.float(),
                num_frames=torch.tensor([num_frames], dtype=torch.int64),
                size=torch.tensor([height, width], dtype=torch.int64), noise_video=noise_video,
                noise_audio=noise_audio, latents_video=latents_video, latents_audio=latents_audio, frames=frames,
                audio=audio[0])

    os.makedirs(OUT, exist_ok=True)
    save_text_encoder(encoder, used, os.path.join(OUT, "h3_text_tiny"))
    save_file(ckpt, os.path.join(OUT, "h3_pipe_tiny.safetensors"))
    save_file({k: v.float().contiguous() if v.is_floating_point() else v.contiguous() for k, v in case.items()},
              os.path.join(OUT, "h3_pipeline_case.safetensors"))

    print(f"tokens {len(tokens)}, canvas {height}x{width}, frames {num_frames}, latents {frames_latent}x{h}x{w}, "
          f"audio latents {audio_latents}, sigmas {pipe.scheduler.sigmas.tolist()} / "
          f"{pipe.audio_scheduler.sigmas.tolist()}")
    for k, v in case.items():
        if v.is_floating_point():
            print(f"{k:14s} {list(v.shape)} absmax {v.abs().max().item():.4g} std {v.std().item():.4g} "
                  f"min {v.min().item():.4g} max {v.max().item():.4g}")
    print("frames at 0 or 1:", int(((frames == 0) | (frames == 1)).sum()), "of", frames.numel(),
          "; audio at +-1:", int((audio.abs() >= 1).sum()))


if __name__ == "__main__":
    main()
