// core/mapped_file.h: a file mapped read-only, copyOut reading a range from the file without
// mapping its pages, and the errors that name the path.
#include "core/mapped_file.h"

#include <gizml/error.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

namespace {

using gizml::core::MappedFile;

// The resident kB of the mapping that holds address p, from /proc/self/smaps (-1 if none is found).
int64_t residentKbOf(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-') inside = begin <= address && address < end;
    if (inside && line.rfind("Rss:", 0) == 0) return std::stoll(line.substr(4));
  }
  return -1;
}

struct TempFile {
  std::filesystem::path path;
  std::vector<uint8_t> bytes;
  explicit TempFile(size_t n)
      : path(std::filesystem::temp_directory_path() / ("gizml_mapped_" + std::to_string(::getpid()) + ".bin")),
        bytes(n) {
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(i * 131 + i / 4096);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(n));
  }
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST(MappedFile, CopyOutReadsTheFileWithoutMappingItsPages) {
  const TempFile file(8 << 20);
  const MappedFile map(file.path.string());
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
  const MappedFile map(file.path.string());
  std::vector<uint8_t> out(20000);
  for (auto [offset, n] : {std::pair<size_t, size_t>{9000, 1001}, {0, 10001}}) {
    try {
      map.copyOut(map.data() + offset, n, out.data());
      ADD_FAILURE() << "no error for " << offset << " + " << n;
    } catch (const gizml::Error& e) {
      EXPECT_NE(std::string(e.what()).find(file.path.string()), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(MappedFile("/nonexistent/gizml/weights.bin"), gizml::Error);
}
