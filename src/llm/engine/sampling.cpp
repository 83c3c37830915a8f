#include "llm/engine/sampling.h"

#include <gizml/error.h>
#include <gizml/tensor.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

namespace gizml::llm {

Sampling greedy() { return {}; }

Sampling sample(double temperature, int topK, double topP, uint64_t seed) {
  Sampling s;
  s.temperature = temperature;
  s.topK = topK;
  s.topP = topP;
  s.seed = seed;
  return s;
}

void validateSampling(const Sampling& s) {
  const auto finite = [](double v) { return std::isfinite(v); };
  check(finite(s.temperature) && s.temperature >= 0,
        "sampling: temperature " + std::to_string(s.temperature) + " must be >= 0");
  check(s.topK >= 0, "sampling: topK " + std::to_string(s.topK) + " must be >= 0");
  check(finite(s.topP) && s.topP > 0 && s.topP <= 1, "sampling: topP " + std::to_string(s.topP) + " must be in (0, 1]");
  check(finite(s.minP) && s.minP >= 0 && s.minP <= 1, "sampling: minP " + std::to_string(s.minP) + " must be in [0, 1]");
  check(finite(s.presencePenalty) && finite(s.frequencyPenalty), "sampling: penalties must be finite");
  check(finite(s.repetitionPenalty) && s.repetitionPenalty > 0,
        "sampling: repetitionPenalty " + std::to_string(s.repetitionPenalty) + " must be > 0");
  for (const auto& [token, bias] : s.logitBias)
    check(std::isfinite(bias), "sampling: the logit bias of token " + std::to_string(token) + " must be finite");
  check(s.logprobs >= -1, "sampling: logprobs " + std::to_string(s.logprobs) + " must be >= -1");
}

void applyPenalties(std::span<float> logits, const Sampling& s, std::span<const TokenId> prompt,
                    std::span<const TokenId> generated) {
  const auto inRange = [&](TokenId t) { return t >= 0 && static_cast<size_t>(t) < logits.size(); };
  if (s.repetitionPenalty != 1.0) {
    std::vector<bool> seen(logits.size(), false);
    for (auto ids : {prompt, generated})
      for (TokenId t : ids)
        if (inRange(t)) seen[static_cast<size_t>(t)] = true;
    const auto p = static_cast<float>(s.repetitionPenalty);
    for (size_t i = 0; i < logits.size(); ++i)
      if (seen[i]) logits[i] = logits[i] > 0 ? logits[i] / p : logits[i] * p;
  }
  if (s.presencePenalty != 0.0 || s.frequencyPenalty != 0.0) {
    std::unordered_map<TokenId, int> counts;
    for (TokenId t : generated)
      if (inRange(t)) ++counts[t];
    for (const auto& [t, n] : counts)
      logits[static_cast<size_t>(t)] -= static_cast<float>(s.presencePenalty + s.frequencyPenalty * n);
  }
}

void applyLogitBias(std::span<float> logits, const Sampling& s) {
  for (const auto& [token, bias] : s.logitBias)
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[static_cast<size_t>(token)] += bias;
}

namespace {

// Ids sorted by logit, highest first, ties by id (so the order, and every draw, is deterministic).
std::vector<TokenId> byLogit(std::span<const float> logits, size_t keep) {
  std::vector<TokenId> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto higher = [&](TokenId a, TokenId b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  };
  keep = std::min(keep, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), higher);
  ids.resize(keep);
  return ids;
}

}  // namespace

RowHead headOf(std::span<const float> logits, size_t keep) {
  RowHead head;
  for (TokenId id : byLogit(logits, keep)) head.emplace_back(id, logits[static_cast<size_t>(id)]);
  return head;
}

std::vector<std::pair<TokenId, double>> candidates(std::span<const float> logits, const Sampling& s) {
  check(!logits.empty(), "sampling: no logits");
  return candidates(headOf(logits, s.topK > 0 ? static_cast<size_t>(s.topK) : logits.size()), s);
}

std::vector<std::pair<TokenId, double>> candidates(const RowHead& head, const Sampling& s) {
  check(!head.empty(), "sampling: no logits");
  const size_t k = s.topK > 0 ? std::min(static_cast<size_t>(s.topK), head.size()) : head.size();
  std::vector<std::pair<TokenId, double>> out;
  out.reserve(k);
  const double top = head[0].second;
  double sum = 0;
  for (size_t i = 0; i < k; ++i) {
    const double p = std::exp((head[i].second - top) / s.temperature);
    out.emplace_back(head[i].first, p);
    sum += p;
  }
  for (auto& c : out) c.second /= sum;
  // topP: the smallest head whose mass reaches topP; minP: tokens at least minP times the top.
  double mass = 0;
  size_t n = 0;
  while (n < out.size() && (n == 0 || mass < s.topP)) mass += out[n++].second;
  const double floor = s.minP * out[0].second;
  while (n > 1 && out[n - 1].second < floor) --n;
  out.resize(n);
  sum = 0;
  for (const auto& c : out) sum += c.second;
  for (auto& c : out) c.second /= sum;
  return out;
}

TokenId pick(const std::vector<std::pair<TokenId, double>>& candidates, double u) {
  double mass = 0;
  for (const auto& [id, p] : candidates) {
    mass += p;
    if (u < mass) return id;
  }
  return candidates.back().first;  // u beyond the rounded total
}

double drawUniform(uint64_t seed, uint64_t index) {
  return tensor::uniform(tensor::Key(seed).split(index), {1}).toFloats()[0];
}

TokenId chooseToken(std::span<const float> logits, const Sampling& s, uint64_t index) {
  if (s.temperature == 0.0) return byLogit(logits, 1)[0];
  return pick(candidates(logits, s), drawUniform(s.seed, index));
}

TokenId chooseToken(const RowHead& head, const Sampling& s, uint64_t index) {
  check(!head.empty(), "sampling: no logits");
  if (s.temperature == 0.0) return head[0].first;
  return pick(candidates(head, s), drawUniform(s.seed, index));
}

namespace {

// verifyDraft's step once the candidates are known.
TokenId verifyWith(std::vector<std::pair<TokenId, double>> c, const Sampling& s, uint64_t index, TokenId draft) {
  const std::vector<float> u = tensor::uniform(tensor::Key(s.seed).split(index), {2}).toFloats();
  const auto it = std::find_if(c.begin(), c.end(), [&](const auto& e) { return e.first == draft; });
  if (it == c.end()) return pick(c, u[1]);
  const double p = it->second;
  if (u[0] < p || p >= 1.0) return draft;
  c.erase(it);
  for (auto& e : c) e.second /= 1.0 - p;
  return pick(c, u[1]);
}

}  // namespace

TokenId verifyDraft(std::span<const float> logits, const Sampling& s, uint64_t index, TokenId draft) {
  if (s.temperature == 0.0) return byLogit(logits, 1)[0];
  return verifyWith(candidates(logits, s), s, index, draft);
}

TokenId verifyDraft(const RowHead& head, const Sampling& s, uint64_t index, TokenId draft) {
  check(!head.empty(), "sampling: no logits");
  if (s.temperature == 0.0) return head[0].first;
  return verifyWith(candidates(head, s), s, index, draft);
}

TokenLogprob logprobOf(std::span<const float> logits, TokenId token, int top) {
  const float maxLogit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - maxLogit);
  const double logZ = maxLogit + std::log(sum);
  const auto logprob = [&](TokenId t) { return static_cast<float>(logits[static_cast<size_t>(t)] - logZ); };
  TokenLogprob out{token, logprob(token), {}};
  if (top > 0)
    for (TokenId t : byLogit(logits, static_cast<size_t>(top))) out.top.emplace_back(t, logprob(t));
  return out;
}

}  // namespace gizml::llm
