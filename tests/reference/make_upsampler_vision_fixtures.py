#!/usr/bin/env python3
"""BFL's prompt upsampler shown the pictures of an edit, on a tiny Qwen 3.5 with its vision tower,
for gizml::diffusion::Upsampler (tests/diffusion/upsampler_vision_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_upsampler_vision_fixtures.py
(torch, transformers 5, diffusers 0.42, PIL). Deterministic.

The steps are diffusers' Flux2Pipeline.upsample_prompt's, through its own functions: the pictures
of one prompt side by side and within 768 x 768 pixels (_validate_and_process_images with
Flux2ImageProcessor), the chat of format_input (BFL's SYSTEM_MESSAGE_UPSAMPLING_I2I, a user turn
showing the picture, the prompt as the next user turn), rendered by Qwen3.5's real template
(../shared/data/templates/Qwen3.5-4B.jinja) with thinking off; the picture through transformers'
Qwen2VLImageProcessorPil with Qwen3.5's preprocessor values and each <|image_pad|> repeated as the
Qwen3-VL processor does (make_picture_chat_fixtures.py says why not the processor itself), Qwen3's
tokenizer (the same vision tokens); then transformers' greedy generate of 12 new tokens with the
pixels (diffusers samples at temperature 0.15; greedy makes it checkable), decoded without special
tokens and stripped.

The model is Qwen3_5ForConditionalGeneration: make_model_fixtures.py's qwen3_5 text model over the
real vocabulary (151,936 rows, tied to the output layer; only the rows the chats use random, the
rest zero) and make_vision_fixtures.py's tower. The seed is the first from 1 whose every greedy
step picks a used row, no special token, ahead of the runner-up (and of the zero rows) by 0.05.

Writes into tests/data/diffusion/:
- upsampler_vl_tiny/config.json, upsampler_vl_tiny/weights.safetensors (the embedding as its used
  rows: embed_ids, embed_rows; zimage_tiny.h's writeTextHf writes the folder back).
- upsampler_vl_case.json: per case {"prompt", "pictures" (files of tests/data/vision/), "grid"
  (t, h, w patches of the picture shown), "tokens", "generated", "answer"}.
- upsampler_vl_run.json: the same for giz run's chat with --picture and --system (RUN: the
  system prompt, then one user turn of the picture and the prompt; the picture as the file holds
  it), which tests/CMakeLists.txt's giz_run_picture runs on this model converted by giz convert.
"""
import json
import os

from PIL import Image
import torch
import transformers as tf
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from diffusers.pipelines.flux2.image_processor import Flux2ImageProcessor
from diffusers.pipelines.flux2.pipeline_flux2 import UPSAMPLING_MAX_IMAGE_SIZE, _validate_and_process_images, format_input
from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE_UPSAMPLING_I2I

import make_model_fixtures as lm
import make_zimage_pipeline_fixtures as zimage
import make_vision_fixtures as vision

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
OUT = os.path.join(HERE, "..", "data", "diffusion")
PICTURES = os.path.join(HERE, "..", "data", "vision")
CASES = [("make it night", ["small_97x61.png"]), ("swap the two", ["up_23x19.png", "small_40x30.png"])]
RUN = dict(system="Be brief.", prompt="make it night", pictures=["small_97x61.png"])
NEW_TOKENS = 12
MARGIN = 0.05
MERGE = 2


def prepared(tok, processor, template, prompt, files):
    """The pictures as diffusers shows them, the chat's token ids and the picture's pixels."""
    images = [[Image.open(os.path.join(PICTURES, f)).convert("RGB") for f in files]]
    images = _validate_and_process_images(images, Flux2ImageProcessor(), UPSAMPLING_MAX_IMAGE_SIZE)
    messages = format_input([prompt], SYSTEM_MESSAGE_UPSAMPLING_I2I, images)[0]
    text = tok.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False)
    pixels = processor(images=images[0], return_tensors="pt")
    (t, h, w), = pixels["image_grid_thw"].tolist()
    text = text.replace("<|image_pad|>", "<|image_pad|>" * (t * h * w // MERGE ** 2))
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids, pixels, [t, h, w]


def run_chat(tok, processor, template):
    """giz run's chat: the system prompt, then the pictures and the prompt in one user turn."""
    messages = [{"role": "system", "content": RUN["system"]},
                {"role": "user", "content": [{"type": "image"}] * len(RUN["pictures"]) +
                                            [{"type": "text", "text": RUN["prompt"]}]}]
    text = tok.apply_chat_template(messages, chat_template=template, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False)
    images = [Image.open(os.path.join(PICTURES, f)).convert("RGB") for f in RUN["pictures"]]
    pixels = processor(images=images, return_tensors="pt")
    for t, h, w in pixels["image_grid_thw"].tolist():
        text = text.replace("<|image_pad|>", "<|placeholder|>" * (t * h * w // MERGE ** 2), 1)
    ids = tok(text.replace("<|placeholder|>", "<|image_pad|>"), add_special_tokens=False)["input_ids"]
    return ids, pixels, pixels["image_grid_thw"].tolist()


def model_of(tok, used, seed):
    text = dict(lm.QWEN35, vocab_size=151936, tie_word_embeddings=True)
    config = tf.Qwen3_5Config(text_config=text, vision_config=vision.VISION, tie_word_embeddings=True,
                              image_token_id=tok.convert_tokens_to_ids("<|image_pad|>"),
                              vision_start_token_id=tok.convert_tokens_to_ids("<|vision_start|>"),
                              vision_end_token_id=tok.convert_tokens_to_ids("<|vision_end|>"))
    torch.manual_seed(seed)
    model = tf.Qwen3_5ForConditionalGeneration(config).eval()
    model.config._attn_implementation = "eager"
    lm.randomize(model, seed)
    with torch.no_grad():
        embed = model.model.language_model.embed_tokens.weight
        keep = embed[used].clone()
        embed.zero_()
        embed[used] = keep
    return model


def inputs_of(model, ids, pixels):
    x = torch.tensor([ids])
    return dict(input_ids=x, pixel_values=pixels["pixel_values"], image_grid_thw=pixels["image_grid_thw"],
                mm_token_type_ids=(x == model.config.image_token_id).int())


def greedy(model, ids, pixels, used, special):
    """The new ids, or None when a step is too close to call or leaves the used rows."""
    out = []
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(**inputs_of(model, ids + out, pixels)).logits[0, -1]
            top = torch.topk(logits, 2)
            best = int(top.indices[0])
            if best not in used or best in special or top.values[0] - max(top.values[1], 0.0) < MARGIN:
                return None
            out.append(best)
    return out


def main():
    torch.set_num_threads(1)
    tok = tf.AutoTokenizer.from_pretrained(os.path.join(SHARED, "tokenizers", "qwen3"))
    template = open(os.path.join(SHARED, "templates", "Qwen3.5-4B.jinja")).read()
    processor = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=MERGE,
                                         image_mean=[0.5] * 3, image_std=[0.5] * 3,
                                         size={"shortest_edge": 65536, "longest_edge": 16777216})
    cases = [prepared(tok, processor, template, p, f) for p, f in CASES] + [run_chat(tok, processor, template)]
    used = sorted({t for ids, _, _ in cases for t in ids})
    special = set(tok.all_special_ids) | {t for t in used if t >= 151643}
    for seed in range(1, 200):
        model = model_of(tok, used, seed)
        generated = [greedy(model, ids, pixels, set(used), special) for ids, pixels, _ in cases]
        if all(g is not None for g in generated):
            answers = [tok.decode(g, skip_special_tokens=True) for g in generated]
            if all("\ufffd" not in a for a in answers):
                break
    else:
        raise SystemExit("no seed gives clear greedy steps")
    # transformers' own generate agrees with the step-by-step argmax above.
    for (ids, pixels, _), g in zip(cases, generated):
        with torch.no_grad():
            full = model.generate(**inputs_of(model, ids, pixels), max_new_tokens=NEW_TOKENS, do_sample=False)
        assert full[0, len(ids):].tolist() == g, (full[0, len(ids):].tolist(), g)
    zimage.save_text_encoder(model, used, os.path.join(OUT, "upsampler_vl_tiny"), "Qwen3_5ForConditionalGeneration",
                             "model.language_model.embed_tokens.weight")
    out = [{"prompt": p, "pictures": f, "grid": grid, "tokens": ids, "generated": g, "answer": a.strip()}
           for (p, f), (ids, _, grid), g, a in zip(CASES, cases, generated, answers)]
    with open(os.path.join(OUT, "upsampler_vl_case.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    ids, _, grids = cases[-1]
    run = dict(RUN, grids=grids, tokens=ids, generated=generated[-1], answer=answers[-1].strip())
    with open(os.path.join(OUT, "upsampler_vl_run.json"), "w") as f:
        json.dump(run, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"seed {seed}:", [c["answer"] for c in out], run["answer"])


if __name__ == "__main__":
    main()
