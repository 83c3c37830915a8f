#!/usr/bin/env python3
"""Writes a Qwen3.5-0.8B-shaped model with random weights as an F16 GGUF (arch `qwen35`, the
`gguf` package), the common source of bench/bench_llm.py's Qwen 3.5 pair: llama.cpp quantizes it
to Q4_0, `giz convert` makes our 4-bit conversion of the same weights.

Shapes are Qwen3.5-0.8B's: hidden 1024, 24 layers (full attention every 4th, the others Gated
DeltaNet), attention 8 query / 2 KV heads of 256 with the output gate in attn_q, partial rotary
0.25 with mrope sections [11, 11, 10, 0], DeltaNet 16 key and 16 value heads of 128 with a conv
of kernel 4, SwiGLU FFN 3584, vocab 248320, tied embeddings, rope theta 1e7. Tensor names,
shapes and metadata are those llama.cpp's converter writes for `Qwen3_5ForCausalLM` (checked
against its loader, src/models/qwen35.cpp): norms stored as 1 + w (except ssm_norm), ssm_a as
-exp(A_log), ssm_conv1d as [channels, kernel], the DeltaNet z projection as attn_gate.

The tokenizer is the real Qwen3 one (/work/shared/data/tokenizers/qwen3, or --tokenizer) with
its vocabulary padded to 248320 by [PAD<i>] tokens (Qwen 3.5's own tokenizer is not in the
shared data); the benchmark feeds token ids, not text.

Weights: linear layers N(0, 1/sqrt(in)), embeddings N(0, 0.05), norms 1 + N(0, 0.05) (as
make_qwen3_shaped_gguf.py); the DeltaNet parts as transformers initialises them: conv
U(-0.5, 0.5) (kaiming over the 4 taps), A ~ U(1, 16) (ssm_a = -A), dt_bias 1, ssm_norm ~1.
Seeded, so the file is reproducible.

usage: make_qwen35_shaped_gguf.py OUT.gguf [--layers 24] [--tokenizer DIR]
"""
import argparse
import pathlib

import gguf
import numpy as np

from make_qwen3_shaped_gguf import add_tokenizer, random_weights

SHAPE = dict(hidden=1024, layers=24, heads=8, kv_heads=2, head_dim=256, ffn=3584, vocab=248320,
             context=262144, rope_theta=10000000.0, eps=1e-6, rotary=0.25, mrope=[11, 11, 10, 0],
             full_attention_interval=4, key_heads=16, value_heads=16, key_dim=128, value_dim=128, conv=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=SHAPE["layers"])
    ap.add_argument("--tokenizer", default="/work/shared/data/tokenizers/qwen3")
    args = ap.parse_args()
    s = dict(SHAPE, layers=args.layers)
    rng = np.random.default_rng(20261130)
    linear, norm = random_weights(rng)
    h, hd = s["hidden"], s["head_dim"]
    key_width, value_width = s["key_heads"] * s["key_dim"], s["value_heads"] * s["value_dim"]
    recurrent = [(i + 1) % s["full_attention_interval"] != 0 for i in range(s["layers"])]

    w = gguf.GGUFWriter(args.out, "qwen35")
    w.add_name("qwen3.5-0.8b-shaped-random")
    w.add_context_length(s["context"])
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(s["rope_theta"])
    w.add_rope_dimension_count(int(hd * s["rotary"]))
    w.add_rope_dimension_sections(s["mrope"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_ssm_conv_kernel(s["conv"])
    w.add_ssm_state_size(s["key_dim"])
    w.add_ssm_group_count(s["key_heads"])
    w.add_ssm_time_step_rank(s["value_heads"])
    w.add_ssm_inner_size(value_width)
    # add_recurrent_layers is newer than the gguf package on PyPI; the key is llama.cpp's.
    w.add_array(f"{w.arch}.attention.recurrent_layers", recurrent)
    w.add_full_attention_interval(s["full_attention_interval"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    add_tokenizer(w, pathlib.Path(args.tokenizer), s["vocab"])

    w.add_tensor("token_embd.weight", (0.05 * rng.standard_normal((s["vocab"], h), dtype=np.float32)).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(h))
    channels = 2 * key_width + value_width
    for i in range(s["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(h))
        if recurrent[i]:
            w.add_tensor(p + "attn_qkv.weight", linear(channels, h))
            w.add_tensor(p + "attn_gate.weight", linear(value_width, h))
            w.add_tensor(p + "ssm_conv1d.weight", rng.uniform(-0.5, 0.5, (channels, s["conv"])).astype(np.float32))
            w.add_tensor(p + "ssm_dt.bias", np.ones(s["value_heads"], dtype=np.float32))
            w.add_tensor(p + "ssm_a", -rng.uniform(1.0, 16.0, s["value_heads"]).astype(np.float32))
            w.add_tensor(p + "ssm_beta.weight", linear(s["value_heads"], h))
            w.add_tensor(p + "ssm_alpha.weight", linear(s["value_heads"], h))
            w.add_tensor(p + "ssm_norm.weight", norm(s["value_dim"]))
            w.add_tensor(p + "ssm_out.weight", linear(h, value_width))
        else:
            w.add_tensor(p + "attn_q.weight", linear(2 * s["heads"] * hd, h))  # per head [q | gate]
            w.add_tensor(p + "attn_k.weight", linear(s["kv_heads"] * hd, h))
            w.add_tensor(p + "attn_v.weight", linear(s["kv_heads"] * hd, h))
            w.add_tensor(p + "attn_q_norm.weight", norm(hd))
            w.add_tensor(p + "attn_k_norm.weight", norm(hd))
            w.add_tensor(p + "attn_output.weight", linear(h, s["heads"] * hd))
        w.add_tensor(p + "post_attention_norm.weight", norm(h))
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
