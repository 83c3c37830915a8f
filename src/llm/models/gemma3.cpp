// Gemma 3's text model. Embeddings times sqrt(hidden); every norm scales by (1 + w). Per layer:
//   x += norm(attention(norm(x)))     q/k norms; sliding layers (5 of 6) with their own RoPE base
//   x += norm(mlp(norm(x)))           GeGLU (gelu, tanh form)
// Scores scale by 1/sqrt(query_pre_attn_scalar); logits may be soft-capped.
#include "llm/models/families.h"

#include <cmath>

#include "llm/models/decoder.h"
#include "llm/ops/scratch.h"

namespace gizml::llm {
namespace {

DecoderOptions gemmaDecoder(const ModelConfig& c) {
  return {.onePlusNorm = true,
          .embedScale = static_cast<float>(std::sqrt(static_cast<double>(c.hiddenSize))),
          .logitSoftcap = static_cast<float>(c.finalLogitSoftcapping)};
}

class Gemma3 final : public DecoderModel {
 public:
  Gemma3(const ConvertedModel& weights, const ModelOptions& options)
      : DecoderModel(weights, options, gemmaDecoder(weights.config())) {
    const ModelConfig& c = config();
    const double local = c.ropeLocalTheta > 0 ? c.ropeLocalTheta : c.ropeTheta;
    const Rope globalRope(c.headDim, c.partialRotaryFactor, c.ropeTheta, c.ropeScaling);
    const Rope localRope(c.headDim, c.partialRotaryFactor, local, RopeScaling{});
    const double scalar = c.queryPreAttnScalar > 0 ? c.queryPreAttnScalar : static_cast<double>(c.headDim);
    const auto scale = static_cast<float>(1.0 / std::sqrt(scalar));
    for (int64_t i = 0; i < c.numLayers; ++i) {
      const std::string p = layerPrefix(i);
      const bool sliding = c.layerTypes[static_cast<size_t>(i)] == LayerType::SlidingAttention;
      const ConvertedModel& w = layerWeights(i);
      auto norm = [&](const char* name) { return RmsNorm(w, p + name, c.hiddenSize, c.rmsNormEps, true); };
      layers_.push_back({
          norm("input_layernorm.weight"),
          Attention(w, p + "self_attn.", attentionShape(i, scale), c.attentionBias, true, true, c.rmsNormEps,
                    sliding ? localRope : globalRope),
          norm("post_attention_layernorm.weight"),
          norm("pre_feedforward_layernorm.weight"),
          GatedMlp(w, p + "mlp.", c.hiddenSize, c.intermediateSize, Activation::GeluTanh),
          norm("post_feedforward_layernorm.weight"),
      });
    }
  }

 private:
  struct Layer {
    RmsNorm inputNorm;
    Attention attention;
    RmsNorm postAttentionNorm;
    RmsNorm preFeedforwardNorm;
    GatedMlp mlp;
    RmsNorm postFeedforwardNorm;
  };

  void layer(int64_t i, const Tensor& x, const Batch& batch) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const Tensor h = ops::scratch(ops::Scratch::Normed, batch.rows, config().hiddenSize, x);
    const Tensor y = ops::scratch(ops::Scratch::Output, batch.rows, config().hiddenSize, x);
    l.inputNorm.apply(x, h);
    l.attention.forward(h, batch, i, y);
    l.postAttentionNorm.apply(y, y);
    l.preFeedforwardNorm.addThenApply(x, y, h);
    l.mlp.forward(h, y);
    l.postFeedforwardNorm.apply(y, y);
    ops::addInPlace(x, y);
  }

  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<LanguageModel> buildGemma3(const ConvertedModel& weights, const ModelOptions& options) {
  return std::make_unique<Gemma3>(weights, options);
}

}  // namespace gizml::llm
