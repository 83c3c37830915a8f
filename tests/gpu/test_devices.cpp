// The emulator's several devices (GIZML_GPU_EMULATOR_DEVICES), each with its own memory
// (GIZML_GPU_EMULATOR_MEMORY's comma list), shown as CUDA_VISIBLE_DEVICES lets them be. The ctest
// entry emulator_devices_test_gpu sets 3 devices of 64, 128 and 192 MiB and
// CUDA_VISIBLE_DEVICES=2,0; skipped elsewhere.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace gpu = gizhw::gpu;

bool configured() {
  const char* devices = std::getenv("GIZML_GPU_EMULATOR_DEVICES");
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return devices && std::strcmp(devices, "3") == 0 && visible && std::strcmp(visible, "2,0") == 0;
}

TEST(EmulatorDevices, VisibleDevicesKeepTheirOrderAndMemory) {
  if (!configured()) GTEST_SKIP() << "needs the ctest entry emulator_devices_test_gpu's settings";
  // Emulated devices 2 and 0, as ordinals 0 and 1; the third is hidden.
  ASSERT_EQ(gpu::deviceCount(), 2);
  const std::optional<gpu::Gpu> a = gpu::open(0), b = gpu::open(1);
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(gpu::open(2));
  EXPECT_EQ(a->properties().memoryBytes, 192ull << 20);
  EXPECT_EQ(b->properties().memoryBytes, 64ull << 20);
  EXPECT_EQ(b->describe().substr(0, 7), "cuda:1 ");

  // Each its own memory: 100 MiB fit on the first, not on the second, and take none of its.
  const uint64_t bFree = b->freeBytes();
  const gpu::Buffer big = a->allocate(100ull << 20);
  EXPECT_EQ(b->freeBytes(), bFree);
  try {
    b->allocate(100ull << 20);
    ADD_FAILURE() << "100 MiB fit in a device of 64";
  } catch (const gizml::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda:1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }

  // A tensor goes from one device to the other and back unchanged.
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  gizml::tensor::Tensor host = gizml::tensor::empty({1000});
  std::copy(values.begin(), values.end(), host.data<float>());
  const gizml::tensor::Tensor onB = host.on(*a).on(*b);
  EXPECT_EQ(onB.storage()->gpu(), b->device());
  EXPECT_EQ(onB.toFloats(), values);
}

}  // namespace
