#include "cpu/quant_dot.h"

#include <gizml/error.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "core/thread_pool.h"
#include "cpu/cpu_features.h"
#include "cpu/quant_dot_kernels.h"

namespace gizml::cpu {

const float* exponentScaleFractions() {
  static const auto table = [] {
    std::array<float, 32> t{};
    for (int k = 0; k < 32; ++k) t[static_cast<size_t>(k)] = std::exp2(static_cast<float>(k) / 32.0f);
    return t;
  }();
  return table.data();
}

float exponentScale(float base, int e) {
  const int u = e + 1;
  return base * std::ldexp(exponentScaleFractions()[u & 31], (u >> 5) - 8);
}

namespace {
bool actsAvx2() { return cpuFeatures().avx2 && cpuFeatures().fma; }
}  // namespace

const char* quantizeActsKernel() { return actsAvx2() ? "avx2" : "portable"; }

void checkActsFit(const char* who, const QuantActs& x, int64_t cols, int64_t group) {
  if (x.cols != cols || x.group != group) [[unlikely]]
    throw Error(std::string(who) + ": activations of " + std::to_string(x.cols) + " columns in groups of " +
                std::to_string(x.group) + " do not fit weights of " + std::to_string(cols) + " in groups of " +
                std::to_string(group));
}

void quantizeActs(const float* x, int64_t rows, int64_t cols, int64_t group, QuantActs& out) {
  if (group <= 0 || cols % group != 0) [[unlikely]]
    throw Error("quantizeActs: " + std::to_string(cols) + " columns are not whole groups of " + std::to_string(group));
  const int64_t groups = cols / group;
  out.rows = rows;
  out.cols = cols;
  out.group = group;
  out.codes.resize(static_cast<size_t>(rows * cols));
  out.scale.resize(static_cast<size_t>(rows * groups));
  out.sum.resize(static_cast<size_t>(rows * groups));
  static const bool avx2 = actsAvx2();
  // Groups apart on the threads for a prefill's rows (each group's codes are its own).
  core::parallelFor(rows * groups, std::max<int64_t>(1, 16384 / group), [&](int64_t b0, int64_t b1) {
    int8_t* codes = out.codes.data();
    float *scale = out.scale.data(), *sum = out.sum.data();
    if (avx2 && group % 8 == 0)
      return quant_kernels::quantizeGroupsAvx2(x + b0 * group, b1 - b0, group, codes + b0 * group, scale + b0, sum + b0);
    for (int64_t b = b0; b < b1; ++b) {
      const float* v = x + b * group;
      int8_t* q = codes + b * group;
      float amax = 0.0f;
      for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f;
      int total = 0;
      for (int64_t i = 0; i < group; ++i) {
        const int c = static_cast<int>(std::nearbyint(v[i] * inv));
        q[i] = static_cast<int8_t>(c);
        total += c;
      }
      scale[b] = d;
      sum[b] = d * static_cast<float>(total);
    }
  });
}

void quantDot(const QuantWeights& w, int64_t o0, int64_t o1, const QuantActs& x, float* y, int64_t ldy) {
  checkActsFit("quantDot", x, w.cols, w.group);
  quant_kernels::dotScalar(w, o0, o1, x, y, ldy);
}

void quantMatmul(const QuantWeights& w, const QuantActs& x, float* y) {
  constexpr int64_t kBlock = 16;
  const int64_t blocks = (w.rows + kBlock - 1) / kBlock;
  core::parallelFor(blocks, 1, [&](int64_t b0, int64_t b1) {
    quantDot(w, b0 * kBlock, std::min(w.rows, b1 * kBlock), x, y, w.rows);
  });
}

}  // namespace gizml::cpu
