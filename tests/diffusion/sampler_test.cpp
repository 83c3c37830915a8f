// gizml::diffusion's schedule and res_multistep against tests/reference/make_sampler_fixtures.py
// (ComfyUI's code transcribed in numpy float32, with a fake denoiser x * a_i + b_i).
// The sigmas must be bit-equal. x after each step within kTolerance relative to the largest |x|
// of that step: the step's scalars come from log/exp/expm1, correctly rounded in the fixtures
// and possibly an ulp off in another C library (as in ComfyUI's torch, CPU or CUDA). With
// glibc 2.36's logf/expf/expm1f every step is bit-equal (max_relative_error 0).
#include <gizml/diffusion.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "common/fixture_file.h"
#include "common/test_paths.h"

using namespace gizml;

namespace {

constexpr double kTolerance = 1e-6;  // about 8 float32 ulps of the step's largest value

const std::vector<fixture::Case>& cases() {
  static const std::vector<fixture::Case> all =
      fixture::loadFixtures(test_paths::testData() + "/diffusion/sampler.bin");
  return all;
}

std::vector<float> floats(const fixture::Array& a) {
  std::vector<float> v(static_cast<size_t>(a.numel()));
  if (!v.empty()) std::memcpy(v.data(), a.data.data(), v.size() * sizeof(float));
  return v;
}

T::Tensor tensorOf(const fixture::Array& a, const T::Shape& shape) {
  T::Tensor t = T::empty(shape);
  std::memcpy(t.rawData(), a.data.data(), a.data.size());
  return t;
}

TEST(FlowSigmas, MatchesComfyUI) {
  for (const fixture::Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> got = diffusion::flowSigmas(c.attr("steps"), c.attr("shift_e6") * 1e-6);
    const std::vector<float> want = floats(c.array("sigmas"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "sigma " << i;
  }
}

TEST(FlowSigmas, ZImageTurboEightSteps) {
  const std::vector<float> want = {1.0f,  0.95454544f, 0.9f, 0.8333333f, 0.75f,
                                   0.64285713f, 0.5f, 0.3f, 0.0f};
  EXPECT_EQ(diffusion::flowSigmas(8), want);
}

TEST(FlowSigmas, BadArguments) {
  EXPECT_THROW(diffusion::flowSigmas(0), Error);
  EXPECT_THROW(diffusion::flowSigmas(1001), Error);
  EXPECT_THROW(diffusion::flowSigmas(8, 0.0), Error);
}

TEST(ResMultistep, MatchesComfyUI) {
  double worst = 0.0;
  for (const fixture::Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const int64_t steps = c.attr("steps");
    const fixture::Array& x0 = c.array("x0");
    const std::vector<float> a = floats(c.array("a")), b = floats(c.array("b"));
    const std::vector<float> xs = floats(c.array("xs"));
    diffusion::ResMultistep sampler(floats(c.array("sigmas")));
    ASSERT_EQ(sampler.steps(), steps);
    T::Tensor x = tensorOf(x0, x0.shape);
    const size_t n = static_cast<size_t>(x0.numel());
    for (int64_t i = 0; i < steps; ++i) {
      const T::Tensor denoised = x.mul(T::scalar(a[i])).add(T::scalar(b[i]));
      x = sampler.step(i, x, denoised);
      const std::vector<float> got = x.toFloats();
      ASSERT_EQ(got.size(), n);
      const float* want = xs.data() + static_cast<size_t>(i) * n;
      double scale = 0.0;
      for (size_t e = 0; e < n; ++e) scale = std::max(scale, std::fabs(static_cast<double>(want[e])));
      double err = 0.0;
      for (size_t e = 0; e < n; ++e) err = std::max(err, std::fabs(static_cast<double>(got[e]) - want[e]));
      worst = std::max(worst, err / scale);
      EXPECT_LE(err, kTolerance * scale) << "step " << i;
    }
  }
  std::ostringstream text;
  text << std::setprecision(3) << worst;
  ::testing::Test::RecordProperty("max_relative_error", text.str());
}

TEST(ResMultistep, StepsRunInOrder) {
  diffusion::ResMultistep sampler(diffusion::flowSigmas(2));
  const T::Tensor x = T::ones({4}), d = T::zeros({4});
  EXPECT_THROW(sampler.step(1, x, d), Error);
  const T::Tensor x1 = sampler.step(0, x, d);
  EXPECT_THROW(sampler.step(1, x1, T::zeros({5})), Error);
  const T::Tensor x2 = sampler.step(1, x1, d);
  EXPECT_THROW(sampler.step(2, x2, d), Error);
}

TEST(ResMultistep, BadSigmas) {
  EXPECT_THROW(diffusion::ResMultistep({1.0f}), Error);
  EXPECT_THROW(diffusion::ResMultistep({1.0f, 0.0f, 0.0f}), Error);
  EXPECT_THROW(diffusion::ResMultistep({0.5f, 0.7f, 0.0f}), Error);
  EXPECT_THROW(diffusion::ResMultistep({1.0f, -0.5f}), Error);
}

}  // namespace
