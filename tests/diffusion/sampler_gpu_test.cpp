// res_multistep on GPU tensors gives the host's bits: its tensor operations are + - * / only,
// which the GPU rounds as the CPU does (docs/tensor.md, "On a GPU"). Skipped without a GPU.
#include <gizhw/gpu.h>
#include <gizml/diffusion.h>
#include <gtest/gtest.h>

using namespace gizml;

namespace {

// Eight Z-Image Turbo steps from `x` with a fake denoiser 0.5 x + 0.1 sigma, on x's device.
T::Tensor sample(T::Tensor x) {
  const std::vector<float> sigmas = diffusion::flowSigmas(8);
  diffusion::ResMultistep sampler(sigmas);
  for (int64_t i = 0; i < sampler.steps(); ++i) {
    T::Tensor half = T::scalar(0.5), shift = T::scalar(0.1f * sigmas[static_cast<size_t>(i)]);
    if (x.onGpu()) {
      const gizhw::gpu::Gpu gpu(x.storage()->gpu());
      half = half.on(gpu);
      shift = shift.on(gpu);
    }
    x = sampler.step(i, x, x.mul(half).add(shift));
  }
  return x;
}

}  // namespace

TEST(ResMultistepGpu, SameBitsAsTheHost) {
  const auto gpu = gizhw::gpu::open();
  if (!gpu) GTEST_SKIP() << "no GPU found: GPU test skipped";
  const T::Tensor x = diffusion::torchRandn(42, {1, 16, 8, 8});
  const T::Tensor host = sample(x), device = sample(x.on(*gpu));
  ASSERT_TRUE(device.onGpu());
  EXPECT_EQ(device.host().toFloats(), host.toFloats());
}
