// Llama and the models drawn like it: Mistral (a sliding window on every layer), Qwen2 (q/k/v
// biases), Qwen3 (an RMS norm on each head of q and k) and Qwen3-VL's text model (Qwen3 with
// interleaved multimodal RoPE, which for text positions is plain RoPE). Per layer:
//   x += attention(norm(x))
//   x += mlp(norm(x))          (SwiGLU)
#include "llm/models/families.h"

#include <cmath>

#include "llm/models/decoder.h"
#include "llm/ops/scratch.h"

namespace gizml::llm {
namespace {

class Llama final : public DecoderModel {
 public:
  Llama(const ConvertedModel& weights, const ModelOptions& options) : DecoderModel(weights, options, {}) {
    const ModelConfig& c = config();
    const Rope rope(c.headDim, c.partialRotaryFactor, c.ropeTheta, c.ropeScaling);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.headDim)));
    for (int64_t i = 0; i < c.numLayers; ++i) {
      const std::string p = layerPrefix(i);
      const ConvertedModel& w = layerWeights(i);
      layers_.push_back({
          RmsNorm(w, p + "input_layernorm.weight", c.hiddenSize, c.rmsNormEps, false),
          Attention(w, p + "self_attn.", attentionShape(i, scale), c.attentionBias, c.qkNorm, false, c.rmsNormEps,
                    rope),
          RmsNorm(w, p + "post_attention_layernorm.weight", c.hiddenSize, c.rmsNormEps, false),
          GatedMlp(w, p + "mlp.", c.hiddenSize, c.intermediateSize, Activation::Silu),
      });
    }
  }

 private:
  struct Layer {
    RmsNorm inputNorm;
    Attention attention;
    RmsNorm postAttentionNorm;
    GatedMlp mlp;
  };

  void layer(int64_t i, const Tensor& x, const Batch& batch) const override {
    const Layer& l = layers_[static_cast<size_t>(i)];
    const Tensor h = ops::scratch(ops::Scratch::Normed, batch.rows, config().hiddenSize, x);
    const Tensor y = ops::scratch(ops::Scratch::Output, batch.rows, config().hiddenSize, x);
    l.inputNorm.apply(x, h);
    l.attention.forward(h, batch, i, y);
    l.postAttentionNorm.addThenApply(x, y, h);
    l.mlp.forward(h, y);
    ops::addInPlace(x, y);
  }

  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<LanguageModel> buildLlama(const ConvertedModel& weights, const ModelOptions& options) {
  return std::make_unique<Llama>(weights, options);
}

}  // namespace gizml::llm
