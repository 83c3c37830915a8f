#pragma once
// What every architecture here shares around its layers: the token embedding, the stack of
// layers over each sequence's KV cache, the final norm and the output layer, and the batching
// of feeds (their tokens are the rows of one pass). A family supplies its layers. Built with
// ModelOptions::layers, it holds only the first layers (config().numLayers says how many) and
// neither the final norm nor the output layer: it gives hidden() alone.
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "llm/language_model.h"
#include "llm/models/layers.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {

struct DecoderOptions {
  bool onePlusNorm = false;     // the final norm scales by (1 + w) (Gemma)
  float embedScale = 1.0f;      // embeddings times this (Gemma: sqrt(hidden))
  float logitSoftcap = 0.0f;    // logits = cap * tanh(logits / cap) when > 0
  bool recurrentLayers = false; // the family runs linear-attention layers (and makes its own states)
  bool keepHidden = false;      // every fed row's final (normed) hidden state goes to keepHidden()
};

class DecoderModel : public LanguageModel {
 public:
  const ModelConfig& config() const override { return config_; }
  std::unique_ptr<SequenceState> newState(int64_t maxTokens) const override;
  int64_t pageTokens() const override { return ops::KvPool::kPageTokens; }
  std::optional<KvFormat> kvFormat() const override { return options_.kvCache; }
  std::shared_ptr<StatePool> newPool(int64_t pages, const KvFormat& format, bool inHostMemory = false) const override;
  int64_t poolMemory() const override;
  std::unique_ptr<SequenceState> newStateIn(const std::shared_ptr<StatePool>& pool, int64_t maxTokens) const override;
  std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) override;
  tensor::Tensor hidden(const std::vector<int32_t>& tokens, const std::vector<int64_t>& layers,
                        int64_t keyEnd) const override;
  bool hasLogits() const override { return config_.numLayers == storedLayers_; }
  bool recordsSteps() const override {
    return options_.stepGraphs && placed_.size() == 1 && placed_.front().gpu().has_value();
  }

 protected:
  DecoderModel(const ConvertedModel& weights, const ModelOptions& options, const DecoderOptions& decoder);
  /// Layer i over the rows x [rows, hidden], in place.
  virtual void layer(int64_t i, const Tensor& x, const Batch& batch) const = 0;
  /// A state of up to maxTokens tokens with its keys and values in `pool` (a family with more
  /// state than a KV cache makes its own kind).
  virtual std::unique_ptr<SequenceState> makeState(std::shared_ptr<ops::KvPool> pool, int64_t maxTokens) const;
  /// With DecoderOptions::keepHidden: the final norm's rows [batch.rows, hidden] of a pass.
  virtual void keepHidden(const std::vector<Feed>& feeds, const Batch& batch, const Tensor& normed) const;
  const Linear& embedding() const { return embed_; }
  const Linear& outputLayer() const { return head_; }
  const ConvertedModel& weights() const { return weights_; }
  /// The weights placed where layer i runs (its stage's GPU; i >= the layers: the MTP layers',
  /// on the last stage).
  const ConvertedModel& layerWeights(int64_t i) const;
  const ModelOptions& options() const { return options_; }
  /// The attention shape of layer i (its sliding window, when it has one).
  AttentionShape attentionShape(int64_t i, float scale) const;
  std::string layerPrefix(int64_t i) const { return "model.layers." + std::to_string(i) + "."; }

 private:
  Batch plan(const std::vector<Feed>& feeds) const;
  /// A feed's pictures as plan needs them: grids, rows of the model's width, in order within the
  /// feed; an Error naming the feed and the picture otherwise.
  void checkPictures(const Feed& feed, const std::string& where) const;
  /// Pairs each head's RoPE turns.
  int64_t ropePairs() const;
  /// apply(x's rows of each picture in the feeds, those of rowsOfPicture's rows that the feed
  /// holds, moved to `gpu` when set); pictures whose rowsOfPicture has no axes are left out.
  void forPictureRows(const std::vector<Feed>& feeds, const Batch& batch, const Tensor& x,
                      const std::optional<gizhw::gpu::Gpu>& gpu,
                      const std::function<Tensor(const Picture&)>& rowsOfPicture,
                      const std::function<void(const Tensor&, const Tensor&)>& apply) const;
  /// The feeds' token embeddings into x [rows, hidden] (scaled by embedScale, on the first
  /// stage's device), then every layer, x crossing to each stage's device in turn; the rows after
  /// the last layer (x itself with one stage). after, when set, sees x after the embedding (0)
  /// and after each layer (1, 2, ...).
  Tensor runLayers(const std::vector<Feed>& feeds, const Batch& batch, Tensor x,
                   const std::function<void(int64_t, const Tensor&)>& after = {}) const;
  size_t stageOf(int64_t layer) const;
  /// The recording of a decode step of this batch (a token and its logits a feed, no pictures)
  /// where the model is on one GPU and records steps; null otherwise. Its sequences' pages are
  /// taken and their page tables on the GPU made current first, so that the step itself does
  /// the same work each time.
  gizhw::gpu::StepGraph* decodeGraph(const std::vector<Feed>& feeds, const Batch& batch);

  ConvertedModel weights_;
  // Per stage (one where the model is in one place): the weights placed on its GPU, and the end
  // of its layers (stage s holds layers ends_[s - 1] .. ends_[s] - 1).
  std::vector<ConvertedModel> placed_;
  std::vector<int64_t> ends_;
  ModelConfig config_;
  int64_t storedLayers_ = 0;  // the layers of the converted model, config_.numLayers or more
  ModelOptions options_;
  DecoderOptions decoder_;
  Linear embed_, head_;  // head_ and norm_ only with every layer
  RmsNorm norm_;
  std::map<size_t, gizhw::gpu::StepGraph> decodeGraphs_;  // by the step's feeds
};

}  // namespace gizml::llm
