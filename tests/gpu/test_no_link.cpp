// Nothing of the GPU stack is linked: the test binary and giz load the driver and NVRTC with
// dlopen only. And without a driver, open() gives none instead of an error.
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include "common/test_paths.h"

namespace {
std::string ldd(const std::string& path) {
  FILE* p = popen(("ldd " + path + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  if (p) pclose(p);
  return out;
}
void expectNoGpuLibraries(const std::string& path) {
  const std::string deps = ldd(path);
  for (const char* lib : {"libcuda", "libcudart", "libnvrtc", "libamdhip64", "libhiprtc"})
    EXPECT_EQ(deps.find(lib), std::string::npos) << path << " links " << lib << ":\n" << deps;
}
}  // namespace

TEST(NoLink, TestBinaryAndGiz) {
  expectNoGpuLibraries(std::filesystem::canonical("/proc/self/exe").string());
  const std::string giz = test_paths::buildDir() + "/giz";
  if (std::filesystem::exists(giz)) expectNoGpuLibraries(giz);
  else ADD_FAILURE() << giz << " was not built";
}

TEST(NoLink, OpenNeverThrows) {
  std::optional<gizhw::gpu::Gpu> gpu;
  EXPECT_NO_THROW(gpu = gizhw::gpu::open());
  EXPECT_NO_THROW(gizhw::gpu::deviceCount());
  EXPECT_FALSE(gizhw::gpu::open(-1).has_value());
  EXPECT_FALSE(gizhw::gpu::open(1 << 20).has_value());
}
