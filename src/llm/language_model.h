#pragma once
// The contract between an architecture (src/llm/models/) and the engine (src/llm/engine/): a
// model keeps per-sequence state (its KV cache and, for recurrent layers, their states) and
// runs forward passes that feed several sequences at once.
#include <gizhw/gpu.h>
#include <gizml/kv_format.h>
#include <gizml/llm.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "llm/model_config.h"

namespace gizml::llm {

class ConvertedModel;

/// What one sequence has read so far: its KV cache (and recurrent states, where the model has
/// them). Made by the model; the engine owns it.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  /// Tokens held (the next token's position).
  virtual int64_t length() const = 0;
  /// The most tokens it can hold.
  virtual int64_t capacity() const = 0;
  /// Forgets every token from position n on (n <= length(), n one that reusable() gives).
  virtual void truncate(int64_t n) = 0;
  /// The longest prefix of at most n held tokens that truncate can keep: n for a KV cache,
  /// fewer where recurrent states hold only the state after their last token.
  virtual int64_t reusable(int64_t n) const { return n; }
  /// Forgets the states kept at marks past `length` (those kept to verify drafts).
  virtual void forgetKept(int64_t length) { (void)length; }
  /// Becomes a copy of `other` (a state of the same model and capacity): what it holds, as it
  /// holds it, so both continue alike. false, and no change, where the state cannot copy one.
  virtual bool copyFrom(const SequenceState& other) { (void)other; return false; }
  /// Bytes of memory it holds (its pages, its recurrent states).
  virtual int64_t memoryBytes() const { return 0; }
  /// Pool pages that appending `tokens` positions takes: pages past its table, and a copy of each
  /// page there that it shares with another state (0 where it keeps memory of its own).
  virtual int64_t pagesToAppend(int64_t tokens) const { (void)tokens; return 0; }
};

/// Memory that the states of an engine's sequences share (LanguageModel::newPool): pages of
/// pageTokens() positions, taken as sequences grow and given back as they shrink.
class StatePool {
 public:
  virtual ~StatePool() = default;
  virtual int64_t pageTokens() const = 0;
  virtual int64_t pages() const = 0;
  virtual int64_t freePages() const = 0;
  /// Bytes of its memory (mapped as the pool is made, backed as pages are first written).
  virtual int64_t bytes() const = 0;
  /// How it keeps keys and values.
  virtual KvFormat format() const = 0;
};

/// One sequence's part of a forward pass: tokens appended after what its state holds.
struct Feed {
  SequenceState* state = nullptr;
  std::vector<int32_t> tokens;
  bool allLogits = false;  // logits of every fed token, not only the last
  /// Sequence lengths within this feed (ascending) at which recurrent states are kept, so that
  /// truncate can return to them (Request::marks).
  std::vector<int64_t> marks = {};
  /// false: the caller reads no logits of it (a part of a prompt: no token follows it yet), so
  /// the model may skip its rows in the output layer and give [0, vocab].
  bool logits = true;
  /// Pictures whose rows stand for some of the tokens (ascending, apart), `first` counted from
  /// the feed's first token. A picture cut across feeds (a long prompt's parts) is given to each
  /// with its rows whole: `first` is negative in a feed after its start, and its rows may run
  /// past the feed's end.
  std::vector<Picture> pictures = {};
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelConfig& config() const = 0;
  /// A new empty state for a sequence of up to maxTokens tokens, with memory of its own.
  virtual std::unique_ptr<SequenceState> newState(int64_t maxTokens) const = 0;
  /// Positions per page of its pools; 0 where its states keep no pages (each owns its memory).
  virtual int64_t pageTokens() const { return 0; }
  /// How its pools keep keys and values: the one it was built with, or nullopt where each
  /// engine chooses (ModelOptions::kvCache).
  virtual std::optional<KvFormat> kvFormat() const { return std::nullopt; }
  /// A pool of `pages` pages for states made by newStateIn, keeping keys and values as `format`
  /// says (only where pageTokens() > 0), where the model runs or, with inHostMemory, in host
  /// memory whatever the device (where an engine parks a slot's start).
  virtual std::shared_ptr<StatePool> newPool(int64_t pages, const KvFormat& format, bool inHostMemory = false) const {
    (void)pages, (void)format, (void)inHostMemory;
    return nullptr;
  }
  /// Bytes free where newPool puts its pages, which an engine's choice of KvFormat fits its pool
  /// in: the machine's available memory, or on GPUs their free memory.
  virtual int64_t poolMemory() const;
  /// A new empty state whose keys and values take pages of `pool` (one of newPool's): its pages
  /// are shared with the states it is copied to (copyFrom), and copied only where one writes.
  virtual std::unique_ptr<SequenceState> newStateIn(const std::shared_ptr<StatePool>& pool, int64_t maxTokens) const {
    (void)pool;
    return newState(maxTokens);
  }
  /// Runs one forward pass over every feed (their tokens together, so one pass serves all),
  /// appends the tokens to their states, and returns per feed the F32 logits [rows, vocab]: one
  /// row (the last token), one per fed token when allLogits, or none where
  /// not Feed::logits and the model skips them.
  virtual std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) = 0;
  /// The residual stream at every one of `tokens`, read from a fresh state in one pass, after
  /// each of `layers` (transformers' hidden_states indices: 0 the embeddings, N after the first N
  /// layers, no final norm) side by side: F32 [tokens, layers.size() hidden] where the model runs.
  /// keyEnd > 0: no token attends the tokens from keyEnd on (padding: transformers'
  /// attention_mask of keyEnd ones, then zeros).
  virtual tensor::Tensor hidden(const std::vector<int32_t>& tokens, const std::vector<int64_t>& layers,
                                int64_t keyEnd) const;
  /// Whether the model has its output layer, so forward gives logits (not when only the first
  /// layers were loaded).
  virtual bool hasLogits() const { return true; }
  /// Whether a decode step of each batch size is recorded on its second run and replayed after
  /// (ModelOptions::stepGraphs, a model on one GPU): Engine::warm then runs each size twice.
  virtual bool recordsSteps() const { return false; }

  /// Whether draft() guesses tokens ahead (the model's multi-token prediction layers).
  virtual bool drafts() const { return false; }
  /// Up to `count` tokens that likely follow `next`, the token after what `state` holds: greedy
  /// guesses that read only part of the output layer (frequent tokens and `recent`, the tokens
  /// the sequence read last). The caller verifies them in one forward pass.
  virtual std::vector<int32_t> draft(SequenceState& state, int32_t next, int64_t count,
                                     std::span<const int32_t> recent) {
    (void)state, (void)next, (void)count, (void)recent;
    return {};
  }
};

/// One stage of a model in stages across GPUs: `layers` consecutive layers on `gpu`.
struct Stage {
  gizhw::gpu::Gpu gpu;
  int64_t layers;
};

/// How a model runs; the defaults are those of buildLanguageModel(weights).
struct ModelOptions {
  /// How keys and values are kept; nullopt: each engine chooses (Engine), states made with
  /// newState keep F32 (F16 on a GPU).
  std::optional<KvFormat> kvCache = KvFormat(DType::F32);
  /// Only the first `layers` layers are built (their weights alone are read), without the final
  /// norm, the output layer and the MTP layer: such a model gives hidden() but no logits.
  /// 0: all layers, a whole model.
  int64_t layers = 0;
  /// Where the layers run: this GPU (the model's weights, KV pages and activations there), or the
  /// CPU (nullopt). Every architecture's operations have GPU implementations (llm/ops/gpu/).
  std::optional<gizhw::gpu::Gpu> gpu = std::nullopt;
  /// The model in stages across GPUs (gpu unset, every layer): stage s holds the next
  /// stages[s].layers layers on its GPU, with their KV pages and recurrent states, and the last
  /// the final norm, the output layer and the MTP layer. A pass runs the stages in turn, its rows
  /// crossing from each GPU to the next. Such a model gives logits only. Empty: one place, gpu's.
  std::vector<Stage> stages = {};
  /// On one GPU: each decode step's batch size is recorded once as a graph and replayed
  /// (gizhw::gpu::StepGraph: every later step of that size checks its work against the recording
  /// and launches it once). false: every step queues its kernels one by one.
  bool stepGraphs = true;
  /// A MoE model on a GPU chooses each row's experts on the device and reads nothing back
  /// (ops::DeviceExperts), so its decode steps can be recorded too. false: the routes (chosen by
  /// the same kernel) are read back and a loop over the experts runs each on its rows, as on the
  /// CPU: the same bits, a launch of each layer per expert.
  bool expertsOnDevice = true;
};

/// The model of a converted folder's architecture (llama, mistral, qwen2, qwen3, qwen3_vl text,
/// gemma3 text, qwen3_5 text and its MoE), reading its weights from `weights` (the model keeps a copy, so the mapping stays
/// open); throws gizml::Error naming a missing tensor or a wrong shape.
std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights);
std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights, const ModelOptions& options);
/// Layer counts for GPUs of these free bytes, in proportion to them (largest remainders), summing
/// to `layers`; an Error when none has free memory.
std::vector<int64_t> stageCounts(int64_t layers, const std::vector<uint64_t>& freeBytes);
/// The bytes of a converted model's stored tensors (what a GPU's copy of its layers is bounded by).
uint64_t weightBytes(const ConvertedModel& weights);

/// A picture's grid, rows and deepstack rows as a model of this config reads them: each side
/// 1 .. 2^20 and at most 2^24 rows (bounds before any product, so outside values cannot
/// overflow), rows F32 [t h w, hidden], at most one deepstack tensor a layer, each of the rows'
/// shape; an Error starting with `what` otherwise. Where the rows go is the caller's to check.
void checkPicture(const Picture& p, const ModelConfig& config, const std::string& what);

}  // namespace gizml::llm
