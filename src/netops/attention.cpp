// Scaled dot-product attention with an online softmax over blocks of 16 keys, in the spec's
// steps so a GPU that takes them gives the same bits: each score an fma chain over p from 0,
// then scaled; the block's max m' = max(m, its scores) gives c = e^(m - m') and the weights
// e^(s - m'); l = l c + the weights in order; each a = a c, then fma(weight, v, a) in order; a / l.
// On a GPU the same steps run in gz_netops_attention (src/netops/kernels/netops.cu.inc).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "cpu/gemm.h"
#include "cpu/softmax_rows.h"
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

// The scores of queries [row0, row1) (of one batch b) against keys [0, cols): out [rows, cols] =
// q kᵀ by sgemm, each an fma chain over p from +0 (gemm.h's order for d <= kGemmKc: the bits of
// the chain in attendRows, with all of the MR x NR register tile busy instead of one block's
// lanes).
void scoreRows(const RowJob& job, int64_t row0, int64_t row1, int64_t cols, float* out) {
  const int64_t b = row0 / job.s.tq;
  cpu::sgemm(row1 - row0, cols, job.s.d, job.q + row0 * job.s.d, job.s.d, 1, job.kT + b * job.s.d * job.tkPad,
             job.tkPad, 1, out, cols, false);
}

// Queries this many at a time take their keys together (a divisor of kScoreRows).
constexpr int64_t kTogether = 4;

// Queries this many at a time have their scores computed first (a quarter MiB per 1,024 keys).
constexpr int64_t kScoreRows = 64;

// Queries [row0, row1) of the flattened [b tq], in one batch. Compiled also for FMA hardware (the
// fma chains give the same bits either way; without it each is a libm call).
GIZML_FMA_CLONES void attendRows(const RowJob& job, int64_t row0, int64_t row1) {
  const Dims& s = job.s;
  std::vector<float> acc(static_cast<size_t>(kTogether * s.e));
  // Keys [0, visible): all of them, or with `causal` those up to i + tk - tq.
  const auto visibleKeys = [&](int64_t i) {
    return job.causal ? std::clamp<int64_t>(i + s.tk - s.tq + 1, 0, s.tk) : s.tk;
  };
  // Scores in advance by sgemm where its order of additions is the chain's (d within one k block).
  const bool products = s.d <= cpu::kGemmKc;
  thread_local std::vector<float> scores;
  int64_t cols = 0;
  for (int64_t first = row0; first < row1; first += kTogether) {
    const int64_t rows = std::min(kTogether, row1 - first), b = first / s.tq;
    const int64_t chunk = (first - row0) % kScoreRows;
    if (products && chunk == 0) {
      const int64_t last = std::min(row1, first + kScoreRows);
      cols = (visibleKeys((last - 1) % s.tq) + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
      scores.resize(static_cast<size_t>((last - first) * cols));
      scoreRows(job, first, last, cols, scores.data());
    }
    const float* kb = job.kT + b * s.d * job.tkPad;
    const float* vb = job.v + b * s.tk * s.e;
    std::fill(acc.begin(), acc.end(), 0.0f);
    float m[kTogether], l[kTogether];
    int64_t visible[kTogether], most = 0;
    for (int64_t r = 0; r < rows; ++r) {
      m[r] = -std::numeric_limits<float>::infinity();
      l[r] = 0.0f;
      visible[r] = visibleKeys((first + r) % s.tq);
      most = std::max(most, visible[r]);
    }
    // The rows' blocks in lockstep: their chains (max, l, acc) are independent and overlap.
    for (int64_t j0 = 0; j0 < most; j0 += kKeyBlock)
      for (int64_t r = 0; r < rows; ++r) {
        if (j0 >= visible[r]) continue;
        const int64_t row = first + r, n = std::min(kKeyBlock, visible[r] - j0);
        float w[kKeyBlock] = {};
        if (products) {
          std::copy_n(scores.data() + (chunk + r) * cols + j0, n, w);
        } else {
          const float* qi = job.q + row * s.d;
          for (int64_t p = 0; p < s.d; ++p) {
            const float* kp = kb + p * job.tkPad + j0;
            for (int64_t jj = 0; jj < kKeyBlock; ++jj) w[jj] = std::fma(qi[p], kp[jj], w[jj]);
          }
        }
        float blockMax = m[r];
        for (int64_t jj = 0; jj < n; ++jj) {
          w[jj] = w[jj] * job.scale;
          blockMax = std::max(blockMax, w[jj]);
        }
        const float c = detail::gz_exp(m[r] - blockMax);
        l[r] *= c;
        cpu::expShifted(w, n, blockMax);
        for (int64_t jj = 0; jj < n; ++jj) l[r] += w[jj];
        if (job.dropping) {
          const uint64_t word0 = static_cast<uint64_t>(row * s.tk + j0);
          for (int64_t jj = 0; jj < n; ++jj)
            w[jj] = tensor::uniformWord(job.key, word0 + static_cast<uint64_t>(jj)) >= job.dropBelow ? w[jj] * job.keep
                                                                                                   : 0.0f;
        }
        // Each a = a c, then fma(weight, v, a) in key order.
        cpu::weightedRows(acc.data() + r * s.e, s.e, c, w, n, vb + j0 * s.e, s.e);
        m[r] = blockMax;
      }
    for (int64_t r = 0; r < rows; ++r) {
      float* o = job.out + (first + r) * s.e;
      for (int64_t x = 0; x < s.e; ++x) o[x] = acc[static_cast<size_t>(r * s.e + x)] / l[r];
    }
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
  // Tasks of kScoreRows queries of one batch (fewer at a batch's end).
  const int64_t perBatch = (s.tq + kScoreRows - 1) / kScoreRows;
  core::parallelFor(s.batch * perBatch, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row0 = t / perBatch * s.tq + t % perBatch * kScoreRows;
      attendRows(job, row0, std::min(row0 + kScoreRows, (t / perBatch + 1) * s.tq));
    }
  });
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
