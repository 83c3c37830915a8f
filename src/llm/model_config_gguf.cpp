// ModelConfig from GGUF metadata, with llama.cpp's names (src/llama-arch.cpp) and the values
// llama.cpp fixes per architecture instead of storing them (Gemma 3's sliding pattern and local
// RoPE base, the interleaved multimodal RoPE of Qwen3-VL and Qwen 3.5).
#include <gizml/error.h>

#include <cstdio>
#include <cstdlib>

#include "llm/formats/gguf.h"
#include "llm/model_config.h"

namespace gizml::llm {
namespace {

Architecture ggufArchitecture(const std::string& name, const std::string& where) {
  if (name == "llama") return Architecture::Llama;
  if (name == "qwen2") return Architecture::Qwen2;
  if (name == "qwen3") return Architecture::Qwen3;
  if (name == "qwen3vl") return Architecture::Qwen3VLText;
  if (name == "qwen35") return Architecture::Qwen3_5Text;
  if (name == "qwen35moe") return Architecture::Qwen3_5MoeText;
  if (name == "gemma3") return Architecture::Gemma3Text;
  throw Error(where + ": unknown architecture '" + name + "'");
}

// GGUF stores these as f32; the decimal that Python wrote (1e-06, not 9.99999997e-07) is the
// shortest one that rounds to the same f32.
double shortestDecimal(double value) {
  const float f = static_cast<float>(value);
  char text[32];
  for (int digits = 1; digits < 10; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) break;
  }
  return std::strtod(text, nullptr);
}

}  // namespace

ModelConfig configFromGguf(const GgufFile& g) {
  const std::string archName = g.getString("general.architecture");
  ModelConfig c;
  c.architecture = ggufArchitecture(archName, g.path() + ": general.architecture");
  const Architecture a = c.architecture;
  const bool qwen35 = a == Architecture::Qwen3_5Text || a == Architecture::Qwen3_5MoeText;
  const std::string p = archName + ".";

  c.hiddenSize = g.getInt(p + "embedding_length");
  c.numHeads = g.getInt(p + "attention.head_count");
  c.numKvHeads = g.getInt(p + "attention.head_count_kv", c.numHeads);
  check(c.numHeads > 0 && c.numKvHeads > 0 && c.numHeads % c.numKvHeads == 0,
        g.path() + ": " + p + "attention.head_count_kv must divide attention.head_count");
  c.headDim = g.getInt(p + "attention.key_length", c.hiddenSize / c.numHeads);
  c.mtpLayers = g.getInt(p + "nextn_predict_layers", 0);
  // llama.cpp counts the MTP block in block_count.
  c.numLayers = g.getInt(p + "block_count") - c.mtpLayers;
  c.maxPositions = g.getInt(p + "context_length");
  c.rmsNormEps = shortestDecimal(g.getFloat(p + "attention.layer_norm_rms_epsilon"));
  c.intermediateSize = g.getInt(p + "feed_forward_length", 0);
  check(c.intermediateSize > 0 || a == Architecture::Qwen3_5MoeText,
        g.path() + ": " + p + "feed_forward_length is missing");

  if (g.has(p + "vocab_size")) {
    c.vocabSize = g.getInt(p + "vocab_size");
  } else if (g.has("tokenizer.ggml.tokens")) {
    c.vocabSize = static_cast<int64_t>(g.value("tokenizer.ggml.tokens").count);
  } else {
    const GgufTensorInfo* embed = g.findTensor("token_embd.weight");
    check(embed != nullptr, g.path() + ": " + p + "vocab_size is missing (no tokens, no token_embd)");
    c.vocabSize = embed->shape()[0];
  }

  c.ropeTheta = shortestDecimal(g.getFloat(p + "rope.freq_base", 10000.0));
  const int64_t rotated = g.getInt(p + "rope.dimension_count", c.headDim);
  c.partialRotaryFactor = static_cast<double>(rotated) / static_cast<double>(c.headDim);
  if (g.has(p + "rope.dimension_sections")) {
    c.mropeSection = g.getInts(p + "rope.dimension_sections");
    while (!c.mropeSection.empty() && c.mropeSection.back() == 0) c.mropeSection.pop_back();
  }
  c.mropeInterleaved = a == Architecture::Qwen3VLText || qwen35;
  const std::string scaling = g.getString(p + "rope.scaling.type", "none");
  if (scaling == "linear" || scaling == "yarn") {
    c.ropeScaling.type = scaling;
    c.ropeScaling.factor = shortestDecimal(g.getFloat(p + "rope.scaling.factor"));
    c.ropeScaling.originalMaxPositions = g.getInt(p + "rope.scaling.original_context_length", 0);
  } else {
    check(scaling == "none", g.path() + ": " + p + "rope.scaling.type: unsupported '" + scaling + "'");
  }

  c.tieWordEmbeddings = g.findTensor("output.weight") == nullptr;
  c.attentionBias = a == Architecture::Qwen2 || g.findTensor("blk.0.attn_q.bias") != nullptr;
  c.qkNorm = a != Architecture::Llama && a != Architecture::Qwen2;
  c.attnOutputGate = qwen35;

  c.slidingWindow = g.getInt(p + "attention.sliding_window", 0);
  if (a == Architecture::Gemma3Text) {
    c.layerTypes.clear();
    for (int64_t i = 0; i < c.numLayers; ++i)
      c.layerTypes.push_back((i + 1) % 6 == 0 ? LayerType::FullAttention : LayerType::SlidingAttention);
    c.ropeLocalTheta = 10000.0;
    c.queryPreAttnScalar = static_cast<double>(c.headDim);
  } else if (qwen35) {
    c.fullAttentionInterval = g.getInt(p + "full_attention_interval");
    for (int64_t i = 0; i < c.numLayers; ++i)
      c.layerTypes.push_back((i + 1) % c.fullAttentionInterval == 0 ? LayerType::FullAttention
                                                                      : LayerType::LinearAttention);
    c.linearConvKernel = g.getInt(p + "ssm.conv_kernel");
    c.linearKeyHeadDim = g.getInt(p + "ssm.state_size");
    c.linearNumKeyHeads = g.getInt(p + "ssm.group_count");
    c.linearNumValueHeads = g.getInt(p + "ssm.time_step_rank");
    check(c.linearNumValueHeads > 0, g.path() + ": " + p + "ssm.time_step_rank must be positive");
    c.linearValueHeadDim = g.getInt(p + "ssm.inner_size") / c.linearNumValueHeads;
  } else {
    c.layerTypes.assign(static_cast<size_t>(c.numLayers),
                        c.slidingWindow > 0 ? LayerType::SlidingAttention : LayerType::FullAttention);
  }
  if (a == Architecture::Qwen3_5MoeText) {
    c.numExperts = g.getInt(p + "expert_count");
    c.numExpertsPerToken = g.getInt(p + "expert_used_count");
    c.moeIntermediateSize = g.getInt(p + "expert_feed_forward_length");
    c.sharedExpertIntermediateSize = g.getInt(p + "expert_shared_feed_forward_length", 0);
  }

  c.bosTokenId = g.getInt("tokenizer.ggml.bos_token_id", -1);
  if (g.has("tokenizer.ggml.eos_token_id")) c.eosTokenIds = {g.getInt("tokenizer.ggml.eos_token_id")};
  return c;
}

}  // namespace gizml::llm
