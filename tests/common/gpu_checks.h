#pragma once
// What the GPU test suites share: a fixture that opens the GPU (or skips), ptxas over generated
// PTX, and bit equality of a GPU result with the CPU's.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>
#include <unistd.h>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace gizml::test {

/// A suite of GPU tests: each test gets the first GPU (a real one, or the host emulator under
/// GIZML_GPU_EMULATOR=1) and is skipped where there is none.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = gizhw::gpu::open();
    if (!gpu_) GTEST_SKIP() << "no GPU found (no libcuda.so.1 / libamdhip64.so with a device, no GIZML_GPU_EMULATOR=1)";
  }
  gizhw::gpu::Gpu& gpu() { return *gpu_; }
  /// t copied to the GPU.
  T::Tensor on(const T::Tensor& t) const { return t.on(*gpu_); }
  std::optional<gizhw::gpu::Gpu> gpu_;
};

/// Under AddressSanitizer: checks for leaks now and skips LeakSanitizer's exit-time check, whose
/// tracer crashes ("Tracer caught signal 11") while a GPU compiler's threads live (ROCm's hipRTC;
/// NVRTC's too, seen under `ctest -j2` on an Intel machine), after the test passed. A leak so far
/// still fails the test. Call before the compiler is loaded.
inline void checkLeaksBeforeGpuCompiler() {
#if defined(__SANITIZE_ADDRESS__)
  __lsan_do_leak_check();
#endif
}

/// Opens a test that runs a GPU compiler: the leak check above, then a skip naming why where the
/// compiler (NVRTC or hipRTC) is absent. A macro because GTEST_SKIP must return from the test body.
#define GIZML_SKIP_WITHOUT_GPU_COMPILER(available, name)                        \
  do {                                                                          \
    ::gizml::test::checkLeaksBeforeGpuCompiler();                              \
    std::string gpuCompilerWhy;                                                 \
    if (!(available)(nullptr, &gpuCompilerWhy))                                 \
      GTEST_SKIP() << name " not found: " << gpuCompilerWhy;                    \
  } while (0)
#define GIZML_SKIP_WITHOUT_NVRTC() GIZML_SKIP_WITHOUT_GPU_COMPILER(::gizhw::gpu::nvrtcAvailable, "NVRTC")
#define GIZML_SKIP_WITHOUT_HIPRTC() GIZML_SKIP_WITHOUT_GPU_COMPILER(::gizhw::gpu::hiprtcAvailable, "hipRTC")

inline const char* kPtxas = "/usr/local/cuda/bin/ptxas";

/// Whether the CUDA toolkit's ptxas is installed.
inline bool havePtxas() { return std::filesystem::exists(kPtxas); }

/// Assembles PTX with ptxas for `arch` (a test failure naming `what` when it fails); nothing
/// where ptxas is absent.
inline void assemblePtx(const std::string& ptx, const std::string& arch, const std::string& what) {
  if (!havePtxas()) return;
  const auto file = std::filesystem::temp_directory_path() / ("gizml_kernel_" + std::to_string(::getpid()) + ".ptx");
  std::ofstream(file) << ptx;
  const std::string command = std::string(kPtxas) + " -arch=" + arch + " " + file.string() + " -o /dev/null 2>&1";
  FILE* p = popen(command.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string output;
  char buf[512];
  while (fgets(buf, sizeof buf, p)) output += buf;
  const int status = pclose(p);
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << "ptxas " << arch << " failed on " << what << ":\n" << output;
}

/// Bit equality of a GPU result's values with the CPU's (NaN equal to NaN; -0 differs from +0).
inline void expectBits(const T::Tensor& gpuResult, const T::Tensor& cpu, const std::string& what) {
  ASSERT_TRUE(gpuResult.onGpu()) << what;
  const T::Tensor g = gpuResult.host();
  ASSERT_EQ(g.dtype(), cpu.dtype()) << what;
  ASSERT_EQ(g.shape(), cpu.shape()) << what;
  if (isFloat(cpu.dtype()) || cpu.dtype() == DType::Bool) {
    const auto a = g.toFloats(), b = cpu.toFloats();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      uint32_t x, y;
      std::memcpy(&x, &a[i], 4);
      std::memcpy(&y, &b[i], 4);
      ASSERT_EQ(x, y) << what << ": element " << i << " is " << a[i] << " on the GPU, " << b[i] << " on the CPU";
    }
  } else {
    EXPECT_EQ(g.toInts(), cpu.toInts()) << what;
  }
}

}  // namespace gizml::test
