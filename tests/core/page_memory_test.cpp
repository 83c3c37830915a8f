// core/page_memory.h: large arrays are zeroed mapped pages advised as huge pages, small ones
// come from the heap, and a PageVector behaves as a std::vector.
#include "core/page_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/smaps.h"

namespace {

using gizml::core::kMappedBytes;
using gizml::core::PageVector;

// The VmFlags of the mapping that holds address p ("" if none is found).
std::string vmFlagsOf(const void* p) { return gizml::test::smapsLine(p, "VmFlags:"); }

TEST(PageMemory, LargeArraysAreZeroedPagesAdvisedAsHugePages) {
  const size_t bytes = 4 * kMappedBytes + 123;
  auto* p = static_cast<uint8_t*>(gizml::core::mapPages(bytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_TRUE(std::all_of(p, p + bytes, [](uint8_t b) { return b == 0; }));
  p[bytes - 1] = 7;  // writable to its last byte
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    EXPECT_NE(vmFlagsOf(p).find(" hg"), std::string::npos) << vmFlagsOf(p);  // MADV_HUGEPAGE took
  }
  gizml::core::unmapPages(p, bytes);
}

TEST(PageMemory, PageVectorMapsOnlyLargeArrays) {
  PageVector<float> large(kMappedBytes / sizeof(float), 1.5f), small(100, 2.5f);
  EXPECT_TRUE(std::all_of(large.begin(), large.end(), [](float v) { return v == 1.5f; }));
  EXPECT_TRUE(std::all_of(small.begin(), small.end(), [](float v) { return v == 2.5f; }));
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    EXPECT_NE(vmFlagsOf(large.data()).find(" hg"), std::string::npos);
    EXPECT_EQ(vmFlagsOf(small.data()).find(" hg"), std::string::npos);  // the heap's
  }
  large.resize(3 * large.size(), 0.f);  // grows into a new mapping, keeping its values
  EXPECT_EQ(large.front(), 1.5f);
  EXPECT_EQ(large[kMappedBytes / sizeof(float) - 1], 1.5f);
  EXPECT_EQ(large.back(), 0.f);
  PageVector<float> copy = large;
  EXPECT_EQ(copy, large);
}

}  // namespace
