#pragma once
// llama.cpp's convert_hf_to_gguf.py reorders the rows of Llama's q and k projections (weights and
// biases) within each head, so that ggml can rotate adjacent pairs: row h*d + 2i + j of the GGUF
// tensor is row h*d + j*d/2 + i of Hugging Face's (d = head size, i < d/2, j < 2). We keep
// Hugging Face's order, so GGUF tensors of Llama models are un-permuted on reading.
#include <gizml/tensor.h>

namespace gizml::llm {

/// Hugging Face's rows of a permuted attn_q / attn_k weight [rows, ...] or bias [rows]; heads:
/// the query heads for attn_q, the key-value heads for attn_k. Throws gizml::Error naming
/// `what` when the rows are not heads * an even head size.
tensor::Tensor unpermuteLlamaRows(const tensor::Tensor& permuted, int64_t heads, const std::string& what);

}  // namespace gizml::llm
