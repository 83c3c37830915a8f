// Scaled dot-product attention with an online softmax over blocks of 16 keys, in the spec's
// steps so a GPU that takes them gives the same bits: each score an fma chain over p from 0,
// then scaled; the block's max m' = max(m, its scores) gives c = e^(m - m') and the weights
// e^(s - m'); l = l c + the weights in order; each a = a c, then fma(weight, v, a) in order; a / l.
// On a GPU the same steps run in gz_netops_attention (src/netops/kernels/netops.cu.inc).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "netops/exp_log.h"
#include "netops/gpu_kernels.h"
#include "netops/operand.h"
#include "tensor/gpu/tensor_ops.h"
#include "tensor/random.h"

namespace gizml::netops {
namespace {

constexpr int64_t kKeyBlock = 16;

struct Dims {
  int64_t batch, tq, tk, d, e;
};

Dims checkedDims(const Tensor& q, const Tensor& k, const Tensor& v) {
  const char* fn = "attention";
  detail::requireRank(fn, "q", q, 3, "[b, tq, d]");
  detail::requireRank(fn, "k", k, 3, "[b, tk, d]");
  detail::requireRank(fn, "v", v, 3, "[b, tk, e]");
  const Dims s{q.shape()[0], q.shape()[1], k.shape()[1], q.shape()[2], v.shape()[2]};
  check(k.shape()[0] == s.batch && k.shape()[2] == s.d,
        detail::where(fn) + "k of shape " + tensor::shapeText(k.shape()) + " does not match q of shape " +
            tensor::shapeText(q.shape()) + " (b and d)");
  check(v.shape()[0] == s.batch && v.shape()[1] == s.tk,
        detail::where(fn) + "v of shape " + tensor::shapeText(v.shape()) + " does not match k of shape " +
            tensor::shapeText(k.shape()) + " (b and tk)");
  return s;
}

struct RowJob {
  const float *q, *kT, *v;
  float* out;
  Dims s;
  int64_t tkPad;
  float scale;
  bool causal, dropping;
  float dropBelow, keep;
  Key key;
};

// Queries [row0, row1) of the flattened [b tq]. Compiled also for FMA hardware (the fma chains
// give the same bits either way; without it each is a libm call).
GIZML_FMA_CLONES void attendRows(const RowJob& job, int64_t row0, int64_t row1) {
  const Dims& s = job.s;
  std::vector<float> acc(static_cast<size_t>(s.e));
  for (int64_t row = row0; row < row1; ++row) {
    const int64_t b = row / s.tq, i = row % s.tq;
    const float* qi = job.q + row * s.d;
    const float* kb = job.kT + b * s.d * job.tkPad;
    const float* vb = job.v + b * s.tk * s.e;
    // Keys [0, visible): all of them, or with `causal` those up to i + tk - tq.
    const int64_t visible = job.causal ? std::clamp<int64_t>(i + s.tk - s.tq + 1, 0, s.tk) : s.tk;
    std::fill(acc.begin(), acc.end(), 0.0f);
    float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
    for (int64_t j0 = 0; j0 < visible; j0 += kKeyBlock) {
      const int64_t n = std::min(kKeyBlock, visible - j0);
      float w[kKeyBlock] = {};
      for (int64_t p = 0; p < s.d; ++p) {
        const float* kp = kb + p * job.tkPad + j0;
        for (int64_t jj = 0; jj < kKeyBlock; ++jj) w[jj] = std::fma(qi[p], kp[jj], w[jj]);
      }
      float blockMax = m;
      for (int64_t jj = 0; jj < n; ++jj) {
        w[jj] = w[jj] * job.scale;
        blockMax = std::max(blockMax, w[jj]);
      }
      const float c = detail::gz_exp(m - blockMax);
      l *= c;
      for (int64_t jj = 0; jj < n; ++jj) {
        w[jj] = detail::gz_exp(w[jj] - blockMax);
        l += w[jj];
      }
      if (job.dropping) {
        const uint64_t word0 = static_cast<uint64_t>(row * s.tk + j0);
        for (int64_t jj = 0; jj < n; ++jj)
          w[jj] = tensor::uniformWord(job.key, word0 + static_cast<uint64_t>(jj)) >= job.dropBelow ? w[jj] * job.keep
                                                                                                 : 0.0f;
      }
      // Each a = a c, then fma(weight, v, a) in key order: keys outside, columns inside.
      for (float& a : acc) a *= c;
      for (int64_t jj = 0; jj < n; ++jj) {
        const float* vj = vb + (j0 + jj) * s.e;
        for (int64_t x = 0; x < s.e; ++x)
          acc[static_cast<size_t>(x)] = std::fma(w[jj], vj[x], acc[static_cast<size_t>(x)]);
      }
      m = blockMax;
    }
    float* o = job.out + row * s.e;
    for (int64_t x = 0; x < s.e; ++x) o[x] = acc[static_cast<size_t>(x)] / l;
  }
}

}  // namespace

Tensor attention(const Tensor& qIn, const Tensor& kIn, const Tensor& vIn, double scale, bool causal, double rate,
                 const Key& key) {
  const char* fn = "attention";
  const bool onGpu = gpuops::deviceOf("netops::attention", {&qIn, &kIn, &vIn}) != nullptr;
  const auto operand = onGpu ? detail::floatOperand : detail::hostF32;
  const Tensor q = operand(fn, "q", qIn), k = operand(fn, "k", kIn), v = operand(fn, "v", vIn);
  const Dims s = checkedDims(q, k, v);
  check(rate >= 0.0 && rate < 1.0, detail::where(fn) + "rate = " + std::to_string(rate) + " is outside [0, 1)");
  const float sc = static_cast<float>(scale), keep = static_cast<float>(1.0 / (1.0 - rate));
  const float dropBelow = static_cast<float>(rate);
  if (onGpu) return detail::attentionGpu(q, k, v, sc, causal, dropBelow, keep, key);
  Tensor out = tensor::empty({s.batch, s.tq, s.e});
  // kᵀ per batch, [b, d, tk rounded up to 16] with zeros past tk: a block's 16 scores are then
  // 16 independent fma chains over p on contiguous lanes (the same chains, vectorised).
  const int64_t tkPad = (s.tk + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  std::vector<float> kT(static_cast<size_t>(s.batch * s.d * tkPad), 0.0f);
  const float* pk = k.data<float>();
  core::parallelFor(s.batch * s.d, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t b = r / s.d, p = r % s.d;
      for (int64_t j = 0; j < s.tk; ++j) kT[static_cast<size_t>(r * tkPad + j)] = pk[(b * s.tk + j) * s.d + p];
    }
  });
  const RowJob job{q.data<float>(), kT.data(), v.data<float>(), out.data<float>(), s, tkPad, sc, causal,
                   rate > 0.0, dropBelow, keep, key};
  core::parallelFor(s.batch * s.tq, 4, [&](int64_t row0, int64_t row1) { attendRows(job, row0, row1); });
  return out;
}

Tensor causalMask(int64_t tq, int64_t tk) {
  detail::requireAtLeast("causalMask", "tq", tq, 0);
  detail::requireAtLeast("causalMask", "tk", tk, 0);
  Tensor mask = tensor::empty({tq, tk});
  float* p = mask.data<float>();
  for (int64_t i = 0; i < tq; ++i)
    for (int64_t j = 0; j < tk; ++j) p[i * tk + j] = j <= i + tk - tq ? 0.0f : -std::numeric_limits<float>::infinity();
  return mask;
}

}  // namespace gizml::netops
