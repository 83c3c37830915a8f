// core/mapped_file.h: a file mapped read-only, copyOut reading a range from the file without
// mapping its pages, and the errors that name the path.
#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "common/smaps.h"
#include "common/temporary.h"

namespace {

using gizml::core::MappedFile;

// The resident kB of the mapping that holds address p.
int64_t residentKbOf(const void* p) { return std::stoll(gizml::test::smapsLine(p, "Rss:").substr(4)); }

// A temporary file of n bytes that are not all alike.
struct TempFile {
  std::string path = gizml::test::temporary("mapped", ".bin");
  std::vector<uint8_t> bytes;
  explicit TempFile(size_t n) : bytes(n) {
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + i / 4096);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
  }
};

}  // namespace

TEST(MappedFile, CopyOutReadsTheFileWithoutMappingItsPages) {
  const TempFile file(8 << 20);
  const MappedFile map(file.path);
  ASSERT_EQ(map.size(), file.bytes.size());
  std::vector<uint8_t> out(file.bytes.size());
  map.copyOut(map.data(), out.size(), out.data());
  EXPECT_EQ(out, file.bytes);
  EXPECT_EQ(residentKbOf(map.data()), 0) << "copyOut mapped pages of the file";
  std::vector<uint8_t> part(1000);
  map.copyOut(map.data() + 4095, part.size(), part.data());  // across a page
  EXPECT_TRUE(std::equal(part.begin(), part.end(), file.bytes.begin() + 4095));
  // The same bytes through the map, which maps them (the measure above can see pages).
  EXPECT_TRUE(std::equal(map.data(), map.data() + map.size(), file.bytes.begin()));
  EXPECT_GT(residentKbOf(map.data()), 0);
}

TEST(MappedFile, RangesOutsideTheMapAreErrorsNamingThePath) {
  const TempFile file(10000);
  const MappedFile map(file.path);
  std::vector<uint8_t> out(20000);
  expectError([&] { map.copyOut(map.data() + 9000, 1001, out.data()); }, {"outside", file.path});
  expectError([&] { map.copyOut(map.data(), 10001, out.data()); }, {"outside", file.path});
  expectError([] { MappedFile("/nonexistent/gizml/weights.bin"); }, {"/nonexistent/gizml/weights.bin"});
}
