// ModelConfig to and from our manifest: every field under its own name, so that a manifest is
// readable and a missing or mistyped field is named when it is loaded.
#include <gizml/error.h>

#include <nlohmann/json.hpp>

#include "llm/json_fields.h"
#include "llm/model_config.h"

namespace gizml::llm {

using Json = nlohmann::json;

Json configToJson(const ModelConfig& c) {
  Json layerTypes = Json::array();
  for (LayerType t : c.layerTypes) layerTypes.push_back(layerTypeName(t));
  const RopeScaling& s = c.ropeScaling;
  return Json{
      {"architecture", architectureName(c.architecture)},
      {"vocab_size", c.vocabSize}, {"hidden_size", c.hiddenSize}, {"num_layers", c.numLayers},
      {"num_heads", c.numHeads}, {"num_kv_heads", c.numKvHeads}, {"head_dim", c.headDim},
      {"intermediate_size", c.intermediateSize}, {"max_positions", c.maxPositions},
      {"rms_norm_eps", c.rmsNormEps}, {"rope_theta", c.ropeTheta},
      {"rope_scaling", {{"type", s.type}, {"factor", s.factor}, {"low_freq_factor", s.lowFreqFactor},
                        {"high_freq_factor", s.highFreqFactor},
                        {"original_max_positions", s.originalMaxPositions},
                        {"beta_fast", s.betaFast}, {"beta_slow", s.betaSlow}}},
      {"partial_rotary_factor", c.partialRotaryFactor}, {"mrope_section", c.mropeSection},
      {"mrope_interleaved", c.mropeInterleaved}, {"layer_types", layerTypes},
      {"sliding_window", c.slidingWindow}, {"rope_local_theta", c.ropeLocalTheta},
      {"query_pre_attn_scalar", c.queryPreAttnScalar}, {"final_logit_softcapping", c.finalLogitSoftcapping},
      {"tie_word_embeddings", c.tieWordEmbeddings}, {"attention_bias", c.attentionBias},
      {"qk_norm", c.qkNorm}, {"attn_output_gate", c.attnOutputGate},
      {"full_attention_interval", c.fullAttentionInterval},
      {"linear_num_key_heads", c.linearNumKeyHeads}, {"linear_num_value_heads", c.linearNumValueHeads},
      {"linear_key_head_dim", c.linearKeyHeadDim}, {"linear_value_head_dim", c.linearValueHeadDim},
      {"linear_conv_kernel", c.linearConvKernel}, {"num_experts", c.numExperts},
      {"num_experts_per_token", c.numExpertsPerToken}, {"moe_intermediate_size", c.moeIntermediateSize},
      {"shared_expert_intermediate_size", c.sharedExpertIntermediateSize},
      {"mtp_layers", c.mtpLayers}, {"bos_token_id", c.bosTokenId}, {"eos_token_ids", c.eosTokenIds},
  };
}

ModelConfig configFromJson(const Json& json, const std::string& file) {
  check(json.is_object(), file + ": config is not an object");
  const JsonFields f(json, file, "config.");
  ModelConfig c;
  c.architecture = architectureFromName(f.getString("architecture"), f.where("architecture"));
  c.vocabSize = f.getInt("vocab_size");
  c.hiddenSize = f.getInt("hidden_size");
  c.numLayers = f.getInt("num_layers");
  c.numHeads = f.getInt("num_heads");
  c.numKvHeads = f.getInt("num_kv_heads");
  c.headDim = f.getInt("head_dim");
  c.intermediateSize = f.getInt("intermediate_size");
  c.maxPositions = f.getInt("max_positions");
  c.rmsNormEps = f.getFloat("rms_norm_eps");
  c.ropeTheta = f.getFloat("rope_theta");
  const JsonFields s = f.child("rope_scaling");
  c.ropeScaling.type = s.getString("type");
  c.ropeScaling.factor = s.getFloat("factor");
  c.ropeScaling.lowFreqFactor = s.getFloat("low_freq_factor");
  c.ropeScaling.highFreqFactor = s.getFloat("high_freq_factor");
  c.ropeScaling.originalMaxPositions = s.getInt("original_max_positions");
  c.ropeScaling.betaFast = s.getFloat("beta_fast");
  c.ropeScaling.betaSlow = s.getFloat("beta_slow");
  c.partialRotaryFactor = f.getFloat("partial_rotary_factor");
  c.mropeSection = f.getInts("mrope_section");
  c.mropeInterleaved = f.getBool("mrope_interleaved");
  for (const std::string& t : f.getStrings("layer_types")) {
    if (t == "full_attention") c.layerTypes.push_back(LayerType::FullAttention);
    else if (t == "sliding_attention") c.layerTypes.push_back(LayerType::SlidingAttention);
    else if (t == "linear_attention") c.layerTypes.push_back(LayerType::LinearAttention);
    else throw Error(f.where("layer_types") + ": unknown layer type '" + t + "'");
  }
  check(static_cast<int64_t>(c.layerTypes.size()) == c.numLayers,
        f.where("layer_types") + ": one entry per layer expected");
  c.slidingWindow = f.getInt("sliding_window");
  c.ropeLocalTheta = f.getFloat("rope_local_theta");
  c.queryPreAttnScalar = f.getFloat("query_pre_attn_scalar");
  c.finalLogitSoftcapping = f.getFloat("final_logit_softcapping", 0.0);  // manifests older than it lack it
  c.tieWordEmbeddings = f.getBool("tie_word_embeddings");
  c.attentionBias = f.getBool("attention_bias");
  c.qkNorm = f.getBool("qk_norm");
  c.attnOutputGate = f.getBool("attn_output_gate");
  c.fullAttentionInterval = f.getInt("full_attention_interval");
  c.linearNumKeyHeads = f.getInt("linear_num_key_heads");
  c.linearNumValueHeads = f.getInt("linear_num_value_heads");
  c.linearKeyHeadDim = f.getInt("linear_key_head_dim");
  c.linearValueHeadDim = f.getInt("linear_value_head_dim");
  c.linearConvKernel = f.getInt("linear_conv_kernel");
  c.numExperts = f.getInt("num_experts");
  c.numExpertsPerToken = f.getInt("num_experts_per_token");
  c.moeIntermediateSize = f.getInt("moe_intermediate_size");
  c.sharedExpertIntermediateSize = f.getInt("shared_expert_intermediate_size");
  c.mtpLayers = f.getInt("mtp_layers");
  c.bosTokenId = f.getInt("bos_token_id");
  c.eosTokenIds = f.getInts("eos_token_ids");
  return c;
}

}  // namespace gizml::llm
