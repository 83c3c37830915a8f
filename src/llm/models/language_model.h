#pragma once
// The contract between an architecture (src/llm/models/) and the engine (src/llm/engine/): a
// model keeps per-sequence state (its KV cache and, for recurrent layers, their states) and
// runs forward passes that feed several sequences at once.
#include <gizml/tensor.h>

#include <cstdint>
#include <memory>
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
  /// Forgets every token from position n on (n <= length()).
  virtual void truncate(int64_t n) = 0;
};

/// One sequence's part of a forward pass: tokens appended after what its state holds.
struct Feed {
  SequenceState* state = nullptr;
  std::vector<int32_t> tokens;
  bool allLogits = false;  // logits of every fed token, not only the last
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  virtual const ModelConfig& config() const = 0;
  /// A new empty state for a sequence of up to maxTokens tokens.
  virtual std::unique_ptr<SequenceState> newState(int64_t maxTokens) const = 0;
  /// Runs one forward pass over every feed (their tokens together, so one pass serves all),
  /// appends the tokens to their states, and returns per feed the F32 logits [rows, vocab]: one
  /// row (the last token), or one per fed token when allLogits.
  virtual std::vector<tensor::Tensor> forward(const std::vector<Feed>& feeds) = 0;
};

/// How a model runs; the defaults are those of buildLanguageModel(weights).
struct ModelOptions {
  DType kvCache = DType::F32;  // keys and values in F32, F16 or BF16
};

/// The model of a converted folder's architecture (llama, mistral, qwen2, qwen3, qwen3_vl text,
/// gemma3 text), reading its weights from `weights` (the model keeps a copy, so the mapping stays
/// open); throws gizml::Error naming a missing tensor or a wrong shape.
std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights);
std::unique_ptr<LanguageModel> buildLanguageModel(const ConvertedModel& weights, const ModelOptions& options);

}  // namespace gizml::llm
