// Qwen 3.5 (dense and MoE text models): the Qwen3-Next hybrid. Every norm scales by (1 + w).
// Layer i mixes tokens by full attention when (i + 1) % full_attention_interval == 0, else by a
// Gated DeltaNet (gated_delta_net.h). Per layer:
//   x += mixer(norm(x))      attention: q with its gate, q/k norms, partial RoPE, sigmoid(gate) out
//   x += mlp(norm(x))        SwiGLU, or the mixture of experts (moe.h)
// With an MTP layer (mtp.*), token i + 2 is drafted from the final hidden state h_i and token
// i + 1: x = fc([norm(embed(t_i+1)), norm(h_i)]), one full-attention layer with its own keys and
// values at position i, a norm and the shared output layer; drafts feed its output back.
#include "llm/models/families.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <span>
#include <variant>

#include "llm/models/decoder.h"
#include "llm/models/gated_delta_net.h"
#include "llm/models/moe.h"
#include "llm/ops/host.h"
#include "llm/ops/scratch.h"

namespace gizml::llm {
namespace {

class Qwen35 final : public DecoderModel {
 public:
  Qwen35(const ConvertedModel& weights, const ModelOptions& options)
      : DecoderModel(weights, options, {.onePlusNorm = true, .recurrentLayers = true,
                                        .keepHidden = weights.config().mtpLayers > 0}) {
    const ModelConfig& c = config();
    for (int64_t i = 0; i < c.numLayers; ++i) layers_.push_back(makeLayer(layerPrefix(i), i));
    if (c.mtpLayers > 0) {
      check(c.mtpLayers == 1, weights.folder() + ": " + std::to_string(c.mtpLayers) +
                                  " MTP layers; one is supported (the one Qwen 3.5 ships)");
      // The MTP layer is on the last stage, with the output layer it shares.
      const ConvertedModel& w = layerWeights(c.numLayers);
      auto norm = [&](const std::string& name) { return RmsNorm(w, name, c.hiddenSize, c.rmsNormEps, true); };
      mtp_ = Mtp{Linear(w, "mtp.fc.weight", c.hiddenSize, 2 * c.hiddenSize),
                 norm("mtp.pre_fc_norm_embedding.weight"), norm("mtp.pre_fc_norm_hidden.weight"),
                 makeLayer("mtp.layers.0.", c.numLayers), norm("mtp.norm.weight")};
    }
  }

  std::unique_ptr<SequenceState> makeState(std::shared_ptr<ops::KvPool> pool, int64_t maxTokens) const override {
    return std::make_unique<HybridState>(std::move(pool), config(), maxTokens);
  }

  bool drafts() const override { return mtp_.has_value(); }

  std::vector<int32_t> draft(SequenceState& s, int32_t next, int64_t count, std::span<const int32_t> recent) override {
    auto* state = dynamic_cast<HybridState*>(&s);
    check(state != nullptr && state->owner() == this, "draft: the state was not made by this model");
    check(next >= 0 && next < config().vocabSize, "draft: token " + std::to_string(next) + " is outside the vocabulary");
    if (!mtp_ || count <= 0 || state->length() == 0) return {};
    const int64_t length = state->length();
    count = std::min(count, state->capacity() - length);
    // The MTP keys and values of the positions read since the last draft, from their true
    // hidden states; the last of them (h of the last token read, then `next`) gives draft 1.
    // (At least the last position: `next` may differ from what an earlier draft read there.)
    const int64_t first = std::min(state->mtpNext, length - 1), rows = length - first;
    std::vector<int32_t> tokens(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r)
      tokens[static_cast<size_t>(r)] = first + r + 1 < length ? state->tokenAt(first + r + 1) : next;
    Tensor out = mtpPass(*state, tokens, state->hiddenRows(first, rows), first);
    state->mtpNext = length;
    const std::vector<int32_t> candidates = draftRows(recent);
    std::vector<int32_t> guesses;
    for (int64_t i = 0;; ++i) {
      const Tensor h = rowsOf(out, out.size(0) - 1, 1);
      const int32_t guess = outputLayer().largestDot(candidates, h);
      guesses.push_back(guess);
      if (i + 1 >= count) break;
      // The next draft reads the MTP layer's own output as the hidden state (its keys and values
      // at these positions are guesses; the next draft after a verification redoes them).
      out = mtpPass(*state, {guess}, h, length + i);
    }
    return guesses;
  }

 private:
  struct Layer {
    RmsNorm inputNorm;
    std::variant<GatedDeltaNet, Attention> mixer;
    RmsNorm postAttentionNorm;
    std::variant<GatedMlp, MoeMlp> mlp;
  };
  struct Mtp {
    Linear fc;
    RmsNorm embeddingNorm, hiddenNorm;
    Layer layer;  // full attention, its keys and values in the cache's layer numLayers
    RmsNorm norm;
  };

  /// The layer under `prefix` whose keys and values (if it attends) are cache layer `index`.
  Layer makeLayer(const std::string& p, int64_t index) const {
    const ModelConfig& c = config();
    const Rope rope(c.headDim, c.partialRotaryFactor, c.ropeTheta, c.ropeScaling);
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.headDim)));
    const bool linear = index < c.numLayers && c.layerTypes[static_cast<size_t>(index)] == LayerType::LinearAttention;
    const ConvertedModel& w = layerWeights(index);
    Layer l;
    l.inputNorm = RmsNorm(w, p + "input_layernorm.weight", c.hiddenSize, c.rmsNormEps, true);
    if (linear)
      l.mixer = GatedDeltaNet(w, p + "linear_attn.", c);
    else
      l.mixer = Attention(w, p + "self_attn.", {c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim, scale},
                          c.attentionBias, true, true, c.rmsNormEps, rope, c.attnOutputGate);
    l.postAttentionNorm = RmsNorm(w, p + "post_attention_layernorm.weight", c.hiddenSize, c.rmsNormEps, true);
    if (c.architecture == Architecture::Qwen3_5MoeText)
      l.mlp = MoeMlp(w, p + "mlp.", c, options().expertsOnDevice);
    else
      l.mlp = GatedMlp(w, p + "mlp.", c.hiddenSize, c.intermediateSize, Activation::Silu);
    return l;
  }

  void run(const Layer& l, int64_t i, const Tensor& x, const Batch& batch) const {
    const Tensor h = ops::scratch(ops::Scratch::Normed, batch.rows, config().hiddenSize, x);
    const Tensor y = ops::scratch(ops::Scratch::Output, batch.rows, config().hiddenSize, x);
    l.inputNorm.apply(x, h);
    std::visit([&](const auto& mixer) { mixer.forward(h, batch, i, y); }, l.mixer);
    l.postAttentionNorm.addThenApply(x, y, h);
    std::visit([&](const auto& mlp) { mlp.forward(h, y); }, l.mlp);
    ops::addInPlace(x, y);
  }

  void layer(int64_t i, const Tensor& x, const Batch& batch) const override {
    run(layers_[static_cast<size_t>(i)], i, x, batch);
  }

  void keepHidden(const std::vector<Feed>& feeds, const Batch& batch, const Tensor& normed) const override {
    for (size_t f = 0; f < feeds.size(); ++f) {
      const Batch::Sequence& seq = batch.sequences[f];
      static_cast<HybridState&>(*seq.cache).keepRows(seq.start, feeds[f].tokens, rowsOf(normed, seq.first, seq.rows));
    }
  }

  /// The MTP layer over rows at positions start, start + 1, ...: each the token that follows and
  /// the hidden state before it; the normed outputs [rows, hidden].
  Tensor mtpPass(HybridState& state, const std::vector<int32_t>& tokens, const Tensor& hidden, int64_t start) const {
    const int64_t width = config().hiddenSize, rows = static_cast<int64_t>(tokens.size());
    // Each row: the normed embedding of its token, then its normed hidden state.
    const Tensor both = ops::emptyLike({rows, 2 * width}, hidden), x = ops::emptyLike({rows, width}, hidden);
    for (int64_t r = 0; r < rows; ++r) {
      const Tensor e = rowsOf(both, r, 1).slice(1, 0, width);
      embedding().row(tokens[static_cast<size_t>(r)], e);
      mtp_->embeddingNorm.apply(e, e);
      mtp_->hiddenNorm.apply(rowsOf(hidden, r, 1), rowsOf(both, r, 1).slice(1, width, 2 * width));
    }
    mtp_->fc.apply(both, x);
    Batch batch;
    batch.sequences.push_back({&state, 0, rows, start});
    batch.rows = rows;
    run(mtp_->layer, config().numLayers, x, batch);
    mtp_->norm.apply(x, x);
    return x;
  }

  /// The output rows a draft reads, an eighth of them: the lowest ids (byte-level BPE numbers
  /// tokens by merge order, so frequent ones come first) and the tokens read last.
  std::vector<int32_t> draftRows(std::span<const int32_t> recent) const {
    const int64_t vocab = config().vocabSize;
    std::set<int32_t> rows;
    for (int32_t id : recent)
      if (id >= 0 && id < vocab) rows.insert(id);
    for (int32_t id = 0; static_cast<int64_t>(rows.size()) < std::max<int64_t>(1, vocab / 8) && id < vocab; ++id)
      rows.insert(id);
    return {rows.begin(), rows.end()};
  }

  std::vector<Layer> layers_;
  std::optional<Mtp> mtp_;
};

}  // namespace

std::unique_ptr<LanguageModel> buildQwen35(const ConvertedModel& weights, const ModelOptions& options) {
  return std::make_unique<Qwen35>(weights, options);
}

}  // namespace gizml::llm
