#include "llm/engine/sampling.h"

#include <gizml/error.h>
#include <gizml/tensor.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "cpu/reduce.h"
#include "cpu/softmax_rows.h"

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

// A token's place in the order a row's tokens are read (highest logit first, the lower id first
// among equals, so the order and every draw are deterministic) as one 64-bit key, larger first:
// the logit's bits in an order that compares as the floats do (NaN as -inf, -0 as +0) above the
// id's complement. Sorts of such keys compare integers instead of reading logits through ids.
uint64_t orderKey(std::span<const float> logits, size_t i) {
  const float l = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i] + 0.0f;
  const auto u = std::bit_cast<uint32_t>(l);
  const uint32_t bits = u & 0x80000000u ? ~u : u | 0x80000000u;
  return uint64_t{bits} << 32 | (0xffffffffu - static_cast<uint32_t>(i));
}

TokenId idOf(uint64_t orderKey) { return static_cast<TokenId>(0xffffffffu - static_cast<uint32_t>(orderKey)); }

// A row's ids in that order, sorted only as far as they are read (byLogit's long heads).
class LazyOrder {
 public:
  explicit LazyOrder(std::span<const float> logits) : keys_(logits.size()) {
    for (size_t i = 0; i < keys_.size(); ++i) keys_[i] = orderKey(logits, i);
  }
  TokenId operator[](size_t i) {
    if (i >= sorted_) sortTo(i + 1);
    return idOf(keys_[i]);
  }

 private:
  // Sorts at least the first n, doubling what is sorted each time.
  void sortTo(size_t n) {
    const size_t end = std::min(keys_.size(), std::max({n, 2 * sorted_, size_t{256}}));
    const auto first = keys_.begin() + static_cast<std::ptrdiff_t>(sorted_), last = keys_.begin() + static_cast<std::ptrdiff_t>(end);
    if (end < keys_.size()) std::nth_element(first, last, keys_.end(), std::greater<>());
    std::sort(first, last, std::greater<>());
    sorted_ = end;
  }

  std::vector<uint64_t> keys_;
  size_t sorted_ = 0;
};

// The `keep` first ids of the row's order. A short head (a topK, logprobs' top) in one pass that
// keeps the best so far in order, where most ids lose one float comparison with the weakest kept
// (their keys and a partial sort of every id took 1 ms over 151,936 logits for a topK of 40).
std::vector<TokenId> byLogit(std::span<const float> logits, size_t keep) {
  constexpr size_t kShortHead = 256;
  keep = std::min(keep, logits.size());
  std::vector<TokenId> ids;
  if (keep == 0) return ids;
  if (keep <= kShortHead) {
    std::vector<uint64_t> kept;  // keys, highest first
    kept.reserve(keep + 1);
    float weakest = std::numeric_limits<float>::quiet_NaN();  // the last kept's logit, once full
    for (size_t i = 0; i < logits.size(); ++i) {
      // A later id never wins over an equal logit, nor a NaN (as -inf) over anything: one float
      // compare says all, unless the weakest kept is a NaN itself.
      if (!std::isnan(weakest) && !(logits[i] > weakest)) continue;
      const uint64_t key = orderKey(logits, i);
      if (kept.size() == keep && key <= kept.back()) continue;
      kept.insert(std::upper_bound(kept.begin(), kept.end(), key, std::greater<>()), key);
      if (kept.size() > keep) kept.pop_back();
      if (kept.size() == keep) weakest = logits[static_cast<size_t>(idOf(kept.back()))];
    }
    for (const uint64_t key : kept) ids.push_back(idOf(key));
    return ids;
  }
  LazyOrder order(logits);
  ids.resize(keep);
  for (size_t i = keep; i-- > 0;) ids[i] = order[i];  // the last first: one sort to keep
  return ids;
}

// Greedy's token: the highest logit's, the lowest id among equals.
TokenId highest(std::span<const float> logits) {
  check(!logits.empty(), "sampling: no logits");
  return static_cast<TokenId>(cpu::argmaxF32(logits.data(), static_cast<int64_t>(logits.size())));
}

// candidates(row, s) for a row with no topK, without materializing it. Each token's weight is
// e^((l - top) / t) by the vector exp (in float: candidates' double exp differs in the last bits),
// and each token falls in a bucket of (top - l) / t, 16 to a nat, so the buckets come in the
// row's order. A walk down the order (the topP cut, the draw) adds whole buckets' weights and
// sorts only the bucket it stops in: the same order token by token as candidates', its sums in
// another order. A draw at temperature 1 over 151,936 logits took 2.7 ms in double exps and a
// partial sort of every id (a Qwen3-0.6B-shaped decode step at two threads takes about 21 ms).
class RowDraw {
 public:
  RowDraw(std::span<const float> logits, const Sampling& s)
      : logits_(logits), w_(logits.size()), bucket_(logits.size()), start_(kBuckets + 1), mass_(kBuckets) {
    const TokenId topId = highest(logits);
    const float top = logits[static_cast<size_t>(topId)];
    const auto scale = static_cast<float>(1.0 / s.temperature);
    for (size_t i = 0; i < w_.size(); ++i) {
      const float x = (logits[i] - top) * scale;  // <= 0, or NaN
      const float f = -x * kPerNat;
      bucket_[i] = f < kBuckets - 1 ? static_cast<uint16_t>(f) : kBuckets - 1;  // NaN's last
      w_[i] = std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
    }
    cpu::expShifted(w_.data(), static_cast<int64_t>(w_.size()), 0.0f);
    if (w_[static_cast<size_t>(topId)] == 0.0f) w_[static_cast<size_t>(topId)] = 1.0f;  // no finite logit, or 1 / t overflowed: greedy
    for (size_t i = 0; i < w_.size(); ++i) {
      ++start_[bucket_[i] + 1];
      mass_[bucket_[i]] += w_[i];
    }
    double total = 0;  // in double: a float total's rounding would move every boundary of the draw
    for (size_t b = 0; b < kBuckets; ++b) {
      start_[b + 1] += start_[b];
      total += mass_[b];
    }
    // topP: the smallest most-likely set whose mass reaches it.
    double headMass = total;
    size_t head = w_.size();
    if (s.topP < 1.0) {
      const double target = s.topP * total;
      headMass = 0;
      head = 0;
      for (size_t b = 0; b < kBuckets && (head == 0 || headMass < target); ++b) {
        if (headMass + mass_[b] < target) {  // every token of the bucket joins
          headMass += mass_[b];
          head = start_[b + 1];
          continue;
        }
        for (const TokenId t : sorted(b)) {
          if (head > 0 && !(headMass < target)) break;
          headMass += w_[static_cast<size_t>(t)];
          ++head;
        }
      }
    }
    // minP: the tokens at least minP times the top; the kept set is all of them or topP's head.
    const double floor = s.minP * w_[static_cast<size_t>(topId)];
    size_t above = w_.size();
    double aboveMass = total;
    if (s.minP > 0) {
      above = 0;
      aboveMass = 0;
      for (const float w : w_)
        if (w >= floor) ++above, aboveMass += w;
    }
    keep_ = std::max<size_t>(1, std::min(head, above));
    kept_ = keep_ == above ? aboveMass : headMass;
  }

  // The kept probability of token t (0 where a cut left it out).
  double probability(TokenId t) {
    if (t < 0 || static_cast<size_t>(t) >= w_.size()) return 0.0;
    const double p = w_[static_cast<size_t>(t)] / kept_;
    const size_t b = bucket_[static_cast<size_t>(t)];
    if (start_[b + 1] <= keep_) return p;
    if (start_[b] >= keep_) return 0.0;
    const std::vector<TokenId>& ids = sorted(b);
    const auto rank = start_[b] + static_cast<size_t>(std::find(ids.begin(), ids.end(), t) - ids.begin());
    return rank < keep_ ? p : 0.0;
  }

  // The kept token u falls on with the probabilities end to end, `skip`'s left out and the rest
  // scaled by 1 / (1 - skipped) (a rejected draft's).
  TokenId pick(double u, std::optional<TokenId> skip = std::nullopt, double skipped = 0.0) {
    const double scale = 1.0 / (kept_ * (1.0 - skipped));
    double mass = 0;
    for (size_t b = 0; b < kBuckets && start_[b] < keep_; ++b) {
      if (start_[b + 1] <= keep_) {  // a bucket kept whole: all of it at once where u is past it
        const bool skipHere = skip && bucket_[static_cast<size_t>(*skip)] == b;
        const double m = (mass_[b] - (skipHere ? w_[static_cast<size_t>(*skip)] : 0.0)) * scale;
        if (!(u < mass + m)) {
          mass += m;
          continue;
        }
      }
      const std::vector<TokenId>& ids = sorted(b);
      for (size_t r = start_[b]; r < std::min(start_[b + 1], keep_); ++r) {
        const TokenId t = ids[r - start_[b]];
        if (t == skip) continue;
        mass += w_[static_cast<size_t>(t)] * scale;
        if (u < mass) return t;
      }
    }
    // u beyond the rounded total: the last kept token
    const TokenId last = at(keep_ - 1);
    return last == skip && keep_ > 1 ? at(keep_ - 2) : last;
  }

 private:
  static constexpr float kPerNat = 16;
  static constexpr uint16_t kBuckets = 2048;  // 128 nats; from about 104 down the weights are 0

  // Bucket b's ids in the row's order, gathered and sorted the first time they are read.
  const std::vector<TokenId>& sorted(size_t b) {
    const auto [it, added] = sorted_.try_emplace(b);
    if (added) {
      std::vector<uint64_t> keys;
      keys.reserve(start_[b + 1] - start_[b]);
      for (size_t i = 0; i < bucket_.size(); ++i)
        if (bucket_[i] == b) keys.push_back(orderKey(logits_, i));
      std::sort(keys.begin(), keys.end(), std::greater<>());
      for (const uint64_t key : keys) it->second.push_back(idOf(key));
    }
    return it->second;
  }
  // The token at rank k of the order.
  TokenId at(size_t k) {
    const auto b = static_cast<size_t>(std::upper_bound(start_.begin(), start_.end(), k) - start_.begin()) - 1;
    return sorted(b)[k - start_[b]];
  }

  std::span<const float> logits_;
  std::vector<float> w_;          // each token's weight e^((l - top) / t), the top's 1
  std::vector<uint16_t> bucket_;  // each token's bucket
  std::vector<size_t> start_;     // the first rank of each bucket, and the row's size
  std::vector<double> mass_;      // each bucket's weight
  std::map<size_t, std::vector<TokenId>> sorted_;
  size_t keep_ = 0;               // the first keep_ in order survive topP and minP
  double kept_ = 0;               // their weight
};

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

namespace {

// A candidate list read as RowDraw reads a row, so that verifyDraft's steps serve both (it reads
// the list it is given, which must outlive it).
class CandidateDraw {
 public:
  explicit CandidateDraw(const std::vector<std::pair<TokenId, double>>& c) : c_(c) {}

  double probability(TokenId t) const {
    const auto it = std::find_if(c_.begin(), c_.end(), [&](const auto& e) { return e.first == t; });
    return it == c_.end() ? 0.0 : it->second;
  }

  // As RowDraw::pick.
  TokenId pick(double u, std::optional<TokenId> skip = std::nullopt, double skipped = 0.0) const {
    const double scale = 1.0 / (1.0 - skipped);
    double mass = 0;
    TokenId last = c_.front().first;
    for (const auto& [id, p] : c_) {
      if (id == skip) continue;
      last = id;
      mass += p * scale;
      if (u < mass) return id;
    }
    return last;  // u beyond the rounded total
  }

 private:
  const std::vector<std::pair<TokenId, double>>& c_;
};

}  // namespace

TokenId pick(const std::vector<std::pair<TokenId, double>>& candidates, double u) {
  return CandidateDraw(candidates).pick(u);
}

double drawUniform(uint64_t seed, uint64_t index) {
  return tensor::uniform(tensor::Key(seed).split(index), {1}).toFloats()[0];
}

namespace {

// Whether a draw reads the whole row (no topK below its size): RowDraw's case.
bool wholeRow(std::span<const float> logits, const Sampling& s) {
  return s.topK <= 0 || static_cast<size_t>(s.topK) >= logits.size();
}

}  // namespace

TokenId chooseToken(std::span<const float> logits, const Sampling& s, uint64_t index) {
  if (s.temperature == 0.0) return highest(logits);
  if (wholeRow(logits, s)) return RowDraw(logits, s).pick(drawUniform(s.seed, index));
  return pick(candidates(logits, s), drawUniform(s.seed, index));
}

TokenId chooseToken(const RowHead& head, const Sampling& s, uint64_t index) {
  check(!head.empty(), "sampling: no logits");
  if (s.temperature == 0.0) return head[0].first;
  return pick(candidates(head, s), drawUniform(s.seed, index));
}

namespace {

// The draft with its kept probability p, from the first of two uniforms; else a draw from the
// second over the rest, scaled by 1 / (1 - p). On a RowDraw or a CandidateDraw.
template <class Draw>
TokenId verifyOn(Draw&& draw, const Sampling& s, uint64_t index, TokenId draft) {
  const std::vector<float> u = tensor::uniform(tensor::Key(s.seed).split(index), {2}).toFloats();
  const double p = draw.probability(draft);
  if (p == 0.0) return draw.pick(u[1]);
  if (u[0] < p || p >= 1.0) return draft;
  return draw.pick(u[1], draft, p);
}

}  // namespace

TokenId verifyDraft(std::span<const float> logits, const Sampling& s, uint64_t index, TokenId draft) {
  if (s.temperature == 0.0) return highest(logits);
  if (!wholeRow(logits, s)) return verifyOn(CandidateDraw(candidates(logits, s)), s, index, draft);
  return verifyOn(RowDraw(logits, s), s, index, draft);
}

TokenId verifyDraft(const RowHead& head, const Sampling& s, uint64_t index, TokenId draft) {
  check(!head.empty(), "sampling: no logits");
  if (s.temperature == 0.0) return head[0].first;
  return verifyOn(CandidateDraw(candidates(head, s)), s, index, draft);
}

TokenLogprob logprobOf(std::span<const float> logits, TokenId token, int top) {
  // e^(l - max) by the vector exp and summed in reduceF32's chunks (a double exp a value took
  // about 1 ms a token over 151,936 logits).
  const float maxLogit = logits[static_cast<size_t>(highest(logits))];
  std::vector<float> e(logits.begin(), logits.end());
  cpu::expShifted(e.data(), static_cast<int64_t>(e.size()), maxLogit);
  const double logZ = maxLogit + std::log(static_cast<double>(cpu::reduceF32(cpu::ReduceOp::Sum, e.data(), static_cast<int64_t>(e.size()))));
  const auto logprob = [&](TokenId t) { return static_cast<float>(logits[static_cast<size_t>(t)] - logZ); };
  TokenLogprob out{token, logprob(token), {}};
  if (top > 0)
    for (TokenId t : byLogit(logits, static_cast<size_t>(top))) out.top.emplace_back(t, logprob(t));
  return out;
}

}  // namespace gizml::llm
