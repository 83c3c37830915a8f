#include "llm/model_config.h"

#include <gizml/error.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llm/json_fields.h"

namespace gizml::llm {
namespace {

using Json = nlohmann::json;

struct ArchName {
  Architecture arch;
  const char* name;
};
constexpr ArchName kArchNames[] = {
    {Architecture::Llama, "llama"},           {Architecture::Mistral, "mistral"},
    {Architecture::Qwen2, "qwen2"},           {Architecture::Qwen3, "qwen3"},
    {Architecture::Qwen3VLText, "qwen3_vl_text"}, {Architecture::Qwen3_5Text, "qwen3_5_text"},
    {Architecture::Qwen3_5MoeText, "qwen3_5_moe_text"}, {Architecture::Gemma3Text, "gemma3_text"},
};

bool isQwen35(Architecture a) { return a == Architecture::Qwen3_5Text || a == Architecture::Qwen3_5MoeText; }

LayerType layerTypeFromName(const std::string& name, const std::string& where) {
  if (name == "full_attention" || name == "attention") return LayerType::FullAttention;
  if (name == "sliding_attention") return LayerType::SlidingAttention;
  if (name == "linear_attention" || name == "linear") return LayerType::LinearAttention;
  throw Error(where + ": unknown layer type '" + name + "'");
}

std::vector<LayerType> intervalLayers(int64_t layers, int64_t interval, LayerType other) {
  std::vector<LayerType> types;
  for (int64_t i = 0; i < layers; ++i)
    types.push_back((i + 1) % interval == 0 ? LayerType::FullAttention : other);
  return types;
}

// RoPE settings: older configs keep rope_theta and rope_scaling at the top; newer ones put all
// of it (theta, partial factor, mrope) in rope_parameters.
void readRope(const JsonFields& f, ModelConfig& c) {
  c.ropeTheta = f.getFloat("rope_theta", c.ropeTheta);
  c.partialRotaryFactor = f.getFloat("partial_rotary_factor", c.partialRotaryFactor);
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    if (!f.hasObject(key)) continue;
    const JsonFields top = f.child(key);
    // transformers 5 writes Gemma 3's as one set per layer type: the full layers' is the model's
    // RoPE, the sliding layers' base is ropeLocalTheta.
    const bool perType = top.hasObject("full_attention");
    if (perType && top.hasObject("sliding_attention"))
      c.ropeLocalTheta = top.child("sliding_attention").getFloat("rope_theta");
    const JsonFields r = perType ? top.child("full_attention") : top;
    c.ropeTheta = r.getFloat("rope_theta", c.ropeTheta);
    c.partialRotaryFactor = r.getFloat("partial_rotary_factor", c.partialRotaryFactor);
    if (r.has("mrope_section")) c.mropeSection = r.getInts("mrope_section");
    c.mropeInterleaved = r.getBool("mrope_interleaved", c.mropeInterleaved);
    const std::string type = r.getString("rope_type", r.getString("type", "default"));
    if (type == "default" || type == "mrope") continue;
    RopeScaling& s = c.ropeScaling;
    s.type = type;
    if (type != "linear" && type != "llama3" && type != "yarn")
      throw Error(r.where("rope_type") + ": unsupported RoPE scaling '" + type + "'");
    s.factor = r.getFloat("factor");
    if (type == "llama3") {
      s.lowFreqFactor = r.getFloat("low_freq_factor");
      s.highFreqFactor = r.getFloat("high_freq_factor");
      s.originalMaxPositions = r.getInt("original_max_position_embeddings");
    } else if (type == "yarn") {
      s.originalMaxPositions = r.getInt("original_max_position_embeddings", 0);
      s.betaFast = r.getFloat("beta_fast", s.betaFast);
      s.betaSlow = r.getFloat("beta_slow", s.betaSlow);
    }
  }
}

}  // namespace

const char* architectureName(Architecture a) {
  for (const ArchName& n : kArchNames)
    if (n.arch == a) return n.name;
  return "unknown";
}

Architecture architectureFromName(const std::string& name, const std::string& where) {
  for (const ArchName& n : kArchNames)
    if (name == n.name) return n.arch;
  if (name == "qwen3_vl") return Architecture::Qwen3VLText;
  if (name == "qwen3_5") return Architecture::Qwen3_5Text;
  if (name == "qwen3_5_moe") return Architecture::Qwen3_5MoeText;
  if (name == "gemma3") return Architecture::Gemma3Text;
  throw Error(where + ": unknown architecture '" + name + "'");
}

const char* layerTypeName(LayerType t) {
  switch (t) {
    case LayerType::FullAttention: return "full_attention";
    case LayerType::SlidingAttention: return "sliding_attention";
    case LayerType::LinearAttention: return "linear_attention";
  }
  return "unknown";
}

ModelConfig parseHfConfig(const std::string& jsonText, const std::string& file) {
  const JsonFields top = JsonFields::parse(jsonText, file);
  ModelConfig c;
  c.architecture = architectureFromName(top.getString("model_type"), top.where("model_type"));
  // Multimodal checkpoints describe their language model in text_config.
  const JsonFields f = top.hasObject("text_config") ? top.child("text_config") : top;
  const Architecture a = c.architecture;

  c.vocabSize = f.getInt("vocab_size");
  c.hiddenSize = f.getInt("hidden_size");
  c.numLayers = f.getInt("num_hidden_layers");
  c.numHeads = f.getInt("num_attention_heads");
  c.numKvHeads = f.getInt("num_key_value_heads", c.numHeads);
  check(c.numHeads > 0 && c.hiddenSize > 0 && c.numLayers > 0 && c.numKvHeads > 0,
        file + ": sizes must be positive (hidden_size, num_hidden_layers, heads)");
  check(c.numHeads % c.numKvHeads == 0,
        f.where("num_key_value_heads") + ": must divide num_attention_heads");
  // Some configs write head_dim: null, which means hidden_size / heads.
  c.headDim = f.isNull("head_dim") ? c.hiddenSize / c.numHeads : f.getInt("head_dim");
  c.intermediateSize = a == Architecture::Qwen3_5MoeText ? f.getInt("intermediate_size", 0)
                                                          : f.getInt("intermediate_size");
  c.maxPositions = f.getInt("max_position_embeddings");
  c.rmsNormEps = f.getFloat("rms_norm_eps");
  readRope(f, c);
  if (isQwen35(a) && !f.has("partial_rotary_factor") && c.partialRotaryFactor == 1.0 &&
      !(f.hasObject("rope_parameters") && f.child("rope_parameters").has("partial_rotary_factor")))
    c.partialRotaryFactor = 0.25;  // transformers' default for Qwen 3.5
  if (a == Architecture::Qwen3VLText && c.mropeSection.empty()) c.mropeSection = {24, 20, 20};

  // Top-level values win for tied embeddings: composite configs keep it there.
  const bool tiedDefault = a == Architecture::Gemma3Text;
  c.tieWordEmbeddings = top.getBool("tie_word_embeddings", f.getBool("tie_word_embeddings", tiedDefault));
  c.attentionBias = a == Architecture::Qwen2 || f.getBool("attention_bias", false);
  c.qkNorm = a != Architecture::Llama && a != Architecture::Mistral && a != Architecture::Qwen2;
  c.attnOutputGate = isQwen35(a) && f.getBool("attn_output_gate", true);

  // Sliding windows: Mistral's applies to every layer, Qwen2's only when switched on.
  const bool sliding = !f.isNull("sliding_window") &&
                       (a == Architecture::Mistral || a == Architecture::Gemma3Text ||
                        (a == Architecture::Qwen2 && f.getBool("use_sliding_window", false)));
  if (sliding) c.slidingWindow = f.getInt("sliding_window");

  if (f.has("layer_types")) {
    for (const std::string& t : f.getStrings("layer_types"))
      c.layerTypes.push_back(layerTypeFromName(t, f.where("layer_types")));
    check(static_cast<int64_t>(c.layerTypes.size()) == c.numLayers,
          f.where("layer_types") + ": " + std::to_string(c.layerTypes.size()) + " entries for " +
              std::to_string(c.numLayers) + " layers");
  } else if (isQwen35(a)) {
    c.layerTypes = intervalLayers(c.numLayers, f.getInt("full_attention_interval", 4), LayerType::LinearAttention);
  } else if (a == Architecture::Gemma3Text) {
    const int64_t pattern = f.getInt("sliding_window_pattern", f.getInt("_sliding_window_pattern", 6));
    c.layerTypes = intervalLayers(c.numLayers, pattern, LayerType::SlidingAttention);
  } else {
    const LayerType all = c.slidingWindow > 0 ? LayerType::SlidingAttention : LayerType::FullAttention;
    c.layerTypes.assign(static_cast<size_t>(c.numLayers), all);
  }

  if (a == Architecture::Gemma3Text) {
    c.ropeLocalTheta = f.getFloat("rope_local_base_freq", c.ropeLocalTheta > 0 ? c.ropeLocalTheta : 10000.0);
    c.queryPreAttnScalar = f.getFloat("query_pre_attn_scalar", static_cast<double>(c.headDim));
    c.finalLogitSoftcapping = f.getFloat("final_logit_softcapping", 0.0);
  }
  if (isQwen35(a)) {
    c.fullAttentionInterval = f.getInt("full_attention_interval", 4);
    c.linearNumKeyHeads = f.getInt("linear_num_key_heads");
    c.linearNumValueHeads = f.getInt("linear_num_value_heads");
    c.linearKeyHeadDim = f.getInt("linear_key_head_dim");
    c.linearValueHeadDim = f.getInt("linear_value_head_dim");
    c.linearConvKernel = f.getInt("linear_conv_kernel_dim");
    c.mtpLayers = f.getInt("mtp_num_hidden_layers", 0);
  }
  if (a == Architecture::Qwen3_5MoeText) {
    c.numExperts = f.getInt("num_experts");
    c.numExpertsPerToken = f.getInt("num_experts_per_tok");
    c.moeIntermediateSize = f.getInt("moe_intermediate_size");
    c.sharedExpertIntermediateSize = f.getInt("shared_expert_intermediate_size", 0);
  }

  const JsonFields& ids = f.has("eos_token_id") || f.has("bos_token_id") ? f : top;
  c.bosTokenId = ids.isNull("bos_token_id") ? -1 : ids.getInt("bos_token_id");
  if (ids.has("eos_token_id") && !ids.isNull("eos_token_id"))
    c.eosTokenIds = ids.isArray("eos_token_id") ? ids.getInts("eos_token_id")
                                                 : std::vector<int64_t>{ids.getInt("eos_token_id")};
  return c;
}

ModelConfig readHfConfig(const std::string& path) {
  std::string file = path;
  if (std::filesystem::is_directory(path)) file = (std::filesystem::path(path) / "config.json").string();
  std::ifstream in(file);
  check(static_cast<bool>(in), "cannot read " + file);
  std::stringstream text;
  text << in.rdbuf();
  return parseHfConfig(text.str(), file);
}

}  // namespace gizml::llm
