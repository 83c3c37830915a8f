#pragma once
// What the engine's sampling reads of each feed's logit rows after a step. Rows in host memory,
// and rows whose request reads them whole, cross as they are: logprobs, topK 0 (topP over the
// whole row), choices that copy the leader's row, and penalties, a logit bias and a grammar's
// mask on host rows or with drafts (on a GPU row otherwise they are applied there first:
// StepPenalties, StepMasks). Of a row on a GPU whose request reads only its head,
// the head is found there and only it crosses: the argmax (netops::argmaxInto) for greedy, the
// candidates (netops::candidatesInto) merged into the topK highest for a draw. Either way the
// tokens are the row's own (sampling.h: candidates of a head are the row's to the bit).
#include <gizml/llm.h>
#include <gizml/tensor.h>

#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "llm/engine/grammar_constraint.h"
#include "llm/engine/sampling.h"
#include "llm/ops/gpu/model_ops_gpu.h"

namespace gizml::llm {

/// The tokens of a row a request's sampling reads: 0 for the whole row, 1 for greedy (the
/// argmax: its logit is not read), else its topK; `copied`: choices copy the row; `penalized`:
/// its penalties and logit bias are in the row already (StepPenalties); `masked`: so is its
/// grammar's mask, or the grammar does not constrain this token (StepMasks).
size_t headTokens(const Sampling& s, bool copied, bool penalized, bool masked);

/// Whether sampling changes a row before it reads it: penalties or a logit bias.
bool penalizes(const Sampling& s);
/// The tokens a request's penalties and logit bias touch, in token order, with what each does to
/// them: made from its prompt at its first step and kept from step to step, each step adding the
/// tokens drawn since (a long prompt's tokens were put in a map again at every step). Made again
/// where the tokens drawn are fewer than it has seen.
struct PenaltyTokens {
  struct Edit {
    bool seen = false;  // in the prompt or drawn: the repetition penalty applies
    int count = 0;      // times drawn: the presence and frequency penalties
    std::vector<float> bias;
  };
  std::map<TokenId, Edit> touched;
  size_t drawn = 0;  // tokens of `generated` counted so far
  bool made = false;
};
/// The penalties and logit biases of a step's rows on GPUs, applied there in place: the bits
/// applyPenalties and applyLogitBias give a row on the host, so that only its head need cross;
/// every row's together, one copy and one launch a GPU (a kernel over the tokens they touch).
class StepPenalties {
 public:
  /// A request's, on the last row of its logits (on a GPU). `kept`: the request's, from its last step.
  void add(const tensor::Tensor& logits, const Sampling& s, std::span<const TokenId> prompt,
           std::span<const TokenId> generated, PenaltyTokens& kept);
  /// Edits the rows added so far.
  void apply();

 private:
  std::vector<std::pair<tensor::Tensor, ops::gpu::LogitEdits>> onGpus_;  // a tensor on each GPU, its edits
};

/// The grammars' masks of a step's rows on GPUs: a row's logits that its grammar does not allow
/// become -inf there (and the end of the turn's 0 where it allows nothing else), the row that
/// GrammarConstraint::constrain leaves on the host, so that only its head need cross; every row's
/// together, one copy and one launch a GPU.
class StepMasks {
 public:
  /// The last row of `logits` (on a GPU) as `allowed` says (kept until apply).
  void add(const tensor::Tensor& logits, AllowedTokens allowed);
  void apply();

 private:
  std::deque<AllowedTokens> allowed_;  // the rows' masks, which onGpus_ points into (a deque: they stay put)
  std::vector<std::pair<tensor::Tensor, std::vector<ops::gpu::MaskedRow>>> onGpus_;  // a tensor on each GPU, its rows
};

/// One feed's rows as sampling reads them: whole (values, vocab each) or each row's head. The
/// values are the logits tensor's own where it is contiguous F32 on the host (sampling's
/// penalties and bias change them in place), else a copy held in `copy`.
struct ReadRows {
  ReadRows() = default;
  ReadRows(const ReadRows&) = delete;  // values may point into copy
  ReadRows(ReadRows&&) = default;      // copy's buffer moves with it
  ReadRows& operator=(const ReadRows&) = delete;
  ReadRows& operator=(ReadRows&&) = default;

  std::span<float> values;
  std::vector<float> copy;
  std::vector<RowHead> heads;
};

/// Reads the rows of each feed i that gives logits (logits[i] [rows, vocab]; want[i] = false
/// for the others, which are left empty) as heads[i] (headTokens) says: a head read on a GPU
/// that cannot be known exact from the candidates (topK past what they hold) reads the rows
/// whole instead. Feeds next to each other in one tensor share a launch.
std::vector<ReadRows> readRows(const std::vector<tensor::Tensor>& logits, const std::vector<bool>& want,
                               const std::vector<size_t>& heads);

}  // namespace gizml::llm
