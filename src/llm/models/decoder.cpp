#include "llm/models/decoder.h"

#include <gizml/error.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>

#include "llm/ops/host.h"
#include "llm/ops/weights.h"


namespace gizml::llm {
namespace {

// The config of the layers built: the first options.layers (without the MTP layer, which reads
// the last layer's output) when they are fewer than the model's.
ModelConfig loadedConfig(const ConvertedModel& weights, const ModelOptions& options) {
  ModelConfig c = weights.config();
  check(options.layers >= 0 && options.layers <= c.numLayers,
        weights.folder() + ": layers " + std::to_string(options.layers) + " is not between 1 and the model's " +
            std::to_string(c.numLayers) + " (0: all)");
  check(options.stages.empty() || (options.layers == 0 && !options.gpu),
        weights.folder() + ": a model in stages across GPUs holds every layer and places them by its stages alone");
  if (options.layers == 0 || options.layers == c.numLayers) return c;
  c.numLayers = options.layers;
  c.layerTypes.resize(static_cast<size_t>(c.numLayers));
  c.mtpLayers = 0;
  return c;
}

// Logits up to this size keep their host memory from one pass to the next (a decode step's and
// a batch's; not a long prompt's every-row logits, which would stay resident after it).
constexpr size_t kKeptLogitsBytes = 16 << 20;

// The F32 logits [rows, vocab] of a pass where `placed` runs. In host memory, one of the calling
// thread's two last passes' memory that nobody holds any more (a caller reads a pass's logits
// until the next pass returns): a fresh block of a few hundred KiB a pass was mapped anew by
// malloc and faulted in a page at a time (SmolLM2's 196 KB: 27 page faults and about 2 % of a
// decode step). Written whole before it is read.
tensor::Tensor logitsMemory(const ConvertedModel& placed, int64_t rows, int64_t vocab) {
  const auto bytes = static_cast<size_t>(rows * vocab) * sizeof(float);
  if (placed.gpu() || bytes > kKeptLogitsBytes) return placedEmpty(placed, {rows, vocab});
  thread_local std::array<std::shared_ptr<tensor::Storage>, 2> kept;
  const auto unheld = [](const std::shared_ptr<tensor::Storage>& s) { return !s || s.use_count() == 1; };
  auto it = std::find_if(kept.begin(), kept.end(), [&](const auto& s) { return s && unheld(s) && s->bytes() >= bytes; });
  if (it == kept.end()) it = std::find_if(kept.begin(), kept.end(), unheld);
  if (it == kept.end()) return placedEmpty(placed, {rows, vocab});
  if (!*it || (*it)->bytes() < bytes) *it = std::make_shared<tensor::Storage>(bytes);
  return tensor::Tensor(*it, DType::F32, {rows, vocab}, {vocab, 1}, 0);
}

// How much further the positions after a picture run than its tokens: its rows take max(h, w).
int64_t shiftOf(const Picture& p) { return std::max(p.h, p.w) - p.t * p.h * p.w; }

// Where a feed's rows are for multimodal RoPE (transformers' get_rope_index): text rows count on
// from the state's shifted position; a picture's rows lay out its t x h x w grid from the
// position its first token would have as text, and the text after it counts on from max(h, w)
// past that. `shift` is the state's, and becomes what the last picture ending in the feed leaves.
std::vector<std::array<int64_t, 3>> feedPositions(const Feed& feed, int64_t start, int64_t& shift) {
  const auto n = static_cast<int64_t>(feed.tokens.size());
  std::vector<std::array<int64_t, 3>> out;
  const auto text = [&](int64_t end) {
    for (auto r = static_cast<int64_t>(out.size()); r < end; ++r) out.push_back({start + r + shift, start + r + shift, start + r + shift});
  };
  for (const Picture& p : feed.pictures) {
    text(std::max<int64_t>(0, p.first));
    const int64_t origin = start + p.first + shift, rows = p.t * p.h * p.w;
    for (auto r = static_cast<int64_t>(out.size()); r < std::min(n, p.first + rows); ++r) {
      const int64_t i = r - p.first;
      out.push_back({origin + i / (p.h * p.w), origin + i / p.w % p.h, origin + i % p.w});
    }
    if (p.first + rows <= n) shift += shiftOf(p);
  }
  text(n);
  return out;
}

}  // namespace

DecoderModel::DecoderModel(const ConvertedModel& weights, const ModelOptions& options, const DecoderOptions& decoder)
    : weights_(weights), config_(loadedConfig(weights, options)), storedLayers_(weights.config().numLayers),
      options_(options), decoder_(decoder) {
  const ModelConfig& c = config_;
  const std::string where = weights.folder() + ": ";
  if (options_.stages.empty()) {
    placed_ = {weights};
    ends_ = {c.numLayers};
  } else {
    for (const Stage& stage : options_.stages) {
      check(stage.layers > 0, where + "a stage on " + stage.gpu.describe() + " of " + std::to_string(stage.layers) +
                                  " layers: each stage holds at least one");
      for (const ConvertedModel& other : placed_)
        check(other.gpu()->device() != stage.gpu.device(), where + stage.gpu.describe() + " holds two stages");
      placed_.push_back(weights.placedOn(stage.gpu));
      ends_.push_back((ends_.empty() ? 0 : ends_.back()) + stage.layers);
    }
    check(ends_.back() == c.numLayers, where + "the stages hold " + std::to_string(ends_.back()) +
                                           " layers, the model has " + std::to_string(c.numLayers));
  }
  check(c.vocabSize > 0 && c.hiddenSize > 0 && c.numLayers > 0 && c.numHeads > 0 && c.numKvHeads > 0 && c.headDim > 0,
        where + "sizes must be positive");
  check(c.numHeads % c.numKvHeads == 0, where + "num_kv_heads must divide num_heads");
  check(static_cast<int64_t>(weights.config().layerTypes.size()) == storedLayers_,
        where + "one layer type per layer expected");
  for (LayerType t : c.layerTypes)
    check(decoder.recurrentLayers || t != LayerType::LinearAttention,
          where + "linear attention layers are not supported by this model");
  embed_ = Linear(placed_.front(), "model.embed_tokens.weight", c.vocabSize, c.hiddenSize, "", Linear::Use::Rows);
  if (!hasLogits()) {
    decoder_.keepHidden = false;  // (for the MTP layer, which is not built)
    return;
  }
  // A tied output layer is the embedding (convert stores it once, at the head's width).
  const bool tied = c.tieWordEmbeddings && !weights.has("lm_head.weight");
  head_ = Linear(placed_.back(), tied ? "model.embed_tokens.weight" : "lm_head.weight", c.vocabSize, c.hiddenSize);
  norm_ = RmsNorm(placed_.back(), "model.norm.weight", c.hiddenSize, c.rmsNormEps, decoder.onePlusNorm);
}

gizhw::gpu::StepGraph* DecoderModel::decodeGraph(const std::vector<Feed>& feeds, const Batch& batch) {
  if (!recordsSteps()) return nullptr;
  for (const Feed& feed : feeds)
    // (A mark keeps a copy of the recurrent states, which must outlive the step.)
    if (feed.tokens.size() != 1 || !feed.pictures.empty() || !feed.logits || !feed.marks.empty()) return nullptr;
  for (const Batch::Sequence& seq : batch.sequences) {
    seq.cache->makeWritable(seq.start, seq.rows);
    for (int64_t layer = 0; layer < config_.numLayers; ++layer)
      if (seq.cache->holds(layer)) {
        seq.cache->deviceTable(layer);  // one table a GPU: the first attending layer's
        break;
      }
  }
  return &decodeGraphs_.try_emplace(feeds.size(), *placed_.front().gpu()).first->second;
}

size_t DecoderModel::stageOf(int64_t layer) const {
  return static_cast<size_t>(std::upper_bound(ends_.begin(), ends_.end() - 1, layer) - ends_.begin());
}

const ConvertedModel& DecoderModel::layerWeights(int64_t i) const { return placed_[stageOf(i)]; }

void DecoderModel::keepHidden(const std::vector<Feed>&, const Batch&, const Tensor&) const {}

AttentionShape DecoderModel::attentionShape(int64_t i, float scale) const {
  const ModelConfig& c = config_;
  const bool sliding = c.layerTypes[static_cast<size_t>(i)] == LayerType::SlidingAttention;
  return {c.hiddenSize, c.numHeads, c.numKvHeads, c.headDim, scale, sliding ? c.slidingWindow : 0};
}

std::shared_ptr<StatePool> DecoderModel::newPool(int64_t pages, const KvFormat& format, bool inHostMemory) const {
  // The layers that attend keep keys: not the linear-attention ones; the MTP layers after them do.
  std::vector<bool> attends;
  for (LayerType t : config_.layerTypes) attends.push_back(t != LayerType::LinearAttention);
  attends.resize(static_cast<size_t>(config_.numLayers + config_.mtpLayers), true);
  std::vector<std::optional<gizhw::gpu::Gpu>> places;
  for (size_t i = 0; i < attends.size(); ++i)
    places.push_back(inHostMemory ? std::nullopt : layerWeights(static_cast<int64_t>(i)).gpu());
  return std::make_shared<ops::KvPool>(this, attends, config_.numKvHeads, config_.headDim, format, pages,
                                       std::move(places));
}

int64_t DecoderModel::poolMemory() const {
  if (!placed_.front().gpu()) return LanguageModel::poolMemory();
  // A pool's pages span the layers that attend, each stage's on its GPU: the pool fits where each
  // stage's share of it fits that GPU's free memory.
  std::vector<int64_t> attending(placed_.size(), 0);
  int64_t total = 0;
  for (int64_t i = 0; i < config_.numLayers + config_.mtpLayers; ++i)
    if (i >= config_.numLayers || config_.layerTypes[static_cast<size_t>(i)] != LayerType::LinearAttention) {
      ++attending[stageOf(i)];
      ++total;
    }
  int64_t least = std::numeric_limits<int64_t>::max();
  for (size_t s = 0; s < placed_.size(); ++s)
    if (attending[s] > 0)
      least = std::min(least, static_cast<int64_t>(placed_[s].gpu()->freeBytes()) / attending[s] * total);
  // A tenth kept for the steps' activations, attention's partial sums, logits and recordings (as
  // vLLM's gpu_memory_utilization of 0.9).
  return least / 10 * 9;
}

std::unique_ptr<SequenceState> DecoderModel::newState(int64_t maxTokens) const {
  check(maxTokens > 0, "newState: capacity must be positive, not " + std::to_string(maxTokens));
  const int64_t pages = (maxTokens + pageTokens() - 1) / pageTokens();
  const DType elements = placed_.front().gpu() ? DType::F16 : DType::F32;
  return newStateIn(newPool(pages, options_.kvCache.value_or(KvFormat(elements))), maxTokens);
}

std::unique_ptr<SequenceState> DecoderModel::newStateIn(const std::shared_ptr<StatePool>& pool, int64_t maxTokens) const {
  auto kv = std::dynamic_pointer_cast<ops::KvPool>(pool);
  check(kv != nullptr && kv->owner() == this, "newState: the pool was not made by this model");
  return makeState(std::move(kv), maxTokens);
}

std::unique_ptr<SequenceState> DecoderModel::makeState(std::shared_ptr<ops::KvPool> pool, int64_t maxTokens) const {
  return std::make_unique<KvCache>(std::move(pool), maxTokens);
}

Batch DecoderModel::plan(const std::vector<Feed>& feeds) const {
  Batch batch;
  std::set<const SequenceState*> seen;
  for (size_t f = 0; f < feeds.size(); ++f) {
    const Feed& feed = feeds[f];
    // The messages are built only when a check fails: this runs on every step, and on every token
    // of a prompt.
    const auto where = [f] { return "forward: feed " + std::to_string(f) + ": "; };
    auto* cache = dynamic_cast<KvCache*>(feed.state);
    ops::require(cache != nullptr && cache->owner() == this, [&] { return where() + "its state was not made by this model"; });
    ops::require(seen.insert(cache).second, [&] { return where() + "its state is fed twice in one pass"; });
    const auto n = static_cast<int64_t>(feed.tokens.size());
    ops::require(n > 0, [&] { return where() + "no tokens"; });
    ops::require(cache->length() + n <= cache->capacity(), [&] {
      return where() + std::to_string(n) + " tokens after " + std::to_string(cache->length()) +
             " exceed the state's capacity of " + std::to_string(cache->capacity());
    });
    for (int32_t t : feed.tokens)
      ops::require(t >= 0 && t < config_.vocabSize, [&] {
        return where() + "token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(config_.vocabSize);
      });
    int64_t previous = cache->length();
    for (int64_t mark : feed.marks) {
      ops::require(mark > previous && mark <= cache->length() + n, [&] {
        return where() + "mark " + std::to_string(mark) + " is not within the fed tokens, after " + std::to_string(previous);
      });
      previous = mark;
    }
    batch.sequences.push_back({cache, batch.rows, n, cache->length(), feed.marks});
    if (!feed.pictures.empty()) {
      checkPictures(feed, where());
      int64_t shift = cache->positionShift();
      batch.sequences.back().ropePositions =
          multimodalRopePositions(config_, ropePairs(), feedPositions(feed, cache->length(), shift));
    }
    batch.rows += n;
  }
  return batch;
}

int64_t DecoderModel::ropePairs() const {
  return static_cast<int64_t>(static_cast<double>(config_.headDim) * config_.partialRotaryFactor) / 2;
}

void DecoderModel::checkPictures(const Feed& feed, const std::string& where) const {
  const auto n = static_cast<int64_t>(feed.tokens.size());
  int64_t end = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < feed.pictures.size(); ++i) {
    const Picture& p = feed.pictures[i];
    const std::string what = where + "picture " + std::to_string(i) + ": ";
    checkPicture(p, config_, what);
    const int64_t rows = p.t * p.h * p.w;
    check(p.first < n && p.first + rows > 0 && p.first >= end,
          what + "its rows from token " + std::to_string(p.first) + " do not fall in the feed's " + std::to_string(n) +
              " tokens after the pictures before it");
    end = p.first + rows;
  }
}

Tensor DecoderModel::runLayers(const std::vector<Feed>& feeds, const Batch& batch, Tensor x,
                               const std::function<void(int64_t, const Tensor&)>& after) const {
  ops::beginPass();
  // The embedding's rows are read from the file, in host memory, then go where x is.
  std::vector<int32_t> tokens;
  for (const Feed& feed : feeds) tokens.insert(tokens.end(), feed.tokens.begin(), feed.tokens.end());
  embed_.rows(tokens, x);
  if (decoder_.embedScale != 1.0f) ops::scaleInPlace(x, decoder_.embedScale);
  // Pictures' rows in place of their placeholder tokens' embeddings.
  forPictureRows(feeds, batch, x, placed_.front().gpu(), [](const Picture& p) { return p.rows; },
                 [](const Tensor& at, const Tensor& rows) { tensor::assign(at, rows); });
  if (after) after(0, x);
  for (int64_t i = 0; i < config_.numLayers; ++i) {
    // The next stage's first layer: the rows cross to its GPU (through host memory, which every
    // pair of GPUs can reach; a step moves rows x hidden floats, small beside its weights).
    if (i > 0 && stageOf(i) != stageOf(i - 1)) x = x.on(*layerWeights(i).gpu());
    layer(i, x, batch);
    // Qwen3-VL's deepstack: the pictures' rows of the tower's earlier blocks added after layer i.
    forPictureRows(feeds, batch, x, layerWeights(i).gpu(),
                   [i](const Picture& p) { return i < static_cast<int64_t>(p.deepstack.size()) ? p.deepstack[i] : Tensor(); },
                   [](const Tensor& at, const Tensor& rows) { ops::addInPlace(at, rows); });
    if (after) after(i + 1, x);
  }
  return x;
}

void DecoderModel::forPictureRows(const std::vector<Feed>& feeds, const Batch& batch, const Tensor& x,
                                  const std::optional<gizhw::gpu::Gpu>& gpu,
                                  const std::function<Tensor(const Picture&)>& rowsOfPicture,
                                  const std::function<void(const Tensor&, const Tensor&)>& apply) const {
  for (size_t f = 0; f < feeds.size(); ++f)
    for (const Picture& p : feeds[f].pictures) {
      const Tensor all = rowsOfPicture(p);
      if (all.ndim() == 0) continue;
      const int64_t first = std::max<int64_t>(0, p.first), end = std::min(batch.sequences[f].rows, p.first + all.size(0));
      const Tensor rows = all.slice(0, first - p.first, end - p.first);
      const Tensor at = rowsOf(x, batch.sequences[f].first + first, end - first);
      apply(at, gpu ? rows.contiguous().on(*gpu) : rows.contiguous());
    }
}

tensor::Tensor DecoderModel::hidden(const std::vector<int32_t>& tokens, const std::vector<int64_t>& layers,
                                   int64_t keyEnd) const {
  check(placed_.size() == 1, "hidden: a model in stages across GPUs gives logits only, not its hidden states");
  check(!tokens.empty(), "hidden: no tokens");
  check(!layers.empty(), "hidden: no layers asked for");
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t l : layers)
    check(l >= 0 && l <= config_.numLayers, "hidden: layer " + std::to_string(l) +
                                                " is not between 0 (the embeddings) and the " +
                                                std::to_string(config_.numLayers) + " layers the model holds");
  check(keyEnd >= 0 && keyEnd <= n, "hidden: attended " + std::to_string(keyEnd) + " is not between 1 and the " +
                                        std::to_string(n) + " tokens (0: all)");
  // Padding masked as keys: the layers must attend every key before it (no window, no recurrence).
  if (keyEnd > 0 && keyEnd < n)
    for (LayerType t : config_.layerTypes)
      check(t == LayerType::FullAttention, "hidden: padding (attended tokens) needs a model whose every layer "
                                           "attends all keys; this one has sliding-window or linear-attention layers");
  const std::unique_ptr<SequenceState> state = newState(n);
  const std::vector<Feed> feeds = {{state.get(), tokens}};
  Batch batch = plan(feeds);
  batch.sequences[0].keyEnd = keyEnd == n ? 0 : keyEnd;
  std::vector<Tensor> states(layers.size());
  runLayers(feeds, batch, placedEmpty(placed_.front(), {n, config_.hiddenSize}), [&](int64_t done, const Tensor& x) {
    for (size_t k = 0; k < layers.size(); ++k)
      if (layers[k] == done) states[k] = x.clone();  // x goes on in place
  });
  return states.size() == 1 ? states[0] : tensor::concat(states, 1);
}

std::vector<tensor::Tensor> DecoderModel::forward(const std::vector<Feed>& feeds) {
  ops::require(hasLogits(), [&] {
    return "forward: the model holds only its first " + std::to_string(config_.numLayers) + " of " +
           std::to_string(storedLayers_) + " layers; it gives hidden states, not logits";
  });
  const Batch batch = plan(feeds);
  const int64_t hidden = config_.hiddenSize, vocab = config_.vocabSize;
  // Only the rows whose logits are asked for go through the norm and the output layer (all of
  // them when the family keeps every row's hidden state).
  const auto logitRows = [&](size_t f) {
    return !feeds[f].logits ? 0 : feeds[f].allLogits ? batch.sequences[f].rows : 1;
  };
  std::vector<int64_t> selected;  // the rows of x that give logits
  for (size_t f = 0; f < feeds.size(); ++f) {
    const Batch::Sequence& seq = batch.sequences[f];
    for (int64_t r = seq.rows - logitRows(f); r < seq.rows; ++r) selected.push_back(seq.first + r);
  }
  Tensor logits;
  const auto pass = [&] {
    const Tensor x = runLayers(feeds, batch, placedEmpty(placed_.front(), {batch.rows, hidden}));
    if (decoder_.keepHidden) {
      norm_.apply(x, x);
      keepHidden(feeds, batch, x);
    }
    logits = logitsMemory(placed_.back(), static_cast<int64_t>(selected.size()), vocab);
    if (!selected.empty()) {
      const Tensor h = ops::gatherRows(x, selected);
      if (!decoder_.keepHidden) norm_.apply(h, h);
      head_.apply(h, logits);
      if (const float cap = decoder_.logitSoftcap; cap > 0) ops::softcap(logits, cap);
    }
  };
  if (gizhw::gpu::StepGraph* graph = decodeGraph(feeds, batch))
    graph->run(pass);
  else
    pass();

  // Each feed's rows of the logits (views, on the model's device).
  std::vector<tensor::Tensor> out;
  int64_t at = 0;
  for (size_t f = 0; f < feeds.size(); ++f) {
    const Batch::Sequence& seq = batch.sequences[f];
    const int64_t rows = logitRows(f);
    out.push_back(rowsOf(logits, at, rows));
    at += rows;
    seq.cache->setLength(seq.start + seq.rows);
    // Positions after the pictures that ended in the feed run on from theirs.
    int64_t shift = seq.cache->positionShift(), end = -1;
    for (const Picture& p : feeds[f].pictures) {
      if (p.first >= 0) seq.cache->pictureStarted(seq.start + p.first);
      if (p.first + p.rows.size(0) <= seq.rows) {
        shift += shiftOf(p);
        end = seq.start + p.first + p.rows.size(0);
      }
    }
    if (end >= 0) seq.cache->pictureEnded(end, shift);
  }
  return out;
}

}  // namespace gizml::llm
