"""Tiny random-weight language models of each architecture gizml runs, with transformers'
logits, for tests/llm/model_test.cpp.

Run with a Python that has torch and transformers 5 (here /work/venv-torch/bin/python):
    python tests/reference/make_model_fixtures.py [arch ...]   (all by default)

For each architecture, tests/data/models/<arch>/ gets
  hf/config.json, hf/model.safetensors   the model (weights in bf16, the f32 model's exact values)
  reference.safetensors                  logits_<i>: f32 [len, vocab] teacher-forced logits of prompt i
  reference.json                         prompts (token ids), greedy_prompt, greedy (32 tokens)

Weights are random; norms and biases too (transformers starts them at constants, which would
hide a misplaced one). A seed is kept only when every greedy step's top-1 leads the runner-up
by a margin that quantization noise cannot close, so the greedy test checks the model and not
the luck of a near tie.
"""
import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
import transformers as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "models")
VOCAB = 512
PROMPT_LENGTHS = [1, 6, 17, 37]  # two longer than the sliding windows below
GREEDY_PROMPT = 1
GREEDY_TOKENS = 32
MIN_MARGIN = 0.003  # of the logits' range, at every greedy step (8-bit error is ~0.001)

COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
              initializer_range=0.08, bos_token_id=1, eos_token_id=2, pad_token_id=0)


def llama():
    return tf.LlamaForCausalLM(tf.LlamaConfig(
        **COMMON, num_hidden_layers=2, tie_word_embeddings=False,
        rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=4.0, low_freq_factor=1.0,
                             high_freq_factor=4.0, original_max_position_embeddings=16)))


def mistral():
    return tf.MistralForCausalLM(tf.MistralConfig(
        **COMMON, num_hidden_layers=2, sliding_window=8, head_dim=16, tie_word_embeddings=False))


def qwen2():
    return tf.Qwen2ForCausalLM(tf.Qwen2Config(**COMMON, num_hidden_layers=2, tie_word_embeddings=True))


def qwen3():
    return tf.Qwen3ForCausalLM(tf.Qwen3Config(
        **COMMON, num_hidden_layers=2, head_dim=32, tie_word_embeddings=False))


def qwen3_vl():
    text = dict(COMMON, num_hidden_layers=2, head_dim=16,
                rope_parameters=dict(rope_type="default", rope_theta=5000.0, mrope_section=[2, 3, 3],
                                     mrope_interleaved=True))
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                  patch_size=8, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=16,
                  deepstack_visual_indexes=[])
    config = tf.Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=False)
    return tf.Qwen3VLForConditionalGeneration(config)


def gemma3():
    return tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(
        **COMMON, num_hidden_layers=4, head_dim=16, sliding_window=6, query_pre_attn_scalar=24,
        final_logit_softcapping=5.0,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"sliding_attention": dict(rope_type="default", rope_theta=10000.0),
                         "full_attention": dict(rope_type="linear", rope_theta=1000000.0, factor=2.0)},
        tie_word_embeddings=True))


# Qwen 3.5: three Gated DeltaNet layers then a full-attention one (interval 4), twice; fewer key
# heads than value heads (the repeat path); a quarter of each attention head rotates.
QWEN35 = dict(COMMON, num_hidden_layers=8, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
              linear_key_head_dim=16, linear_value_head_dim=16, linear_conv_kernel_dim=4,
              rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.25,
                                   mrope_section=[2, 1, 1], mrope_interleaved=True),
              tie_word_embeddings=False)


def qwen3_5():
    return tf.Qwen3_5ForCausalLM(tf.Qwen3_5TextConfig(**QWEN35))


def qwen3_5_moe():
    moe = dict(QWEN35, num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32,
               shared_expert_intermediate_size=48)
    del moe["intermediate_size"]
    return tf.Qwen3_5MoeForCausalLM(tf.Qwen3_5MoeTextConfig(**moe))


ARCHS = {"llama": llama, "mistral": mistral, "qwen2": qwen2, "qwen3": qwen3, "qwen3_vl": qwen3_vl,
         "gemma3": gemma3, "qwen3_5": qwen3_5, "qwen3_5_moe": qwen3_5_moe}
# Qwen 3.5's prefill runs the delta rule in chunks of 64: a prompt past 128 spans three.
EXTRA_PROMPTS = {"qwen3_5": [150], "qwen3_5_moe": [70]}


def randomize(model, seed):
    """Random 1-d parameters (norms, biases) around their initial values; every weight rounded to
    bf16 so that the f32 model is exactly what the bf16 file holds."""
    g = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
            p.copy_(p.to(torch.bfloat16).float())


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def greedy(model, prompt):
    """32 tokens by recomputing the whole sequence each step; the smallest top-1 lead seen."""
    ids, margin = list(prompt), float("inf")
    for _ in range(GREEDY_TOKENS):
        last = logits_of(model, ids)[-1]
        top = torch.topk(last, 2).values
        margin = min(margin, float((top[0] - top[1]) / (last.max() - last.min())))
        ids.append(int(last.argmax()))
    return ids[len(prompt):], margin


def build(arch):
    for seed in range(100):
        torch.manual_seed(seed)
        model = ARCHS[arch]().eval()
        model.config._attn_implementation = "eager"
        randomize(model, seed)
        g = torch.Generator().manual_seed(seed)
        lengths = PROMPT_LENGTHS + EXTRA_PROMPTS.get(arch, [])
        prompts = [torch.randint(3, VOCAB, (n,), generator=g).tolist() for n in lengths]
        tokens, margin = greedy(model, prompts[GREEDY_PROMPT])
        if margin >= MIN_MARGIN:
            return model, seed, prompts, tokens, margin
    raise RuntimeError(f"{arch}: no seed gives greedy margins of {MIN_MARGIN}")


def main():
    torch.set_num_threads(1)  # small models: threads only add overhead
    for arch in sys.argv[1:] or ARCHS:
        model, seed, prompts, tokens, margin = build(arch)
        folder = os.path.join(OUT, arch)
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        # The logits before the bf16 copy: it would round the RoPE frequencies (buffers) too.
        save_file({f"logits_{i}": logits_of(model, p).contiguous() for i, p in enumerate(prompts)},
                  os.path.join(folder, "reference.safetensors"))
        model.to(torch.bfloat16).save_pretrained(os.path.join(folder, "hf"))
        with open(os.path.join(folder, "reference.json"), "w") as f:
            json.dump({"seed": seed, "prompts": prompts, "greedy_prompt": GREEDY_PROMPT, "greedy": tokens}, f)
            f.write("\n")
        print(f"{arch}: seed {seed}, greedy margin {margin:.3f} of the range")


if __name__ == "__main__":
    main()
