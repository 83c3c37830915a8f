// ZImageDit on GPU tensors (ZImageDit::to) against the host's forward on the tiny DiT of
// z_image_dit_test.cpp, F32 and with W8A8 linears. Skipped without a GPU; run on the emulator by
// ctest's emulator_test_diffusion.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "diffusion/weight_fixture.h"

using namespace gizml;

namespace {

// Relative to the host output's largest value. The GPU's exp, sin, cos, tanh and silu are its
// own library's (docs/tensor.md), and an INT8 code on either side of a rounding step moves a
// product by a whole step (far less than INT8's own 1.6% from F32). Measured on the emulator
// (x86-64, release, sigma 0.3): F32 8.3e-7, INT8 2.0e-7.
constexpr double kF32Relative = 1e-4;
constexpr double kInt8Relative = 1e-2;

double relativeError(diffusion::ZImageConfig::Linears linears, const gizhw::gpu::Gpu& gpu) {
  diffusion::ZImageConfig config;
  config.ropeAxes = {4, 8, 12};
  config.linears = linears;
  const auto c = llm::loadSafetensors(test::diffusionData("dit_tiny_case.safetensors"));
  const diffusion::ZImageDit host = diffusion::ZImageDit::load(test::diffusionData("dit_tiny.safetensors"), config);
  const diffusion::ZImageDit device = host.to(gpu);
  const double sigma = c.at("sigmas").toFloats()[1];
  const T::Tensor want = host.forward(c.at("latent"), sigma, c.at("caption"));
  const T::Tensor got = device.forward(c.at("latent"), sigma, c.at("caption"));
  EXPECT_TRUE(got.onGpu());
  return test::maxAbsDiff(got.host(), want) / want.abs().max().item();
}

}  // namespace

TEST(ZImageDitGpu, ForwardNearTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  const double f32 = relativeError(diffusion::ZImageConfig::Linears::F32, *gpu);
  const double int8 = relativeError(diffusion::ZImageConfig::Linears::Int8, *gpu);
  std::printf("ZImageDit on %s vs the host, relative: F32 %.3g, INT8 %.3g\n", gpu->describe().c_str(), f32, int8);
  EXPECT_LE(f32, kF32Relative);
  EXPECT_LE(int8, kInt8Relative);
}
