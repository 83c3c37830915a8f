#!/usr/bin/env python3
"""BFL's prompt upsampler on a tiny Qwen3, for gizml::diffusion::Upsampler
(tests/diffusion/upsampler_test.cpp).

Run:  /work/venv-torch/bin/python tests/reference/make_upsampler_fixtures.py
(torch, transformers 5, diffusers 0.42, safetensors). Deterministic.

The chat is diffusers' Flux2Pipeline.upsample_prompt's: its SYSTEM_MESSAGE_UPSAMPLING_T2I (or
_I2I for an edit, which has pictures) as the system turn, then the prompt as the user's, rendered
by Qwen3's real chat template (../shared/data/tokenizers/qwen3) with the generation prompt and
thinking off (Qwen3.5's templates read enable_thinking the same way). The answer is transformers'
greedy generate of 12 new tokens (diffusers samples at temperature 0.15; greedy makes it
checkable), decoded with skip_special_tokens and stripped.

The model is a Qwen3 of 2 layers, hidden 16, 2 heads of 8, 1 KV head, tied embedding, over the
real vocabulary (151,936 rows); only the rows the chats use are random, the rest zero, and the
committed file holds those rows alone (the test writes the Hugging Face folder back, as
klein_text_tiny's). The seed is the first from 1 whose every greedy step picks a row the chats
use, ahead of the runner-up (and of the zero rows) by 0.05 or more, never a special token, and
decodes to whole UTF-8 characters.

Writes into tests/data/diffusion/:
- upsampler_tiny/config.json, upsampler_tiny/weights.safetensors (as klein_text_tiny's).
- upsampler_case.json: per case {"prompt", "edit", "chat" (the rendered prompt), "tokens"
  (its ids), "answer" (the stripped decoded text), "generated" (the new ids)}.
"""
import json
import os
import sys

import torch
import transformers as tf
from diffusers.pipelines.flux2.system_messages import SYSTEM_MESSAGE_UPSAMPLING_I2I, SYSTEM_MESSAGE_UPSAMPLING_T2I

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_zimage_pipeline_fixtures as zimage  # noqa: E402

OUT = os.path.join(HERE, "..", "data", "diffusion")
CASES = [("A red fox in fresh snow", False), ("make the sky stormy, keep the lighthouse", True)]
NEW_TOKENS = 12
MARGIN = 0.05
CONFIG = dict(vocab_size=151936, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=1024,
              rms_norm_eps=1e-6, rope_parameters=dict(rope_type="default", rope_theta=1000000.0),
              tie_word_embeddings=True, bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)


def chat(tok, prompt, edit):
    messages = [{"role": "system", "content": SYSTEM_MESSAGE_UPSAMPLING_I2I if edit else SYSTEM_MESSAGE_UPSAMPLING_T2I},
                {"role": "user", "content": prompt}]
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, enable_thinking=False)


def greedy(model, ids, used, special):
    """The new ids, or None when a step is too close to call or leaves the used rows."""
    out = []
    x = torch.tensor([ids])
    with torch.no_grad():
        for _ in range(NEW_TOKENS):
            logits = model(x).logits[0, -1]
            top = torch.topk(logits, 2)
            best = int(top.indices[0])
            if best not in used or best in special or top.values[0] - max(top.values[1], 0.0) < MARGIN:
                return None
            out.append(best)
            x = torch.cat([x, torch.tensor([[best]])], 1)
    return out


def main():
    tok = tf.AutoTokenizer.from_pretrained(zimage.TOKENIZER)
    chats = [chat(tok, p, e) for p, e in CASES]
    ids = [tok(c, add_special_tokens=False)["input_ids"] for c in chats]
    used = sorted({t for i in ids for t in i})
    special = set(tok.all_special_ids) | {t for t in used if t >= 151643}
    for seed in range(1, 200):
        model = zimage.text_encoder(used, torch.Generator().manual_seed(seed), CONFIG)
        generated = [greedy(model, i, set(used), special) for i in ids]
        if all(g is not None for g in generated):
            answers = [tok.decode(g, skip_special_tokens=True) for g in generated]
            if all("\ufffd" not in a for a in answers):
                break
    else:
        raise SystemExit("no seed gives clear greedy steps")
    # transformers' own generate agrees with the step-by-step argmax above.
    for i, g in zip(ids, generated):
        with torch.no_grad():
            full = model.generate(torch.tensor([i]), max_new_tokens=NEW_TOKENS, do_sample=False)
        assert full[0, len(i):].tolist() == g, (full[0, len(i):].tolist(), g)
    zimage.save_text_encoder(model, used, os.path.join(OUT, "upsampler_tiny"))
    cases = [{"prompt": p, "edit": e, "chat": c, "tokens": i, "generated": g, "answer": a.strip()}
             for (p, e), c, i, g, a in zip(CASES, chats, ids, generated, answers)]
    with open(os.path.join(OUT, "upsampler_case.json"), "w") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"seed {seed}:", [c["answer"] for c in cases])


if __name__ == "__main__":
    main()
