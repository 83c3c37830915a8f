#include "llm/models/gated_delta_net.h"

#include <gizml/error.h>

#include <algorithm>
#include <cmath>

#include "llm/ops/host.h"
#include "llm/ops/scratch.h"
#include "llm/ops/weights.h"
#include "llm/quant/converted_model.h"

namespace gizml::llm {
HybridState::HybridState(std::shared_ptr<ops::KvPool> pool, const ModelConfig& c, int64_t capacity)
    : KvCache(std::move(pool), capacity), deltaNets_(static_cast<size_t>(c.numLayers)),
      hidden_(ops::emptyOn(this->pool().lastGpu(), {0, c.hiddenSize})) {
  const ops::DeltaNetShape shape{c.linearNumKeyHeads, c.linearNumValueHeads, c.linearKeyHeadDim,
                                 c.linearValueHeadDim, c.linearConvKernel};
  for (int64_t i = 0; i < c.numLayers; ++i)
    if (c.layerTypes[static_cast<size_t>(i)] == LayerType::LinearAttention)
      deltaNets_[static_cast<size_t>(i)] = DeltaNetState::zeros(shape, this->pool().gpuOf(i));
}

void HybridState::keep(int64_t layer, int64_t length) {
  auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length >= length; });
  if (it == kept_.end() || it->length != length)
    it = kept_.insert(it, {length, std::vector<DeltaNetState>(deltaNets_.size())});
  it->layers[static_cast<size_t>(layer)] = deltaNets_[static_cast<size_t>(layer)].copy();
  if (kept_.size() > kMaxKept) kept_.erase(kept_.begin());
}

int64_t HybridState::reusable(int64_t n) const {
  if (n >= length()) return length();
  // A kept state that does not cut into the pictures held.
  int64_t best = 0;
  for (const Kept& k : kept_)
    if (k.length <= n && KvCache::reusable(k.length) == k.length) best = k.length;
  return best;
}

void HybridState::forgetKept(int64_t length) {
  kept_.erase(std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length > length; }), kept_.end());
}

void HybridState::keepRows(int64_t start, const std::vector<int32_t>& tokens, const Tensor& hidden) {
  const auto rows = static_cast<int64_t>(tokens.size());
  const int64_t need = start + rows, held = static_cast<int64_t>(tokens_.size());
  if (need > hidden_.size(0)) {
    // Doubling (within the state's capacity) copies each row a bounded number of times.
    Tensor grown = ops::emptyOn(pool().lastGpu(), {std::max(need, std::min(2 * hidden_.size(0), capacity())), hidden_.size(1)});
    if (held > 0) tensor::assign(rowsOf(grown, 0, held), rowsOf(hidden_, 0, held));
    hidden_ = grown;
  }
  if (held < need) tokens_.resize(static_cast<size_t>(need));
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + start);
  tensor::assign(rowsOf(hidden_, start, rows), rowsOf(hidden, 0, rows));
}

Tensor HybridState::hiddenRows(int64_t first, int64_t rows) const { return rowsOf(hidden_, first, rows).clone(); }

namespace {

// Copies of states that share no memory with them (attention layers' empty ones stay empty).
std::vector<DeltaNetState> copies(const std::vector<DeltaNetState>& states) {
  std::vector<DeltaNetState> out(states.size());
  for (size_t i = 0; i < states.size(); ++i)
    if (states[i].memory.ndim() > 0) out[i] = states[i].copy();
  return out;
}

int64_t bytesOf(const std::vector<DeltaNetState>& states) {
  int64_t bytes = 0;
  for (const DeltaNetState& s : states)
    if (s.memory.ndim() > 0) bytes += (s.memory.numel() + s.conv.numel()) * static_cast<int64_t>(sizeof(float));
  return bytes;
}

}  // namespace

bool HybridState::copyFrom(const SequenceState& other) {
  const auto* from = dynamic_cast<const HybridState*>(&other);
  if (from == this) return true;
  if (!from || from->deltaNets_.size() != deltaNets_.size() || !copyKeysValues(*from)) return false;
  deltaNets_ = copies(from->deltaNets_);
  kept_.clear();
  for (const Kept& k : from->kept_) kept_.push_back({k.length, copies(k.layers)});
  hidden_ = from->hidden_.clone();
  tokens_ = from->tokens_;
  mtpNext = from->mtpNext;
  return true;
}

int64_t HybridState::memoryBytes() const {
  int64_t bytes = KvCache::memoryBytes() + bytesOf(deltaNets_) + hidden_.numel() * static_cast<int64_t>(sizeof(float));
  for (const Kept& k : kept_) bytes += bytesOf(k.layers);
  return bytes;
}

void HybridState::truncate(int64_t n) {
  check(KvCache::reusable(n) == n, "truncate: " + std::to_string(n) + " cuts into the pictures held");
  if (n != length()) {
    // The MTP entry of position n - 1 read the token at n, which may change now.
    mtpNext = std::min(mtpNext, std::max<int64_t>(0, n - 1));
    const auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Kept& k) { return k.length == n; });
    check(n == 0 || it != kept_.end(), "truncate: recurrent states are kept after token " + std::to_string(length()) +
                                           " and at the marks fed, so they cannot go back to " + std::to_string(n));
    for (size_t i = 0; i < deltaNets_.size(); ++i) {
      DeltaNetState& s = deltaNets_[i];
      if (s.memory.ndim() == 0) continue;  // an attention layer
      if (n == 0) s.clear();
      else s = it->layers[i].copy();
    }
    forgetKept(n);
  }
  KvCache::truncate(n);
}

GatedDeltaNet::GatedDeltaNet(const ConvertedModel& weights, const std::string& prefix, const ModelConfig& c)
    : hidden_(c.hiddenSize),
      shape_{c.linearNumKeyHeads, c.linearNumValueHeads, c.linearKeyHeadDim, c.linearValueHeadDim, c.linearConvKernel},
      eps_(static_cast<float>(c.rmsNormEps)) {
  const std::string where = weights.folder() + ": ";
  const ops::DeltaNetShape& s = shape_;
  check(s.keyHeads > 0 && s.valueHeads > 0 && s.keyDim > 0 && s.valueDim > 0 && s.kernel > 0,
        where + "linear attention sizes must be positive");
  check(s.valueHeads % s.keyHeads == 0, where + "linear_num_key_heads (" + std::to_string(s.keyHeads) +
                                            ") must divide linear_num_value_heads (" + std::to_string(s.valueHeads) + ")");
  const int64_t valueWidth = s.valueHeads * s.valueDim, channels = s.channels();
  qkv_ = Linear(weights, prefix + "in_proj_qkv.weight", channels, hidden_);
  z_ = Linear(weights, prefix + "in_proj_z.weight", valueWidth, hidden_);
  b_ = Linear(weights, prefix + "in_proj_b.weight", s.valueHeads, hidden_);
  a_ = Linear(weights, prefix + "in_proj_a.weight", s.valueHeads, hidden_);
  out_ = Linear(weights, prefix + "out_proj.weight", hidden_, valueWidth);
  storedTensor(weights, prefix + "conv1d.weight", {channels, 1, s.kernel});
  const std::vector<float> conv = weights.dequantize(prefix + "conv1d.weight").toFloats();
  std::vector<float> taps(conv.size()), decayRate;
  for (int64_t ch = 0; ch < channels; ++ch)
    for (int64_t j = 0; j < s.kernel; ++j)
      taps[static_cast<size_t>(j * channels + ch)] = conv[static_cast<size_t>(ch * s.kernel + j)];
  for (float aLog : loadVector(weights, prefix + "A_log", s.valueHeads)) decayRate.push_back(-std::exp(aLog));
  mixing_ = {placedValues(weights, taps), placedValues(weights, decayRate),
             placedValues(weights, loadVector(weights, prefix + "dt_bias", s.valueHeads))};
  norm_ = placedValues(weights, loadVector(weights, prefix + "norm.weight", s.valueDim));
}

void GatedDeltaNet::forward(const Tensor& x, const Batch& batch, int64_t layer, const Tensor& out) const {
  using ops::Scratch;
  const int64_t rows = batch.rows, valueHeads = shape_.valueHeads, valueWidth = valueHeads * shape_.valueDim;
  // Every value of these is written before it is read.
  const Tensor qkv = ops::scratch(Scratch::DeltaIn, rows, shape_.channels(), x);
  const Tensor z = ops::scratch(Scratch::DeltaZ, rows, valueWidth, x);
  const Tensor b = ops::scratch(Scratch::DeltaB, rows, valueHeads, x);
  const Tensor a = ops::scratch(Scratch::DeltaA, rows, valueHeads, x);
  const Tensor o = ops::scratch(Scratch::DeltaOut, rows, valueWidth, x);
  Linear::applyAll({&qkv_, &z_, &b_, &a_}, x, {qkv, z, b, a});
  mix(qkv, b, a, batch, layer, o);
  ops::gatedNorm(o, z, norm_, eps_);
  out_.apply(o, out);
}

void GatedDeltaNet::mix(const Tensor& qkv, const Tensor& b, const Tensor& a, const Batch& batch, int64_t layer,
                        const Tensor& o) const {
  // Each sequence's rows in segments ending at its marks (the state is kept at each); round i
  // mixes every sequence's i-th segment at once. A decode step is one round of a row each.
  std::vector<std::vector<int64_t>> ends(batch.sequences.size());
  size_t rounds = 0;
  for (size_t i = 0; i < batch.sequences.size(); ++i) {
    const Batch::Sequence& seq = batch.sequences[i];
    for (int64_t mark : seq.marks) ends[i].push_back(mark - seq.start);
    if (ends[i].empty() || ends[i].back() < seq.rows) ends[i].push_back(seq.rows);
    rounds = std::max(rounds, ends[i].size());
  }
  // The model made every state it is fed (plan checks), so each is a HybridState.
  const auto hybrid = [&](size_t i) -> HybridState& { return static_cast<HybridState&>(*batch.sequences[i].cache); };
  for (size_t round = 0; round < rounds; ++round) {
    std::vector<ops::DeltaNetRows> runs;
    for (size_t i = 0; i < ends.size(); ++i) {
      if (round >= ends[i].size()) continue;
      const int64_t from = round == 0 ? 0 : ends[i][round - 1];
      if (ends[i][round] > from)
        runs.push_back({batch.sequences[i].first + from, ends[i][round] - from, &hybrid(i).deltaNet(layer)});
    }
    ops::deltaNetMix(shape_, mixing_, qkv, b, a, runs, o);
    for (size_t i = 0; i < ends.size(); ++i) {
      const Batch::Sequence& seq = batch.sequences[i];
      if (round < ends[i].size() && round < seq.marks.size()) hybrid(i).keep(layer, seq.marks[round]);
    }
  }
}

}  // namespace gizml::llm
