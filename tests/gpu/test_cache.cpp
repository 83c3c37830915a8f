// The on-disk kernel cache: keys, whole files only, damaged files detected and removed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gpu/device.h"

namespace gpu = gizhw::gpu;

namespace {
struct TempCache {
  std::filesystem::path dir;
  std::string old;
  bool had = false;
  TempCache() {
    dir = std::filesystem::temp_directory_path() / ("gizml_cache_test_" + std::to_string(::getpid()));
    if (const char* v = std::getenv("XDG_CACHE_HOME")) {
      had = true;
      old = v;
    }
    setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  }
  ~TempCache() {
    if (had) setenv("XDG_CACHE_HOME", old.c_str(), 1);
    else unsetenv("XDG_CACHE_HOME");
    std::filesystem::remove_all(dir);
  }
};
}  // namespace

TEST(KernelCache, DirectoryFollowsXdg) {
  TempCache cache;
  EXPECT_EQ(gpu::kernelCacheDirectory(), (cache.dir / "gizml" / "kernels").string());
}

TEST(KernelCache, StoresAndLoads) {
  TempCache cache;
  const std::string key = gpu::hashText("source\nsm_90a\nnvrtc 13.0");
  EXPECT_EQ(key.size(), 32u);
  EXPECT_NE(key, gpu::hashText("source\nsm_80\nnvrtc 13.0"));
  std::vector<char> image(1000);
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>(i * 7);
  std::vector<char> loaded;
  EXPECT_FALSE(gpu::cacheLoad(key, loaded));
  gpu::cacheStore(key, image);
  ASSERT_TRUE(gpu::cacheLoad(key, loaded));
  EXPECT_EQ(loaded, image);
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(gpu::kernelCacheDirectory())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(KernelCache, DamagedFilesAreRebuilt) {
  TempCache cache;
  const std::string key = gpu::hashText("another kernel");
  std::vector<char> image(4096, 'x'), loaded;
  gpu::cacheStore(key, image);
  const auto path = std::filesystem::path(gpu::kernelCacheDirectory()) / (key + ".bin");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('y');  // a flipped byte: the checksum no longer matches
  }
  EXPECT_FALSE(gpu::cacheLoad(key, loaded));
  EXPECT_FALSE(std::filesystem::exists(path));
  gpu::cacheStore(key, image);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);  // a partial file
  EXPECT_FALSE(gpu::cacheLoad(key, loaded));
  gpu::cacheStore(key, image);
  EXPECT_TRUE(gpu::cacheLoad(key, loaded));
}

TEST(KernelCache, SizeClasses) {
  EXPECT_EQ(gpu::Allocator::sizeClass(0), 512u);
  EXPECT_EQ(gpu::Allocator::sizeClass(513), 1024u);
  EXPECT_EQ(gpu::Allocator::sizeClass((1u << 20) + 1), (1u << 20) + (1u << 17));
  for (size_t b : {size_t{3} << 20, size_t{1000000007}}) {
    EXPECT_GE(gpu::Allocator::sizeClass(b), b);
    EXPECT_LE(gpu::Allocator::sizeClass(b), b + b / 8);
  }
}
