#!/usr/bin/env python3
"""Writes a Qwen3.5-shaped model with random weights as a Hugging Face folder (config.json and
model.safetensors in BF16), with numpy alone: scripts/device-check.sh makes it on the GPU
machine, which has no registry (numpy comes with its torch), and `giz convert` then makes our
4-bit conversion there. bench/make_qwen35_shaped_gguf.py writes the same shape as a GGUF for the
CPU benchmarks beside llama.cpp.

Shape (--shape 0.8b) is Qwen3.5-0.8B's (tests/data/llm/configs/qwen3.5-0.8b.json): hidden 1024,
24 layers (full attention every 4th, the others Gated DeltaNet), attention 8 query / 2 KV heads
of 256 with the output gate in q_proj (per head [q | gate]), q/k norms, partial rotary 0.25 with
mrope sections [11, 11, 10], DeltaNet 16 key and 16 value heads of 128 with a conv of kernel 4,
SwiGLU FFN 3584, vocab 248320, tied embeddings, rope theta 1e7; no MTP layer. Tensor names and
the config's layout are transformers' for `Qwen3_5ForCausalLM` (as tests/data/models/qwen3_5/hf,
written by tests/reference/make_model_fixtures.py). --layers keeps only the first N layers (the
same per-layer shapes, layer_types cut to match).

Weights: linear layers N(0, 1/sqrt(in)), embeddings N(0, 0.05) (as make_qwen3_shaped_hf.py).
Qwen 3.5 scales by (1 + w), so those norms are stored as N(0, 0.05); the DeltaNet's gated norm
scales by w: 1 + N(0, 0.05). The DeltaNet parts as transformers initialises them: conv1d
U(-0.5, 0.5) (kaiming over the 4 taps), A_log = log U(1, 16), dt_bias 1. Seeded, so the folder
is reproducible (not the GGUF's values). Tensors are made and written one at a time, so memory
stays near the largest (the embedding, 1 GB in float32): 24 layers take ~13 s and 2 GB here.
No tokenizer: `giz bench` feeds token ids.

usage: make_qwen35_shaped_hf.py OUT_DIR [--shape 0.8b] [--layers N]
"""
import argparse
import json
import pathlib
import struct

import numpy as np

from make_qwen3_shaped_hf import bf16

SHAPES = {
    "0.8b": dict(hidden=1024, layers=24, heads=8, kv_heads=2, head_dim=256, ffn=3584, vocab=248320, tied=True,
                 key_heads=16, value_heads=16, key_dim=128, value_dim=128, conv=4, full_attention_interval=4,
                 rope_theta=10000000, rotary=0.25, mrope=[11, 11, 10], context=262144, eos=248044),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.8b")
    p.add_argument("--layers", type=int, default=0)
    a = p.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers:
        s["layers"] = a.layers
    rng = np.random.default_rng(20261130)
    h, hd, vocab = s["hidden"], s["head_dim"], s["vocab"]
    q, kv, ffn = s["heads"] * hd, s["kv_heads"] * hd, s["ffn"]
    key_width, value_width, vh = s["key_heads"] * s["key_dim"], s["value_heads"] * s["value_dim"], s["value_heads"]
    channels = 2 * key_width + value_width
    layer_types = ["full_attention" if (i + 1) % s["full_attention_interval"] == 0 else "linear_attention"
                   for i in range(s["layers"])]

    # (name, shape, make): made in this order when written, so the seeded values do not depend on memory.
    def linear(out: int, inp: int):
        return (out, inp), lambda: rng.standard_normal((out, inp), dtype=np.float32) / np.float32(np.sqrt(inp))

    def norm(n: int):  # stored w of a (1 + w) norm
        return (n,), lambda: 0.05 * rng.standard_normal(n, dtype=np.float32)

    def gated_norm(n: int):  # the DeltaNet's norm scales by w itself
        return (n,), lambda: 1 + 0.05 * rng.standard_normal(n, dtype=np.float32)

    tensors = [("model.embed_tokens.weight", (vocab, h),
                lambda: 0.05 * rng.standard_normal((vocab, h), dtype=np.float32))]
    for i, kind in enumerate(layer_types):
        pre = f"model.layers.{i}."
        parts = [("input_layernorm.weight", norm(h)), ("post_attention_layernorm.weight", norm(h))]
        if kind == "linear_attention":
            la = "linear_attn."
            parts += [(la + "in_proj_qkv.weight", linear(channels, h)),
                      (la + "in_proj_z.weight", linear(value_width, h)),
                      (la + "in_proj_b.weight", linear(vh, h)), (la + "in_proj_a.weight", linear(vh, h)),
                      (la + "conv1d.weight", ((channels, 1, s["conv"]),
                                              lambda: rng.uniform(-0.5, 0.5, (channels, 1, s["conv"])))),
                      (la + "A_log", ((vh,), lambda: np.log(rng.uniform(1.0, 16.0, vh)))),
                      (la + "dt_bias", ((vh,), lambda: np.ones(vh, dtype=np.float32))),
                      (la + "norm.weight", gated_norm(s["value_dim"])),
                      (la + "out_proj.weight", linear(h, value_width))]
        else:
            sa = "self_attn."
            parts += [(sa + "q_proj.weight", linear(2 * q, h)),  # per head [q | gate]
                      (sa + "k_proj.weight", linear(kv, h)), (sa + "v_proj.weight", linear(kv, h)),
                      (sa + "o_proj.weight", linear(h, q)),
                      (sa + "q_norm.weight", norm(hd)), (sa + "k_norm.weight", norm(hd))]
        parts += [("mlp.gate_proj.weight", linear(ffn, h)), ("mlp.up_proj.weight", linear(ffn, h)),
                  ("mlp.down_proj.weight", linear(h, ffn))]
        tensors += [(pre + name, shape, make) for name, (shape, make) in parts]
    tensors.append(("model.norm.weight",) + norm(h))
    if not s["tied"]:
        tensors.append(("lm_head.weight",) + linear(vocab, h))

    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    header, offset, params = {"__metadata__": {"format": "pt"}}, 0, 0
    for name, shape, _ in tensors:
        n = int(np.prod(shape))
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + 2 * n]}
        offset += 2 * n
        params += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, shape, make in tensors:
            t = make()
            assert t.shape == tuple(shape)
            flat = t.reshape(-1)
            for start in range(0, flat.size, 1 << 24):  # in pieces: the rounding's temporaries stay small
                f.write(bf16(flat[start:start + (1 << 24)]))
            del t, flat
    config = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": h,
              "intermediate_size": ffn, "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
              "num_key_value_heads": s["kv_heads"], "head_dim": hd, "vocab_size": vocab,
              "layer_types": layer_types, "full_attention_interval": s["full_attention_interval"],
              "linear_conv_kernel_dim": s["conv"], "linear_key_head_dim": s["key_dim"],
              "linear_num_key_heads": s["key_heads"], "linear_num_value_heads": s["value_heads"],
              "linear_value_head_dim": s["value_dim"], "attn_output_gate": True,
              "max_position_embeddings": s["context"], "rms_norm_eps": 1e-6,
              "rope_parameters": {"mrope_interleaved": True, "mrope_section": s["mrope"], "rope_type": "default",
                                  "rope_theta": s["rope_theta"], "partial_rotary_factor": s["rotary"]},
              "tie_word_embeddings": s["tied"], "hidden_act": "silu", "attention_bias": False,
              "attention_dropout": 0.0, "dtype": "bfloat16", "use_cache": True, "eos_token_id": s["eos"]}
    (out / "config.json").write_text(json.dumps(config, indent=1))
    print(f"wrote {out}: {len(tensors)} tensors, {params} parameters, {offset} bytes of BF16")


if __name__ == "__main__":
    main()
