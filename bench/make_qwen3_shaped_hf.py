#!/usr/bin/env python3
"""Writes a Qwen3-shaped model with random weights as a Hugging Face folder (config.json and
model.safetensors in BF16), with numpy alone: scripts/device-check.sh makes it on the GPU
machine, which has no registry (numpy comes with its torch), and `giz convert` then makes our
4-bit conversion there. bench/make_qwen3_shaped_gguf.py writes the same shapes as a GGUF for the
CPU benchmarks beside llama.cpp.

Shapes (--shape): 0.6b is Qwen3-0.6B's (28 layers, hidden 1024, 16 query / 8 KV heads of 128,
MLP 3072, tied embeddings), 8b is Qwen3-8B's (36 layers, hidden 4096, 32 / 8 heads of 128, MLP
12288, untied); vocab 151936, q/k norms. --layers keeps only the first N layers (the same
per-layer shapes). Weights N(0, 1/sqrt(in)), embeddings N(0, 0.05), norms 1 + N(0, 0.05), seeded.
No tokenizer: `giz bench` feeds token ids.

usage: make_qwen3_shaped_hf.py OUT_DIR [--shape 0.6b|8b] [--layers N]
"""
import argparse
import json
import pathlib
import struct

import numpy as np

SHAPES = {
    "0.6b": dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072, tied=True),
    "8b": dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=12288, tied=False),
}
VOCAB = 151936


def bf16(values: np.ndarray) -> bytes:
    """float32 -> bfloat16 bits, rounded to nearest even."""
    u = values.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--shape", choices=sorted(SHAPES), default="0.6b")
    p.add_argument("--layers", type=int, default=0)
    a = p.parse_args()
    s = dict(SHAPES[a.shape])
    if a.layers:
        s["layers"] = a.layers
    rng = np.random.default_rng(1234)
    h, q, kv, ffn = s["hidden"], s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"], s["ffn"]

    def linear(out: int, inp: int) -> np.ndarray:
        return rng.standard_normal((out, inp), dtype=np.float32) / np.float32(np.sqrt(inp))

    def norm(n: int) -> np.ndarray:
        return 1 + 0.05 * rng.standard_normal(n, dtype=np.float32)

    tensors = [("model.embed_tokens.weight", 0.05 * rng.standard_normal((VOCAB, h), dtype=np.float32))]
    for i in range(s["layers"]):
        pre = f"model.layers.{i}."
        tensors += [(pre + "input_layernorm.weight", norm(h)), (pre + "post_attention_layernorm.weight", norm(h)),
                    (pre + "self_attn.q_proj.weight", linear(q, h)), (pre + "self_attn.k_proj.weight", linear(kv, h)),
                    (pre + "self_attn.v_proj.weight", linear(kv, h)), (pre + "self_attn.o_proj.weight", linear(h, q)),
                    (pre + "self_attn.q_norm.weight", norm(s["head_dim"])),
                    (pre + "self_attn.k_norm.weight", norm(s["head_dim"])),
                    (pre + "mlp.gate_proj.weight", linear(ffn, h)), (pre + "mlp.up_proj.weight", linear(ffn, h)),
                    (pre + "mlp.down_proj.weight", linear(h, ffn))]
    tensors.append(("model.norm.weight", norm(h)))
    if not s["tied"]:
        tensors.append(("lm_head.weight", linear(VOCAB, h)))

    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    header, offset = {}, 0
    for name, t in tensors:
        n = t.size * 2
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, t in tensors:
            f.write(bf16(t))
    config = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": h,
              "intermediate_size": ffn, "num_hidden_layers": s["layers"], "num_attention_heads": s["heads"],
              "num_key_value_heads": s["kv_heads"], "head_dim": s["head_dim"], "vocab_size": VOCAB,
              "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
              "tie_word_embeddings": s["tied"], "hidden_act": "silu", "attention_bias": False,
              "torch_dtype": "bfloat16", "bos_token_id": 151643, "eos_token_id": 151645}
    (out / "config.json").write_text(json.dumps(config, indent=1))


if __name__ == "__main__":
    main()
