#pragma once
// What a model is, apart from its weights: the architecture and its sizes, read from a Hugging
// Face config.json (nested text_config included) or from a GGUF file's {arch}.* metadata, and
// written to / read from our manifest. Bad input throws gizml::Error naming the file and field.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace gizml::llm {

class GgufFile;

enum class Architecture {
  Llama, Mistral, Qwen2, Qwen3, Qwen3VLText, Qwen3_5Text, Qwen3_5MoeText, Gemma3Text,
};
/// Hugging Face's model_type of the text model: "llama", "qwen3_5_text", ...
const char* architectureName(Architecture a);
/// The architecture of a model_type (also the composite "qwen3_vl", "qwen3_5", "gemma3");
/// throws gizml::Error naming `where` for unknown types.
Architecture architectureFromName(const std::string& name, const std::string& where);

enum class LayerType { FullAttention, SlidingAttention, LinearAttention };
const char* layerTypeName(LayerType t);

struct RopeScaling {
  std::string type = "default";  // default, linear, llama3, yarn
  double factor = 1.0;
  double lowFreqFactor = 1.0;    // llama3
  double highFreqFactor = 4.0;   // llama3
  int64_t originalMaxPositions = 0;  // llama3, yarn
  double betaFast = 32.0;        // yarn
  double betaSlow = 1.0;         // yarn
  bool operator==(const RopeScaling&) const = default;
};

struct ModelConfig {
  Architecture architecture = Architecture::Llama;
  int64_t vocabSize = 0;
  int64_t hiddenSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t intermediateSize = 0;
  int64_t maxPositions = 0;
  double rmsNormEps = 1e-6;

  double ropeTheta = 10000.0;
  RopeScaling ropeScaling;
  double partialRotaryFactor = 1.0;     // the share of each head that rotates
  std::vector<int64_t> mropeSection;    // multimodal RoPE: pairs per (t, h, w) component
  bool mropeInterleaved = false;

  std::vector<LayerType> layerTypes;    // one per layer
  int64_t slidingWindow = 0;            // 0: none
  double ropeLocalTheta = 0.0;          // Gemma 3's sliding layers; 0: ropeTheta
  double queryPreAttnScalar = 0.0;      // Gemma 3: scores scale by its rsqrt; 0: headDim
  double finalLogitSoftcapping = 0.0;   // Gemma: logits = c * tanh(logits / c); 0: none

  bool tieWordEmbeddings = false;
  bool attentionBias = false;           // q/k/v biases
  bool qkNorm = false;                  // RMSNorm per head of q and k
  bool attnOutputGate = false;          // Qwen 3.5: sigmoid gate on the attention output

  // Qwen 3.5 Gated DeltaNet layers.
  int64_t fullAttentionInterval = 0;
  int64_t linearNumKeyHeads = 0;
  int64_t linearNumValueHeads = 0;
  int64_t linearKeyHeadDim = 0;
  int64_t linearValueHeadDim = 0;
  int64_t linearConvKernel = 0;

  // Mixture of experts.
  int64_t numExperts = 0;
  int64_t numExpertsPerToken = 0;
  int64_t moeIntermediateSize = 0;
  int64_t sharedExpertIntermediateSize = 0;

  int64_t mtpLayers = 0;  // multi-token prediction layers after the main stack

  int64_t bosTokenId = -1;  // -1: none
  std::vector<int64_t> eosTokenIds;

  bool operator==(const ModelConfig&) const = default;
};

/// Parses config.json text; `file` names it in errors.
ModelConfig parseHfConfig(const std::string& jsonText, const std::string& file);
/// Reads a config.json file (or the config.json of a folder).
ModelConfig readHfConfig(const std::string& path);
/// Reads the {arch}.* and tokenizer.ggml.* metadata (and which tensors exist: tied embeddings,
/// biases) of a GGUF file.
ModelConfig configFromGguf(const GgufFile& file);

/// Our manifest's form: every field by name; fromJson checks each one (`file` names the
/// manifest in errors).
nlohmann::json configToJson(const ModelConfig& config);
ModelConfig configFromJson(const nlohmann::json& json, const std::string& file);

}  // namespace gizml::llm
