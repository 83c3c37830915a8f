#include "llm/engine/device_rows.h"

#include <gizml/netops_rows.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "llm/ops/gpu/model_ops_gpu.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::llm {
namespace {

using tensor::Tensor;

// (value, token) ranks above (v, t): the higher logit, then the lower id (sampling's order).
bool above(float value, TokenId token, float v, TokenId t) { return value != v ? value > v : token < t; }

// The k highest of a row from its candidates (CANDIDATE_ROW floats: thread t's TOP_EACH pairs),
// or nothing where a token they dropped might belong: thread t reads tokens t, t + 256, ... and
// keeps its TOP_EACH highest, so the tokens it dropped rank below its last kept pair, and the
// head is exact when that pair does not rank above the head's last.
std::optional<RowHead> headOfCandidates(const float* cand, int64_t vocab, size_t k) {
  RowHead all;
  for (int64_t i = 0; i < netops::CANDIDATE_ROW; i += 2)
    if (cand[i + 1] >= 0) all.emplace_back(static_cast<TokenId>(cand[i + 1]), cand[i]);
  const auto higher = [](const auto& a, const auto& b) { return above(a.second, a.first, b.second, b.first); };
  k = std::min(k, static_cast<size_t>(vocab));
  if (all.size() < k) return std::nullopt;  // a thread dropped tokens (more than TOP_EACH threads' worth asked)
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(), higher);
  all.resize(k);
  constexpr int64_t threads = netops::CANDIDATE_ROW / (2 * netops::TOP_EACH);
  for (int64_t t = 0; t < threads && t < vocab; ++t) {
    if ((vocab - t + threads - 1) / threads <= netops::TOP_EACH) continue;  // it read them all
    const float* last = cand + (t * netops::TOP_EACH + netops::TOP_EACH - 1) * 2;
    if (last[1] >= 0 && above(last[0], static_cast<TokenId>(last[1]), all.back().second, all.back().first))
      return std::nullopt;
  }
  return all;
}

// A run of feeds whose rows lie one after another in one GPU tensor, read by one launch.
struct Run {
  std::vector<size_t> feeds;
  int64_t rows = 0;
  uint64_t start = 0, end = 0;
  bool argmax = false;
};

// The entry of `onGpus` for the GPU that holds `logits` (its first rows there and what is kept for
// that GPU), made where there is none: a step's rows grouped by GPU for one launch each.
template <class Kept>
std::pair<Tensor, Kept>& ofGpu(std::vector<std::pair<Tensor, Kept>>& onGpus, const Tensor& logits) {
  auto on = std::find_if(onGpus.begin(), onGpus.end(), [&](const auto& g) { return g.first.device() == logits.device(); });
  if (on == onGpus.end()) on = onGpus.insert(onGpus.end(), {logits, Kept{}});
  return *on;
}

}  // namespace

size_t headTokens(const Sampling& s, bool copied, bool penalized, bool masked) {
  if (copied || (penalizes(s) && !penalized) || (s.grammar && !masked) || s.logprobs >= 0) return 0;
  if (s.temperature == 0.0) return 1;
  return s.topK > 0 ? static_cast<size_t>(s.topK) : 0;
}

bool penalizes(const Sampling& s) {
  return s.repetitionPenalty != 1.0 || s.presencePenalty != 0.0 || s.frequencyPenalty != 0.0 || !s.logitBias.empty();
}

void StepPenalties::add(const Tensor& logits, const Sampling& s, std::span<const TokenId> prompt,
                        std::span<const TokenId> generated, PenaltyTokens& kept) {
  check(logits.dtype() == DType::F32 && logits.isContiguous() && logits.onGpu(),
        "StepPenalties: the logits are not contiguous F32 rows on a GPU");
  const int64_t vocab = logits.size(-1), row = logits.numel() - vocab;
  // Each token the host's applyPenalties and applyLogitBias touch, in token order, with what they
  // do to it (a token they leave alone in one of the steps: repetition 1, minus 0).
  const auto inRange = [&](TokenId t) { return t >= 0 && t < vocab; };
  const bool repetition = s.repetitionPenalty != 1.0, counted = s.presencePenalty != 0.0 || s.frequencyPenalty != 0.0;
  if (!kept.made || generated.size() < kept.drawn) {
    kept = {};
    if (repetition)
      for (TokenId t : prompt)
        if (inRange(t)) kept.touched[t].seen = true;
    for (const auto& [t, bias] : s.logitBias)
      if (inRange(t)) kept.touched[t].bias.push_back(bias);
    kept.made = true;
  }
  for (; kept.drawn < generated.size(); ++kept.drawn) {
    const TokenId t = generated[kept.drawn];
    if (!inRange(t) || !(repetition || counted)) continue;
    PenaltyTokens::Edit& e = kept.touched[t];
    e.seen = e.seen || repetition;
    if (counted) ++e.count;
  }
  ops::gpu::LogitEdits& edits = ofGpu(onGpus_, logits).second;
  const uint64_t first = gpuops::address(logits) + static_cast<uint64_t>(row) * sizeof(float);
  for (const auto& [t, e] : kept.touched) {
    edits.at.push_back(first + static_cast<uint64_t>(t) * sizeof(float));
    edits.repetition.push_back(e.seen ? static_cast<float>(s.repetitionPenalty) : 1.0f);
    edits.minus.push_back(e.count > 0 ? static_cast<float>(s.presencePenalty + s.frequencyPenalty * e.count) : 0.0f);
    edits.bias.insert(edits.bias.end(), e.bias.begin(), e.bias.end());
    edits.biasStart.push_back(static_cast<int32_t>(edits.bias.size()));
  }
}

void StepPenalties::apply() {
  for (const auto& [on, edits] : onGpus_) ops::gpu::penalize(on, edits);
  onGpus_.clear();
}

void StepMasks::add(const Tensor& logits, AllowedTokens allowed) {
  check(logits.dtype() == DType::F32 && logits.isContiguous() && logits.onGpu(),
        "StepMasks: the logits are not contiguous F32 rows on a GPU");
  auto& [on, rows] = ofGpu(onGpus_, logits);
  const int64_t vocab = logits.size(-1);
  check(on.size(-1) == vocab, "StepMasks: rows of different vocabularies");
  const AllowedTokens& kept = allowed_.emplace_back(std::move(allowed));
  rows.push_back({gpuops::address(logits) + static_cast<uint64_t>(logits.numel() - vocab) * sizeof(float),
                  &kept.words, kept.endOnly});
}

void StepMasks::apply() {
  for (const auto& [on, rows] : onGpus_) ops::gpu::maskRows(on, rows, on.size(-1));
  onGpus_.clear();
  allowed_.clear();
}

std::vector<ReadRows> readRows(const std::vector<Tensor>& logits, const std::vector<bool>& want,
                               const std::vector<size_t>& heads) {
  std::vector<ReadRows> out(logits.size());
  std::vector<bool> whole(logits.size(), false);
  std::vector<Run> runs;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!want[i]) continue;
    const Tensor& l = logits[i];
    // The kernels read contiguous F32 rows (a model's logits on a GPU are).
    if (heads[i] == 0 || !l.onGpu() || l.numel() == 0 || l.dtype() != DType::F32 || !l.isContiguous()) {
      whole[i] = true;
      continue;
    }
    const uint64_t at = gpuops::address(l), bytes = dtypeBytes(l.dtype(), l.numel());
    const bool argmax = heads[i] == 1;
    if (runs.empty() || runs.back().argmax != argmax || runs.back().end != at ||
        logits[runs.back().feeds[0]].storage() != l.storage())
      runs.push_back({{}, 0, at, at, argmax});
    runs.back().feeds.push_back(i);
    runs.back().rows += l.size(0);
    runs.back().end = at + bytes;
  }
  // Every run's launch and copy queued, then one wait.
  std::vector<std::vector<float>> read(runs.size());
  std::vector<Tensor> results;  // on the GPU until the wait
  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    const Tensor& first = logits[run.feeds[0]];
    const gizhw::gpu::Gpu g = gpuops::gpuOf(first);
    const int64_t vocab = first.size(-1), per = run.argmax ? 1 : netops::CANDIDATE_ROW;
    results.push_back(gpuops::empty({run.rows, per}, DType::F32, g.device()));
    const uint64_t dst = gpuops::address(results.back());
    if (run.argmax) netops::argmaxInto(g, run.rows, vocab, vocab, false, dst, run.start, 0);
    else netops::candidatesInto(g, run.rows, vocab, vocab, false, dst, run.start, 0);
    read[r].resize(static_cast<size_t>(run.rows * per));
    g.copyToHost(read[r].data(), dst, read[r].size() * sizeof(float), g.stream());
  }
  for (const Tensor& t : results) gpuops::gpuOf(t).synchronize();
  for (size_t r = 0; r < runs.size(); ++r) {
    const float* at = read[r].data();
    for (size_t i : runs[r].feeds) {
      const int64_t rows = logits[i].size(0), vocab = logits[i].size(-1);
      for (int64_t row = 0; row < rows; ++row) {
        if (runs[r].argmax) {
          // Greedy reads the token alone; its logit stays on the GPU.
          out[i].heads.push_back({{static_cast<TokenId>(at[row]), std::numeric_limits<float>::quiet_NaN()}});
          continue;
        }
        std::optional<RowHead> head = headOfCandidates(at + row * netops::CANDIDATE_ROW, vocab, heads[i]);
        if (!head) {
          whole[i] = true;
          break;
        }
        out[i].heads.push_back(std::move(*head));
      }
      at += rows * (runs[r].argmax ? 1 : netops::CANDIDATE_ROW);
      if (whole[i]) out[i].heads.clear();
    }
  }
  // A copy of each row a step (8 rows of 49,152 logits: 1.5 MB) was 3 % of a served batch's time,
  // its page faults included.
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!whole[i]) continue;
    const Tensor& l = logits[i];
    if (!l.onGpu() && l.dtype() == DType::F32 && l.isContiguous()) {
      out[i].values = std::span<float>(l.data<float>(), static_cast<size_t>(l.numel()));
    } else {
      out[i].copy = l.toFloats();
      out[i].values = out[i].copy;
    }
  }
  return out;
}

}  // namespace gizml::llm
