// Linear over quantized weights (the int8-activation kernels of cpu/quant_dot.h) against the same
// weights dequantized (Linear::row) times the f32 activations, in double. The documented
// tolerance is the activations' int8 rounding: each value moves by at most half its group's step
// amax/127, so |y - y_ref| <= sum_c |w_c| * step_g(c) / 2 (plus f32 rounding).
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "llm/ops/linear.h"
#include "llm/quant/converted_model.h"
#include "llm_test_util.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;
using gizml::llm::ops::Linear;

namespace {

void expectWithinActivationRounding(const Linear& layer, int64_t rows, int64_t group) {
  const int64_t in = layer.in(), out = layer.out();
  std::mt19937 rng(static_cast<unsigned>(in * 7 + out));
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * in));
  for (float& v : x) v = dist(rng);
  tensor::Tensor xt = tensor::empty({rows, in}), yt = tensor::empty({rows, out}), wt = tensor::empty({1, in});
  std::copy(x.begin(), x.end(), xt.data<float>());
  layer.apply(xt, yt);
  const std::vector<float> y = yt.toFloats();
  double worstShare = 0;  // of the bound, reported
  for (int64_t o = 0; o < out; ++o) {
    layer.row(o, wt);
    const std::vector<float> w = wt.toFloats();
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x.data() + r * in;
      double want = 0, bound = 0;
      for (int64_t g = 0; g < in / group; ++g) {
        float amax = 0;
        for (int64_t c = g * group; c < (g + 1) * group; ++c) amax = std::max(amax, std::fabs(xr[c]));
        for (int64_t c = g * group; c < (g + 1) * group; ++c) {
          want += static_cast<double>(w[static_cast<size_t>(c)]) * xr[c];
          bound += std::fabs(static_cast<double>(w[static_cast<size_t>(c)])) * (amax / 127.0 / 2 + 1e-6 * std::fabs(xr[c]));
        }
      }
      const double err = std::fabs(y[static_cast<size_t>(r * out + o)] - want);
      ASSERT_LE(err, bound) << "output " << o << " of activation row " << r;
      worstShare = std::max(worstShare, err / bound);
    }
  }
  std::printf("  %lld x %lld: worst error %.3f of the int8 rounding bound\n", static_cast<long long>(out),
              static_cast<long long>(in), worstShare);
}

}  // namespace

TEST(QuantLinear, WithinTheInt8ActivationRoundingOfTheDequantizedProduct) {
  for (int bits : {4, 6, 8}) {
    const std::string folder = freshFolder(std::to_string(bits) + "bits");
    convert(test_paths::testData() + "/models/qwen3/hf", folder, Bits{.layers = bits, .head = bits, .group = 32});
    const ConvertedModel model = ConvertedModel::open(folder);
    SCOPED_TRACE(std::to_string(bits) + " bits");
    // q_proj [128, 64], down_proj [64, 128] and the head [512, 64] of the tiny Qwen3.
    expectWithinActivationRounding(Linear(model, "model.layers.0.self_attn.q_proj.weight", 128, 64), 7, 32);
    expectWithinActivationRounding(Linear(model, "model.layers.1.mlp.down_proj.weight", 64, 128), 1, 32);
    expectWithinActivationRounding(Linear(model, "lm_head.weight", 512, 64), 3, 32);
  }
}
