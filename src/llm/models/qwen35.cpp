// Qwen 3.5 (dense and MoE text models): the Qwen3-Next hybrid. Every norm scales by (1 + w).
// Layer i mixes tokens by full attention when (i + 1) % full_attention_interval == 0, else by a
// Gated DeltaNet (gated_delta_net.h). Per layer:
//   x += mixer(norm(x))      attention: q with its gate, q/k norms, partial RoPE, sigmoid(gate) out
//   x += mlp(norm(x))        SwiGLU, or the mixture of experts (moe.h)
#include "llm/models/families.h"

#include <cmath>
#include <variant>

#include "llm/models/decoder.h"
#include "llm/models/gated_delta_net.h"
#include "llm/models/moe.h"

namespace gizml::llm {
namespace {

class Qwen35 final : public DecoderModel {
 public:
  Qwen35(const ConvertedModel& weights, const ModelOptions& options)
      : DecoderModel(weights, options, {.onePlusNorm = true, .recurrentLayers = true}) {
    const ModelConfig& c = config();
    const Rope rope(c.headDim, c.partialRotaryFactor, c.ropeTheta, c.ropeScaling);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.headDim)));
    const bool moe = c.architecture == Architecture::Qwen3_5MoeText;
    for (int64_t i = 0; i < c.numLayers; ++i) {
      const std::string p = layerPrefix(i);
      Layer l;
      l.inputNorm = RmsNorm(weights, p + "input_layernorm.weight", c.hiddenSize, c.rmsNormEps, true);
      if (c.layerTypes[static_cast<size_t>(i)] == LayerType::LinearAttention)
        l.mixer = GatedDeltaNet(weights, p + "linear_attn.", c);
      else
        l.mixer = Attention(weights, p + "self_attn.", attentionShape(i, scale), c.attentionBias, true, true,
                            c.rmsNormEps, rope, c.attnOutputGate);
      l.postAttentionNorm = RmsNorm(weights, p + "post_attention_layernorm.weight", c.hiddenSize, c.rmsNormEps, true);
      if (moe)
        l.mlp = MoeMlp(weights, p + "mlp.", c);
      else
        l.mlp = GatedMlp(weights, p + "mlp.", c.hiddenSize, c.intermediateSize, Activation::Silu);
      layers_.push_back(std::move(l));
    }
  }

  std::unique_ptr<SequenceState> newState(int64_t maxTokens) const override {
    return std::make_unique<HybridState>(this, config(), maxTokens, options().kvCache);
  }

 private:
  struct Layer {
    RmsNorm inputNorm;
    std::variant<GatedDeltaNet, Attention> mixer;
    RmsNorm postAttentionNorm;
    std::variant<GatedMlp, MoeMlp> mlp;
  };

  void layer(int64_t i, float* x, const Batch& batch) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const int64_t n = batch.rows * config().hiddenSize;
    std::vector<float> h(static_cast<size_t>(n)), y(static_cast<size_t>(n));
    l.inputNorm.apply(x, batch.rows, h.data());
    std::visit([&](const auto& mixer) { mixer.forward(h.data(), batch, i, y.data()); }, l.mixer);
    addInPlace(x, y.data(), n);
    l.postAttentionNorm.apply(x, batch.rows, h.data());
    std::visit([&](const auto& mlp) { mlp.forward(h.data(), batch.rows, y.data()); }, l.mlp);
    addInPlace(x, y.data(), n);
  }

  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<LanguageModel> buildQwen35(const ConvertedModel& weights, const ModelOptions& options) {
  return std::make_unique<Qwen35>(weights, options);
}

}  // namespace gizml::llm
