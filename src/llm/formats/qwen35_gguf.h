#pragma once
// llama.cpp's GGUF layout of Qwen 3.5 (convert_hf_to_gguf.py, Qwen3NextModel and
// _LinearAttentionVReorderBase), undone on reading so that we keep Hugging Face's:
//  - the (1 + w) norms are stored with the 1 added (not the DeltaNet's gated norm, a plain w);
//  - ssm_a holds -exp(A_log); the conv weight drops its middle axis of 1;
//  - where key heads are fewer than value heads, the value heads of every DeltaNet tensor go from
//    grouped by key head (head i * perKey + j) to tiled (position j * keyHeads + i), for ggml's
//    broadcasting: the rows of v in attn_qkv, of attn_gate, ssm_alpha, ssm_beta, ssm_a, ssm_dt
//    and the conv's v channels, and the columns of ssm_out;
//  - the experts are stacked in one tensor per projection ([experts, rows, cols]).
#include <gizml/tensor.h>

#include <string>

#include "llm/model_config.h"

namespace gizml::llm {

/// The Hugging Face tensor `hfName` (a Qwen 3.5 text model's) from llama.cpp's tensor t.
tensor::Tensor qwen35FromGguf(const std::string& hfName, const tensor::Tensor& t, const ModelConfig& config);

/// The Hugging Face names of expert e's projection in a stacked GGUF tensor: "gate_proj" for
/// ffn_gate_exps, ...; empty for other stems. ffn_gate_up_exps holds gate_proj then up_proj.
std::vector<std::string> expertProjections(const std::string& ggufStem);

}  // namespace gizml::llm
