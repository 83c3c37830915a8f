#pragma once
// Picking a token from one row of logits: penalties, then greedy or a draw from the distribution
// that temperature, topK, topP and minP leave. Pure functions of their inputs, so the tests can
// check each step against a reference of their own.
#include <gizml/llm.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace gizml::llm {

/// Throws gizml::Error naming the field when a Sampling is out of range.
void validateSampling(const Sampling& s);

/// Applies the presence, frequency and repetition penalties to logits in place.
void applyPenalties(std::span<float> logits, const Sampling& s, std::span<const TokenId> prompt,
                    std::span<const TokenId> generated);

/// Adds Sampling::logitBias to the logits (ids outside them are ignored: validate first).
void applyLogitBias(std::span<float> logits, const Sampling& s);

/// A row's head: its highest tokens with their logits, highest first (ties: the lower id first).
/// What sampling reads of a row that stays on a GPU (llm/engine/device_rows.h).
using RowHead = std::vector<std::pair<TokenId, float>>;
/// The `keep` highest tokens of a row (all of them when keep is its size).
RowHead headOf(std::span<const float> logits, size_t keep);

/// The distribution a draw picks from: (token, probability) pairs, most likely first, after
/// temperature, topK, topP and minP, renormalized. temperature must be > 0.
std::vector<std::pair<TokenId, double>> candidates(std::span<const float> logits, const Sampling& s);
/// The same from a row's head of at least topK tokens (topK 0: the whole row): the row's own
/// candidates, to the bit, since they depend only on its topK highest logits.
std::vector<std::pair<TokenId, double>> candidates(const RowHead& head, const Sampling& s);

/// The candidate that uniform u in [0, 1) falls on when the probabilities are laid end to end.
TokenId pick(const std::vector<std::pair<TokenId, double>>& candidates, double u);

/// The uniform in [0, 1) of a request's index-th token: Philox keyed by seed, counter index.
double drawUniform(uint64_t seed, uint64_t index);

/// The next token: argmax for temperature 0 (the lowest id among ties), else a draw with the
/// index-th uniform of the seed.
TokenId chooseToken(std::span<const float> logits, const Sampling& s, uint64_t index);
/// The same from a row's head (one token for temperature 0, else as candidates reads it).
TokenId chooseToken(const RowHead& head, const Sampling& s, uint64_t index);

/// The token at a position a draft guessed: chooseToken's distribution kept exactly with a
/// fixed guess (speculative sampling): greedy is the argmax; otherwise the draft with its
/// probability p, else a draw from the rest renormalized, from the index-th uniforms.
TokenId verifyDraft(std::span<const float> logits, const Sampling& s, uint64_t index, TokenId draft);
TokenId verifyDraft(const RowHead& head, const Sampling& s, uint64_t index, TokenId draft);

/// token's log-softmax value in logits and the top most likely (ties: lower id first).
TokenLogprob logprobOf(std::span<const float> logits, TokenId token, int top);

}  // namespace gizml::llm
