// FluxVae's decode and Flux2Vae's encode and decode on GPU tensors (FluxVae::to, Flux2Vae::to)
// against the host's on the tiny VAEs of flux_vae_test.cpp and flux2_vae_test.cpp. Skipped
// without a GPU; run on the emulator by ctest's emulator_test_diffusion.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gizml/safetensors.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "diffusion/weight_fixture.h"

using namespace gizml;

// A GPU's own exp (SiLU) and softmax differ from the host's in the last bits, and its
// convolutions may add in other orders. Measured on the emulator (x86-64, release): FLUX.1's
// 9.5e-7 of pixels in about [-1, 1]; FLUX.2's encode 7.8e-7, decode 1.2e-6.
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

TEST(Flux2VaeGpu, EncodeAndDecodeNearTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  const auto c = llm::loadSafetensors(test::diffusionData("flux2_vae_tiny_case.safetensors"));
  const diffusion::Flux2Vae host = diffusion::Flux2Vae::load(test::diffusionData("flux2_vae_tiny.safetensors"));
  const diffusion::Flux2Vae device = host.to(*gpu);
  const T::Tensor encoded = device.encode(c.at("pixels"));
  const T::Tensor decoded = device.decode(c.at("latents"));
  ASSERT_TRUE(encoded.onGpu());
  ASSERT_TRUE(decoded.onGpu());
  const T::Tensor encodedWant = host.encode(c.at("pixels")), decodedWant = host.decode(c.at("latents"));
  ASSERT_EQ(encoded.shape(), encodedWant.shape());
  ASSERT_EQ(decoded.shape(), decodedWant.shape());
  const double encodeErr = test::maxAbsDiff(encoded.host(), encodedWant);
  const double decodeErr = test::maxAbsDiff(decoded.host(), decodedWant);
  std::printf("Flux2Vae on %s: max |gpu - host| encode %.3g, decode %.3g\n", gpu->describe().c_str(), encodeErr,
              decodeErr);
  EXPECT_LE(encodeErr, kTolerance);
  EXPECT_LE(decodeErr, kTolerance);
}
