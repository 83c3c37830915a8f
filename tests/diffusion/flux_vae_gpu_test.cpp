// FluxVae's decode on GPU tensors (FluxVae::to) against the host's on the tiny decoder of
// flux_vae_test.cpp. Skipped without a GPU; run on the emulator by ctest's emulator_test_diffusion.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "diffusion/weight_fixture.h"

using namespace gizml;

// A GPU's own exp (SiLU) and softmax differ from the host's in the last bits, and its
// convolutions may add in other orders. Measured on the emulator (x86-64, release): 9.5e-7 of
// pixels in about [-1, 1].
constexpr double kTolerance = 1e-4;

TEST(FluxVaeGpu, DecodeNearTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  const auto c = llm::loadSafetensors(test::diffusionData("vae_tiny_case.safetensors"));
  const diffusion::FluxVae host = diffusion::FluxVae::load(test::diffusionData("vae_tiny.safetensors"));
  const T::Tensor want = host.decode(c.at("latent"));
  const T::Tensor got = host.to(*gpu).decode(c.at("latent"));
  ASSERT_TRUE(got.onGpu());
  ASSERT_EQ(got.shape(), want.shape());
  const double err = test::maxAbsDiff(got.host(), want);
  std::printf("FluxVae on %s: max |gpu - host| = %.3g\n", gpu->describe().c_str(), err);
  EXPECT_LE(err, kTolerance);
}
