#!/usr/bin/env python3
"""Writes the fixtures of tests/llm/ into tests/data/llm/ (deterministic; run from anywhere).

configs/*.gguf: llama.cpp-style metadata of the models whose config.json sit beside them.
permute.safetensors: Llama q/k weights and biases, and their rows as llama.cpp's convert script
  permutes them.
q4k_gaussian.json: the relative RMS error of GGUF Q4_K on N(0, 1) weights (llama.cpp's reference
  quantizer, quantize_row_q4_K_ref, in numpy below; gguf-py has no Q4_K quantizer), the number our
  4-bit format must not exceed.
tiny_hf/: a 2-layer Llama-shaped model in two safetensors shards, its config and tokenizer files.
tiny_lora/, tiny_lora_bad/: PEFT adapters for it; lora_merged.safetensors: W + s B A in f32.
tiny.gguf: a 2-layer Llama GGUF with F16, Q8_0, Q4_K and F32 tensors; tiny_gguf_expected
  .safetensors: its tensors dequantized, in Hugging Face names and row order.
"""
import json
from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from safetensors.numpy import save_file

OUT = Path(__file__).resolve().parent.parent / "data" / "llm"
rng = np.random.default_rng(20250601)


def permute(w, n_head, n_head_kv=None):
    """convert_hf_to_gguf.py's LlamaModel.permute."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def q4k_quantize(x):
    """quantize_row_q4_K_ref (ggml-quants.c) vectorised over 256-value blocks."""
    x = x.reshape(-1, 8, 32).astype(np.float32)
    nb = x.shape[0]
    w = np.sqrt((x * x).mean(-1, keepdims=True)) + np.abs(x)
    mn = np.minimum(x.min(-1, keepdims=True), 0)
    mx = x.max(-1, keepdims=True)
    rg = np.where(mx > mn, mx - mn, 1)
    sw = w.sum(-1, keepdims=True)
    sx = (w * x).sum(-1, keepdims=True)
    iscale = 15 / rg
    scale = 1 / iscale
    mins = mn.copy()
    L = np.clip(np.rint(iscale * (x - mn)), 0, 15)
    best = (w * (scale * L + mn - x) ** 2).sum(-1, keepdims=True)
    for s in range(21):  # make_qkx2_quants(32, 15, x, w, L, &min, Laux, -1, 0.1, 20, false)
        l = np.clip(np.rint((-1.0 + 0.1 * s + 15) / rg * (x - mn)), 0, 15)
        sl = (w * l).sum(-1, keepdims=True)
        sl2 = (w * l * l).sum(-1, keepdims=True)
        sxl = (w * l * x).sum(-1, keepdims=True)
        D = sw * sl2 - sl * sl
        ok = D > 0
        D = np.where(ok, D, 1)
        ts = (sw * sxl - sx * sl) / D
        tm = (sl2 * sx - sl * sxl) / D
        pos = tm > 0
        ts = np.where(pos, sxl / np.where(sl2 > 0, sl2, 1), ts)
        tm = np.where(pos, 0, tm)
        err = (w * (ts * l + tm - x) ** 2).sum(-1, keepdims=True)
        better = ok & (err < best)
        best = np.where(better, err, best)
        scale = np.where(better, ts, scale)
        mins = np.where(better, tm, mins)
    scales = np.where(mx > mn, scale, 0)[..., 0]
    mins = -mins[..., 0]
    max_scale = scales.max(-1, keepdims=True)
    max_min = mins.max(-1, keepdims=True)
    inv_s = np.where(max_scale > 0, 63 / np.where(max_scale > 0, max_scale, 1), 0)
    inv_m = np.where(max_min > 0, 63 / np.where(max_min > 0, max_min, 1), 0)
    ls = np.minimum(63, np.rint(inv_s * scales)).astype(np.uint8)
    lm = np.minimum(63, np.rint(inv_m * mins)).astype(np.uint8)
    d = (max_scale / 63).astype(np.float16)
    dmin = (max_min / 63).astype(np.float16)
    dd = d.astype(np.float32) * ls
    dm = dmin.astype(np.float32) * lm
    Lf = np.clip(np.rint((x + dm[..., None]) / np.where(dd > 0, dd, 1)[..., None]), 0, 15).astype(np.uint8)
    sc = np.zeros((nb, 12), np.uint8)
    sc[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    sc[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    sc[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    Lf = Lf.reshape(nb, 4, 2, 32)
    qs = (Lf[:, :, 0, :] | (Lf[:, :, 1, :] << 4)).reshape(nb, 128)
    return np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2), sc, qs], axis=1)


def quantize(w, qtype):
    if qtype == T.Q4_K:
        return q4k_quantize(w).reshape(w.shape[0], -1)
    if qtype in (T.F32, T.F16):
        return w.astype(np.float32 if qtype == T.F32 else np.float16)
    return gguf.quants.quantize(w, qtype)


def dequantize(q, qtype, shape):
    if qtype in (T.F32, T.F16):
        return q.astype(np.float32)
    return gguf.quants.dequantize(q.reshape(-1), qtype).reshape(shape).astype(np.float32)


def write_q4k_number():
    w = rng.standard_normal((4096, 4096)).astype(np.float32)
    d = dequantize(q4k_quantize(w), T.Q4_K, w.shape)
    err = float(np.sqrt(np.sum((d - w) ** 2, dtype=np.float64) / np.sum(w.astype(np.float64) ** 2)))
    (OUT / "q4k_gaussian.json").write_text(json.dumps(
        {"rows": 4096, "cols": 4096, "relative_rms_error": err, "bits_per_weight": 4.5}, indent=1) + "\n")
    print("Q4_K relative RMS error on N(0,1):", err)


def write_permute():
    heads, kv, d, hidden = 4, 2, 8, 16
    q = rng.standard_normal((heads * d, hidden)).astype(np.float32)
    k = rng.standard_normal((kv * d, hidden)).astype(np.float32)
    bq = rng.standard_normal(heads * d).astype(np.float32)
    bk = rng.standard_normal(kv * d).astype(np.float32)
    save_file({"q": q, "k": k, "bq": bq, "bk": bk,
               "q_permuted": np.ascontiguousarray(permute(q, heads, heads)),
               "k_permuted": np.ascontiguousarray(permute(k, heads, kv)),
               "bq_permuted": np.ascontiguousarray(permute(bq, heads, heads)),
               "bk_permuted": np.ascontiguousarray(permute(bk, heads, kv))},
              str(OUT / "permute.safetensors"), metadata={"heads": str(heads), "kv_heads": str(kv)})


GGUF_CONFIGS = {  # file: (arch, metadata, has output.weight)
    "llama-3.2-1b": ("llama", dict(block_count=16, context_length=131072, embedding_length=2048,
        feed_forward_length=8192, vocab_size=128256, **{"attention.head_count": 32, "attention.head_count_kv": 8,
        "attention.key_length": 64, "attention.value_length": 64, "attention.layer_norm_rms_epsilon": 1e-5,
        "rope.freq_base": 500000.0, "rope.dimension_count": 64}), False, 128000, 128001),
    "qwen2.5-0.5b": ("qwen2", dict(block_count=24, context_length=32768, embedding_length=896,
        feed_forward_length=4864, vocab_size=151936, **{"attention.head_count": 14, "attention.head_count_kv": 2,
        "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 1000000.0}), False, 151643, 151643),
    "qwen3-0.6b": ("qwen3", dict(block_count=28, context_length=40960, embedding_length=1024,
        feed_forward_length=3072, vocab_size=151936, **{"attention.head_count": 16, "attention.head_count_kv": 8,
        "attention.key_length": 128, "attention.value_length": 128, "attention.layer_norm_rms_epsilon": 1e-6,
        "rope.freq_base": 1000000.0}), False, 151643, 151645),
    "qwen3-vl-2b": ("qwen3vl", dict(block_count=28, context_length=262144, embedding_length=2048,
        feed_forward_length=6144, vocab_size=151936, **{"attention.head_count": 16, "attention.head_count_kv": 8,
        "attention.key_length": 128, "attention.value_length": 128, "attention.layer_norm_rms_epsilon": 1e-6,
        "rope.freq_base": 5000000.0, "rope.dimension_sections": [24, 20, 20, 0]}), False, 151643, 151645),
    "qwen3.5-0.8b": ("qwen35", dict(block_count=25, nextn_predict_layers=1, context_length=262144,
        embedding_length=1024, feed_forward_length=3584, vocab_size=248320, full_attention_interval=4,
        **{"attention.head_count": 8, "attention.head_count_kv": 2, "attention.key_length": 256,
           "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000000.0,
           "rope.dimension_count": 64, "rope.dimension_sections": [11, 11, 10, 0], "ssm.conv_kernel": 4,
           "ssm.state_size": 128, "ssm.group_count": 16, "ssm.time_step_rank": 16, "ssm.inner_size": 2048}),
        False, None, 248044),
    "qwen3.5-35b-a3b": ("qwen35moe", dict(block_count=41, nextn_predict_layers=1, context_length=262144,
        embedding_length=2048, vocab_size=248320, full_attention_interval=4, expert_count=256, expert_used_count=8,
        expert_feed_forward_length=512, expert_shared_feed_forward_length=512,
        **{"attention.head_count": 16, "attention.head_count_kv": 2, "attention.key_length": 256,
           "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000000.0,
           "rope.dimension_count": 64, "rope.dimension_sections": [11, 11, 10, 0], "ssm.conv_kernel": 4,
           "ssm.state_size": 128, "ssm.group_count": 16, "ssm.time_step_rank": 32, "ssm.inner_size": 4096}),
        True, None, 248044),
    "gemma-3-270m": ("gemma3", dict(block_count=18, context_length=32768, embedding_length=640,
        feed_forward_length=2048, vocab_size=262144, **{"attention.head_count": 4, "attention.head_count_kv": 1,
        "attention.key_length": 256, "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-6,
        "attention.sliding_window": 512, "rope.freq_base": 1000000.0}), False, 2, 1),
}


def add_value(writer, key, value):
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, list):
        writer.add_array(key, value)
    else:
        writer.add_string(key, value)


def write_gguf_configs():
    for name, (arch, meta, untied, bos, eos) in GGUF_CONFIGS.items():
        writer = gguf.GGUFWriter(str(OUT / "configs" / f"{name}.gguf"), arch)
        for key, value in meta.items():
            add_value(writer, f"{arch}.{key}", value)
        if bos is not None:
            writer.add_uint32("tokenizer.ggml.bos_token_id", bos)
        writer.add_uint32("tokenizer.ggml.eos_token_id", eos)
        if untied:  # llama.cpp tells tied embeddings by the missing output.weight
            writer.add_tensor("output.weight", np.zeros((1, 32), np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()


def tiny_llama(hidden, heads, kv, head_dim, ffn, vocab, layers, tied):
    t = {"model.embed_tokens.weight": rng.standard_normal((vocab, hidden)),
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(hidden)}
    if not tied:
        t["lm_head.weight"] = rng.standard_normal((vocab, hidden)) * 0.05
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(hidden)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(hidden)
        t[p + "self_attn.q_proj.weight"] = rng.standard_normal((heads * head_dim, hidden)) * 0.05
        t[p + "self_attn.k_proj.weight"] = rng.standard_normal((kv * head_dim, hidden)) * 0.05
        t[p + "self_attn.v_proj.weight"] = rng.standard_normal((kv * head_dim, hidden)) * 0.05
        t[p + "self_attn.o_proj.weight"] = rng.standard_normal((hidden, heads * head_dim)) * 0.05
        t[p + "mlp.gate_proj.weight"] = rng.standard_normal((ffn, hidden)) * 0.05
        t[p + "mlp.up_proj.weight"] = rng.standard_normal((ffn, hidden)) * 0.05
        t[p + "mlp.down_proj.weight"] = rng.standard_normal((hidden, ffn)) * 0.05
    return {k: v.astype(np.float32) for k, v in t.items()}


def write_tiny_hf():
    folder = OUT / "tiny_hf"
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 96, "hidden_size": 64,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
           "intermediate_size": 128, "max_position_embeddings": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": [2, 3], "torch_dtype": "bfloat16"}
    (folder / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    t = tiny_llama(64, 4, 2, 16, 128, 96, 2, tied=True)
    # Stored as BF16, as real checkpoints are; the expected values are those BF16 values.
    bf16 = {k: (v.view(np.uint32) + 0x7FFF + ((v.view(np.uint32) >> 16) & 1)) >> 16 for k, v in t.items()}
    t = {k: (b.astype(np.uint32) << 16).view(np.float32) for k, b in bf16.items()}
    names = sorted(t)
    shards = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    import ml_dtypes
    for i, shard in enumerate(shards):
        file = f"model-0000{i + 1}-of-00002.safetensors"
        save_file({n: t[n].astype(ml_dtypes.bfloat16) for n in shard}, str(folder / file))
        weight_map.update({n: file for n in shard})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1))
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0}}}))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"}))
    save_file(t, str(OUT / "tiny_hf_expected.safetensors"))
    return t


def write_lora(base):
    r, alpha = 4, 8.0
    folder = OUT / "tiny_lora"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": r, "lora_alpha": alpha, "target_modules": ["q_proj", "v_proj"],
         "use_rslora": False, "base_model_name_or_path": "tiny_hf"}, indent=1))
    tensors, merged = {}, {}
    for i in range(2):
        for proj in ("q_proj", "v_proj"):
            w = base[f"model.layers.{i}.self_attn.{proj}.weight"]
            a = (rng.standard_normal((r, w.shape[1])) * 0.1).astype(np.float32)
            b = (rng.standard_normal((w.shape[0], r)) * 0.1).astype(np.float32)
            key = f"base_model.model.model.layers.{i}.self_attn.{proj}"
            tensors[key + ".lora_A.weight"] = a
            tensors[key + ".lora_B.weight"] = b
            merged[f"model.layers.{i}.self_attn.{proj}.weight"] = (
                w.astype(np.float64) + (alpha / r) * (b.astype(np.float64) @ a.astype(np.float64))).astype(np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    save_file(merged, str(OUT / "lora_merged.safetensors"))
    bad = OUT / "tiny_lora_bad"  # lora_A of rank 3 where r says 4
    bad.mkdir(parents=True, exist_ok=True)
    (bad / "adapter_config.json").write_text((folder / "adapter_config.json").read_text())
    key = "base_model.model.model.layers.0.self_attn.q_proj"
    save_file({key + ".lora_A.weight": np.zeros((3, 64), np.float32),
               key + ".lora_B.weight": np.zeros((64, 4), np.float32)}, str(bad / "adapter_model.safetensors"))


def write_tiny_gguf():
    hidden, heads, kv, hd, ffn, vocab = 256, 4, 2, 64, 256, 32
    t = tiny_llama(hidden, heads, kv, hd, ffn, vocab, 2, tied=False)
    writer = gguf.GGUFWriter(str(OUT / "tiny.gguf"), "llama")
    writer.add_block_count(2)
    writer.add_context_length(512)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"t{i}" for i in range(vocab)])
    writer.add_token_merges(["t 1", "t 2"])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_chat_template("{{ messages[0].content }}")
    names = {"model.embed_tokens.weight": ("token_embd.weight", T.F16),
             "lm_head.weight": ("output.weight", T.Q8_0), "model.norm.weight": ("output_norm.weight", T.F32)}
    layer = {"input_layernorm": ("attn_norm", T.F32), "post_attention_layernorm": ("ffn_norm", T.F32),
             "self_attn.q_proj": ("attn_q", T.Q4_K), "self_attn.k_proj": ("attn_k", T.Q8_0),
             "self_attn.v_proj": ("attn_v", T.Q4_K), "self_attn.o_proj": ("attn_output", T.Q8_0),
             "mlp.gate_proj": ("ffn_gate", T.Q4_K), "mlp.up_proj": ("ffn_up", T.F16), "mlp.down_proj": ("ffn_down", T.Q4_K)}
    for i in range(2):
        for hf, (g, q) in layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = (f"blk.{i}.{g}.weight", q)
    expected = {}
    for hf, (g, q) in names.items():
        w = t[hf]
        stored = w
        if ".q_proj." in hf:
            stored = permute(w, heads, heads)
        elif ".k_proj." in hf:
            stored = permute(w, heads, kv)
        data = quantize(np.ascontiguousarray(stored), q)
        writer.add_tensor(g, data, raw_dtype=None if q in (T.F32, T.F16) else q)
        # Rows quantize independently, so un-permuting commutes with dequantizing.
        expected[hf] = dequantize(quantize(np.ascontiguousarray(w), q), q, w.shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    save_file(expected, str(OUT / "tiny_gguf_expected.safetensors"))


def main():
    (OUT / "configs").mkdir(parents=True, exist_ok=True)
    write_gguf_configs()
    write_permute()
    base = write_tiny_hf()
    write_lora(base)
    write_tiny_gguf()
    write_q4k_number()


if __name__ == "__main__":
    main()
