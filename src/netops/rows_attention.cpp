// Attention over packed rows on the host, exact in F32: attentionRows / attendedRows (with a
// transformer's QK norm and rotary, HeadPrep), crossAttentionRows and NATTEN's 3D neighborhood
// attention. Every query takes the steps of netops' `attention`: keys in blocks of 16, each
// score q . k by fma in order then scaled, the block's maximum rescaling the running sum and
// output, the weights added in order, the result a / l.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "netops/attention_rows_gpu.h"
#include "netops/rows_common.h"
#include "tensor/gpu/tensor_ops.h"

namespace gizml::netops {
namespace {

constexpr int64_t kKeyBlock = 16;

// out[0 .. e) = softmax over j of (q . keys[j]) scale, times values[j].
void attendOne(const float* q, int64_t d, const std::vector<const float*>& keys,
               const std::vector<const float*>& values, int64_t e, float scale, float* out) {
  float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
  std::fill(out, out + e, 0.0f);
  const int64_t count = static_cast<int64_t>(keys.size());
  float s[kKeyBlock];
  for (int64_t j0 = 0; j0 < count; j0 += kKeyBlock) {
    const int64_t jn = std::min(kKeyBlock, count - j0);
    float blockMax = m;
    for (int64_t j = 0; j < jn; ++j) {
      const float* k = keys[static_cast<size_t>(j0 + j)];
      float acc = 0.0f;
      for (int64_t p = 0; p < d; ++p) acc = std::fma(q[p], k[p], acc);
      s[j] = acc * scale;
      blockMax = std::max(blockMax, s[j]);
    }
    const float c = std::exp(m - blockMax);
    l *= c;
    for (int64_t i = 0; i < e; ++i) out[i] *= c;
    for (int64_t j = 0; j < jn; ++j) {
      const float wgt = std::exp(s[j] - blockMax);
      l += wgt;
      const float* v = values[static_cast<size_t>(j0 + j)];
      for (int64_t i = 0; i < e; ++i) out[i] = std::fma(wgt, v[i], out[i]);
    }
    m = blockMax;
  }
  for (int64_t i = 0; i < e; ++i) out[i] /= l;
}

void checkHeads(const char* fn, int64_t heads, int64_t head) {
  check(heads > 0, std::string(fn) + ": heads must be positive, got " + std::to_string(heads));
  check(head > 0, std::string(fn) + ": head must be positive, got " + std::to_string(head));
}

// qkv's rows must be 3 heads head wide.
int64_t checkQkv(const char* fn, const Tensor& qkv, int64_t heads, int64_t head) {
  checkHeads(fn, heads, head);
  rows::requireRank(fn, "qkv", qkv, 2);
  check(qkv.size(1) == 3 * heads * head,
        std::string(fn) + ": qkv's rows are " + std::to_string(qkv.size(1)) + " wide, but 3 heads head = 3 x " +
            std::to_string(heads) + " x " + std::to_string(head) + " = " + std::to_string(3 * heads * head));
  return qkv.size(0);
}

// Checks p for n rows of heads of `head` from sequence row row0; its rotary half (0: none).
int64_t checkPrep(const char* fn, const HeadPrep& p, int64_t n, int64_t head, int64_t row0) {
  rows::requireShape(fn, "prep.qw", p.qw, {head});
  rows::requireShape(fn, "prep.kw", p.kw, {head});
  check(p.eps >= 0.0, std::string(fn) + ": prep.eps must not be negative");
  // Default (0-d) or zero-width cos and sin: no rotary.
  const bool rotary = !(p.cos.ndim() == 0 && p.sin.ndim() == 0) && (p.cos.numel() != 0 || p.sin.numel() != 0);
  if (!rotary) return 0;
  rows::requireRank(fn, "prep.cos", p.cos, 2);
  rows::requireShape(fn, "prep.sin", p.sin, p.cos.shape());
  const int64_t half = p.cos.size(1);
  check(2 * half <= head, std::string(fn) + ": prep.cos turns pairs of 2 x " + std::to_string(half) +
                              " values, more than a head of " + std::to_string(head));
  check(row0 >= 0 && row0 + n <= p.cos.size(0),
        std::string(fn) + ": rows " + std::to_string(row0) + " to " + std::to_string(row0 + n) +
            " need that many rows of prep.cos, which has " + std::to_string(p.cos.size(0)));
  return half;
}

// Applies p to the q and k heads of n rows of data (rows 3 heads head apart), in place.
void prepRows(const char* fn, float* data, int64_t n, int64_t heads, int64_t head, const HeadPrep& p, int64_t row0) {
  rows::requireHost(fn, {{"prep.qw", &p.qw}, {"prep.kw", &p.kw}, {"prep.cos", &p.cos}, {"prep.sin", &p.sin}});
  const int64_t half = checkPrep(fn, p, n, head, row0);
  Tensor cosv, sinv;
  if (half > 0) {
    cosv = rows::f32Values(fn, "prep.cos", p.cos);
    sinv = rows::f32Values(fn, "prep.sin", p.sin);
  }
  const Tensor qw = rows::f32Values(fn, "prep.qw", p.qw), kw = rows::f32Values(fn, "prep.kw", p.kw);
  const float eps = static_cast<float>(p.eps);
  const int64_t width = 3 * heads * head;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t part = 0; part < 2; ++part) {
      const float* w = (part == 0 ? qw : kw).data<float>();
      for (int64_t h = 0; h < heads; ++h) {
        float* v = data + r * width + part * heads * head + h * head;
        const float inv = rows::inverseRms(v, head, 1, eps);
        for (int64_t i = 0; i < head; ++i) v[i] = v[i] * inv * w[i];
        if (half == 0) continue;
        const float* c = cosv.data<float>() + (row0 + r) * half;
        const float* s = sinv.data<float>() + (row0 + r) * half;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
}

// The attention of rows [0, queries) of data (prepared q, k, v rows) into out ([queries, heads head]).
void attendRows(const float* data, int64_t n, int64_t heads, int64_t head, int64_t group, int64_t queries,
                float* out) {
  const int64_t width = 3 * heads * head, hd = heads * head;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head)));
  // Queries are independent: threads change the speed, not the bits.
  core::parallelFor(queries, 1, [&](int64_t begin, int64_t end) {
    std::vector<const float*> keys, values;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t g0 = group > 0 ? r / group * group : 0, g1 = group > 0 ? std::min(g0 + group, n) : n;
      for (int64_t h = 0; h < heads; ++h) {
        keys.clear();
        values.clear();
        for (int64_t j = g0; j < g1; ++j) {
          keys.push_back(data + j * width + hd + h * head);
          values.push_back(data + j * width + 2 * hd + h * head);
        }
        attendOne(data + r * width + h * head, head, keys, values, head, scale, out + r * hd + h * head);
      }
    }
  });
}

// Checks group, queries and prep for n rows; the number of query rows.
int64_t checkRowsArgs(const char* fn, int64_t n, int64_t group, const std::vector<HeadPrep>& prep, int64_t queries) {
  check(group >= 0, std::string(fn) + ": group must not be negative, got " + std::to_string(group));
  check(queries >= 0 && queries <= n, std::string(fn) + ": queries " + std::to_string(queries) +
                                          " is not within the " + std::to_string(n) + " rows");
  check(prep.size() <= 1, std::string(fn) + ": prep holds at most one HeadPrep, got " + std::to_string(prep.size()));
  return queries > 0 ? queries : n;
}

// The checked, prepared copy of qkv's rows and the number of query rows.
std::vector<float> preparedRows(const char* fn, const Tensor& qkv, int64_t heads, int64_t head, int64_t group,
                                const std::vector<HeadPrep>& prep, int64_t queries, int64_t& n, int64_t& nq) {
  rows::requireHost(fn, {{"qkv", &qkv}});
  n = checkQkv(fn, qkv, heads, head);
  nq = checkRowsArgs(fn, n, group, prep, queries);
  const Tensor values = rows::f32Values(fn, "qkv", qkv);
  std::vector<float> data(values.data<float>(), values.data<float>() + qkv.numel());
  if (!prep.empty()) prepRows(fn, data.data(), n, heads, head, prep[0], 0);
  return data;
}

}  // namespace

void headPrepInPlace(const Tensor& qkv, int64_t n, int64_t heads, int64_t head, const HeadPrep& p, int64_t row0) {
  constexpr const char* fn = "headPrepInPlace";
  const int64_t count = checkQkv(fn, qkv, heads, head);
  check(n >= 0 && n <= count, std::string(fn) + ": n " + std::to_string(n) + " is not within qkv's " +
                                  std::to_string(count) + " rows");
  check(row0 >= 0, std::string(fn) + ": row0 must not be negative, got " + std::to_string(row0));
  if (qkv.onGpu()) {
    detail::headPrepGpu(fn, qkv, n, heads, head, p, checkPrep(fn, p, n, head, row0), row0);
    return;
  }
  rows::requireOutput(fn, "qkv", qkv, qkv.shape(), false);
  prepRows(fn, qkv.data<float>(), n, heads, head, p, row0);
}

namespace {

// attentionRows, its errors naming fn (attentionRows or attendedRows).
void attendInto(const char* fn, const Tensor& qkv, int64_t heads, int64_t head, bool quantized, int64_t group,
                const Tensor& out, const std::vector<HeadPrep>& prep, int64_t queries) {
  if (qkv.onGpu() || out.onGpu()) {
    const int64_t n = checkQkv(fn, qkv, heads, head);
    const int64_t nq = checkRowsArgs(fn, n, group, prep, queries);
    rows::requireShape(fn, "out", out, {nq, heads * head});
    const int64_t half = prep.empty() ? 0 : checkPrep(fn, prep[0], n, head, 0);
    detail::attentionRowsGpu(fn, qkv, n, heads, head, quantized, group, nq, out, prep, half);
    return;
  }
  int64_t n = 0, nq = 0;
  const std::vector<float> data = preparedRows(fn, qkv, heads, head, group, prep, queries, n, nq);
  rows::requireOutput(fn, "out", out, {nq, heads * head}, true);
  std::vector<float> result(static_cast<size_t>(nq * heads * head));
  attendRows(data.data(), n, heads, head, group, nq, result.data());
  rows::storeValues(out, result.data());
}

}  // namespace

void attentionRows(const Tensor& qkv, int64_t heads, int64_t head, bool quantized, int64_t group,
                   const Tensor& out, const std::vector<HeadPrep>& prep, int64_t queries) {
  attendInto("attentionRows", qkv, heads, head, quantized, group, out, prep, queries);
}

Tensor attendedRows(const Tensor& qkv, int64_t heads, int64_t head, bool quantized, int64_t group,
                    const std::vector<HeadPrep>& prep, int64_t queries) {
  const int64_t n = checkQkv("attendedRows", qkv, heads, head);
  const tensor::Shape shape{queries > 0 ? std::min(queries, n) : n, heads * head};
  // Where qkv is: BF16 on a GPU, F32 on the host.
  Tensor out = qkv.onGpu() ? gpuops::empty(shape, DType::BF16, qkv.storage()->gpu()) : tensor::empty(shape);
  attendInto("attendedRows", qkv, heads, head, quantized, group, out, prep, queries);
  return out;
}

void crossAttentionRows(const Tensor& q, const Tensor& kv, int64_t heads, int64_t head, const Tensor& out) {
  constexpr const char* fn = "crossAttentionRows";
  checkHeads(fn, heads, head);
  const int64_t hd = heads * head;
  rows::requireRank(fn, "q", q, 2);
  rows::requireRank(fn, "kv", kv, 2);
  check(q.size(1) == hd, std::string(fn) + ": q's rows are " + std::to_string(q.size(1)) +
                             " wide, but heads head = " + std::to_string(hd));
  check(kv.size(1) == 2 * hd, std::string(fn) + ": kv's rows are " + std::to_string(kv.size(1)) +
                                  " wide, but 2 heads head = " + std::to_string(2 * hd));
  check(kv.size(0) > 0, std::string(fn) + ": kv has no rows (no keys to attend)");
  const int64_t nq = q.size(0), nk = kv.size(0);
  if (q.onGpu() || kv.onGpu() || out.onGpu()) {
    rows::requireShape(fn, "out", out, {nq, hd});
    detail::crossAttentionRowsGpu(fn, q, kv, heads, head, out);
    return;
  }
  rows::requireHost(fn, {{"q", &q}, {"kv", &kv}, {"out", &out}});
  rows::requireOutput(fn, "out", out, {nq, hd}, true);
  const Tensor qv = rows::f32Values(fn, "q", q), kvv = rows::f32Values(fn, "kv", kv);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head)));
  std::vector<float> result(static_cast<size_t>(nq * hd));
  std::vector<const float*> keys(static_cast<size_t>(nk)), values(static_cast<size_t>(nk));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < nk; ++j) {
      keys[static_cast<size_t>(j)] = kvv.data<float>() + j * 2 * hd + h * head;
      values[static_cast<size_t>(j)] = kvv.data<float>() + j * 2 * hd + hd + h * head;
    }
    core::parallelFor(nq, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        attendOne(qv.data<float>() + r * hd + h * head, head, keys, values, head, scale,
                  result.data() + r * hd + h * head);
    });
  }
  rows::storeValues(out, result.data());
}

Tensor neighborhood3d(const Tensor& qkv, const std::vector<int64_t>& grid, const std::vector<int64_t>& kernel,
                      int64_t heads, double scale) {
  constexpr const char* fn = "neighborhood3d";
  check(grid.size() == 3, std::string(fn) + ": grid must be [T, H, W], got " + std::to_string(grid.size()) + " values");
  check(kernel.size() == 3,
        std::string(fn) + ": kernel must be [kt, kh, kw], got " + std::to_string(kernel.size()) + " values");
  for (size_t a = 0; a < 3; ++a) {
    check(grid[a] > 0, std::string(fn) + ": grid[" + std::to_string(a) + "] must be positive, got " +
                           std::to_string(grid[a]));
    check(kernel[a] > 0 && kernel[a] % 2 == 1, std::string(fn) + ": kernel[" + std::to_string(a) +
                                                   "] must be odd and positive, got " + std::to_string(kernel[a]));
  }
  check(heads > 0, std::string(fn) + ": heads must be positive, got " + std::to_string(heads));
  rows::requireRank(fn, "qkv", qkv, 2);
  const int64_t positions = grid[0] * grid[1] * grid[2];
  check(qkv.size(0) == positions, std::string(fn) + ": qkv has " + std::to_string(qkv.size(0)) +
                                      " rows, the grid T H W = " + std::to_string(positions));
  check(qkv.size(1) > 0 && qkv.size(1) % (3 * heads) == 0,
        std::string(fn) + ": qkv's rows are " + std::to_string(qkv.size(1)) + " wide, not 3 heads head for heads " +
            std::to_string(heads));
  const int64_t head = qkv.size(1) / (3 * heads), hd = heads * head;
  if (qkv.onGpu()) return detail::neighborhood3dGpu(fn, qkv, grid, kernel, heads, head, static_cast<float>(scale));
  const Tensor values = rows::f32Values(fn, "qkv", qkv);
  const float* data = values.data<float>();
  // Each axis' window: the kernel clipped to the axis, centred, shifted inward at the edges.
  int64_t length[3];
  auto windowStart = [&](int64_t a, int64_t i) {
    return std::clamp(i - length[a] / 2, int64_t{0}, grid[static_cast<size_t>(a)] - length[a]);
  };
  for (int64_t a = 0; a < 3; ++a) length[a] = std::min(kernel[static_cast<size_t>(a)], grid[static_cast<size_t>(a)]);
  Tensor out = tensor::empty({positions, hd});
  float* op = out.data<float>();
  const float s = static_cast<float>(scale);
  core::parallelFor(positions, 1, [&](int64_t begin, int64_t end) {
    std::vector<const float*> keys, vals;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t t = r / (grid[1] * grid[2]), y = r / grid[2] % grid[1], x = r % grid[2];
      const int64_t t0 = windowStart(0, t), y0 = windowStart(1, y), x0 = windowStart(2, x);
      for (int64_t h = 0; h < heads; ++h) {
        keys.clear();
        vals.clear();
        for (int64_t kt = t0; kt < t0 + length[0]; ++kt)
          for (int64_t ky = y0; ky < y0 + length[1]; ++ky)
            for (int64_t kx = x0; kx < x0 + length[2]; ++kx) {
              const int64_t j = (kt * grid[1] + ky) * grid[2] + kx;
              keys.push_back(data + j * 3 * hd + hd + h * head);
              vals.push_back(data + j * 3 * hd + 2 * hd + h * head);
            }
        attendOne(data + r * 3 * hd + h * head, head, keys, vals, head, s, op + r * hd + h * head);
      }
    }
  });
  return out;
}

}  // namespace gizml::netops
