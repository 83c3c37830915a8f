#!/usr/bin/env python3
"""Writes a Qwen3-0.6B-shaped model with random weights as an F16 GGUF (the `gguf` package), the
common source of bench/bench_llm.py: llama.cpp quantizes it to Q4_0 / Q4_K_M, `giz convert` makes
our 4-bit (and f32) conversions of the same weights.

Shapes are Qwen3-0.6B's (28 layers, hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, vocab
151936, tied embeddings, q/k norms). The tokenizer is the real Qwen3 one
(/work/shared/data/tokenizers/qwen3, or --tokenizer), written as GGUF's gpt2-style fields the
way llama.cpp's converter does (vocabulary padded to 151936 with [PAD<i>] tokens), so both
engines load the file as a whole model; the benchmark feeds token ids, not text.

Weights are N(0, 1/sqrt(in)) per linear layer (activations keep their scale through the 28
layers), embeddings N(0, 0.05) and norms 1 + N(0, 0.05); seeded, so the file is reproducible.

usage: make_qwen3_shaped_gguf.py OUT.gguf [--layers 28] [--tokenizer DIR]
"""
import argparse
import json
import pathlib

import gguf
import numpy as np

SHAPE = dict(hidden=1024, layers=28, heads=16, kv_heads=8, head_dim=128, ffn=3072, vocab=151936,
             context=40960, rope_theta=1000000.0, eps=1e-6)


def add_tokenizer(w: gguf.GGUFWriter, folder: pathlib.Path, vocab: int) -> None:
    tok = json.loads((folder / "tokenizer.json").read_text())
    tokens = [""] * vocab
    types = [gguf.TokenType.UNUSED] * vocab
    for text, i in tok["model"]["vocab"].items():
        tokens[i], types[i] = text, gguf.TokenType.NORMAL
    for added in tok["added_tokens"]:
        tokens[added["id"]] = added["content"]
        types[added["id"]] = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
    for i in range(vocab):
        if not tokens[i]:
            tokens[i] = f"[PAD{i}]"
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {a["content"]: a["id"] for a in tok["added_tokens"]}
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(ids["<|im_end|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_bos_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)


def random_weights(rng: np.random.Generator):
    """linear(out, in): F16 N(0, 1/sqrt(in)); norm(n): F32 1 + N(0, 0.05) (GGUF stores norms whole)."""

    def linear(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp), dtype=np.float32) / np.sqrt(inp)).astype(np.float16)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.05 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    return linear, norm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--tokenizer", default="/work/shared/data/tokenizers/qwen3")
    args = ap.parse_args()
    s = dict(SHAPE, layers=args.layers)
    rng = np.random.default_rng(20261130)
    linear, norm = random_weights(rng)

    w = gguf.GGUFWriter(args.out, "qwen3")
    w.add_name("qwen3-0.6b-shaped-random")
    w.add_context_length(s["context"])
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(s["head_dim"])
    w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    add_tokenizer(w, pathlib.Path(args.tokenizer), s["vocab"])

    hd, h = s["head_dim"], s["hidden"]
    w.add_tensor("token_embd.weight", (0.05 * rng.standard_normal((s["vocab"], h), dtype=np.float32)).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(h))
    for i in range(s["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(h))
        w.add_tensor(p + "attn_q.weight", linear(s["heads"] * hd, h))
        w.add_tensor(p + "attn_k.weight", linear(s["kv_heads"] * hd, h))
        w.add_tensor(p + "attn_v.weight", linear(s["kv_heads"] * hd, h))
        w.add_tensor(p + "attn_q_norm.weight", norm(hd))
        w.add_tensor(p + "attn_k_norm.weight", norm(hd))
        w.add_tensor(p + "attn_output.weight", linear(h, s["heads"] * hd))
        w.add_tensor(p + "ffn_norm.weight", norm(h))
        w.add_tensor(p + "ffn_gate.weight", linear(s["ffn"], h))
        w.add_tensor(p + "ffn_up.weight", linear(s["ffn"], h))
        w.add_tensor(p + "ffn_down.weight", linear(h, s["ffn"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
