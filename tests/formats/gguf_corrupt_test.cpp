// Malformed GGUF input: every one must give gizml::Error, never a crash, hang or huge allocation.
#include <gizml/error.h>
#include <gtest/gtest.h>

#include <random>

#include "file_bytes.h"
#include "llm/formats/gguf.h"
#include "llm/quant/ggml_dequant.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

const std::string kWriterFile = test_paths::testData() + "/gguf/writer.gguf";

// Little-endian GGUF bytes built by hand.
struct Builder {
  std::vector<uint8_t> bytes;
  template <class T>
  Builder& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
    return *this;
  }
  Builder& str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
    return *this;
  }
  Builder& header(uint64_t tensors, uint64_t keys) {
    return put<uint32_t>(0x46554747).put<uint32_t>(3).put<uint64_t>(tensors).put<uint64_t>(keys);
  }
  // One tensor info: name, ne, type, offset.
  Builder& info(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Builder& padTo(size_t alignment) {
    while (bytes.size() % alignment) bytes.push_back(0);
    return *this;
  }
  Builder& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
};

std::string errorOf(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile f(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expectError(const Builder& b, const std::string& fragment) {
  const std::string message = errorOf(b.bytes);
  EXPECT_NE(message.find("bad.gguf"), std::string::npos) << message;
  EXPECT_NE(message.find(fragment), std::string::npos) << "wanted '" << fragment << "' in: " << message;
}

// Opens the bytes and, when they parse, touches every tensor; only gizml::Error may escape.
void openAndUse(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile f(bytes, "fuzzed.gguf");
    for (const GgufTensorInfo& t : f.tensors()) {
      if (canDequantize(t.type) && t.numel < (1 << 20)) f.dequantize(t);
    }
  } catch (const Error&) {
  }
}

TEST(GgufCorrupt, MinimalValidFile) {
  Builder b;
  b.header(1, 0).info("w", {32, 2}, 0, 0).padTo(32).zeros(256);
  const GgufFile f(b.bytes, "ok.gguf");
  EXPECT_EQ(f.tensors()[0].bytes, 256u);
  EXPECT_EQ(f.dataOffset() % 32, 0u);
}

TEST(GgufCorrupt, HeaderProblems) {
  expectError(Builder().put<uint32_t>(0x46554746).put<uint32_t>(3).zeros(16), "not a GGUF file");
  expectError(Builder().put<uint32_t>(0x46554747).put<uint32_t>(1).zeros(16), "version 1");
  expectError(Builder().put<uint32_t>(0x46554747).put<uint32_t>(0x03000000).zeros(16), "big-endian");
  expectError(Builder().put<uint32_t>(0x46554747), "truncated");
  expectError(Builder(), "truncated");
}

TEST(GgufCorrupt, AbsurdCountsAndLengths) {
  expectError(Builder().header(0, uint64_t{1} << 60), "metadata claims");
  expectError(Builder().header(uint64_t{1} << 62, 0), "tensor infos claims");
  expectError(Builder().header(0, 1).put<uint64_t>(~uint64_t{0}).zeros(8), "truncated: metadata key");
  // A string value of length 2^64 - 1.
  expectError(Builder().header(0, 1).str("k").put<uint32_t>(8).put<uint64_t>(~uint64_t{0}),
              "truncated: metadata string");
  // Arrays of 2^61 u64s, strings and arrays.
  for (uint32_t type : {10u, 8u, 9u}) {
    expectError(Builder().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(type).put<uint64_t>(
                    uint64_t{1} << 61),
                "k claims");
  }
}

TEST(GgufCorrupt, BadValues) {
  expectError(Builder().header(0, 1).str("k").put<uint32_t>(13).zeros(8), "unknown value type 13");
  expectError(Builder().header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(99).put<uint64_t>(0),
              "unknown array element type 99");
  expectError(Builder().header(0, 1).str("k").put<uint32_t>(7).put<uint8_t>(2), "bool");
  expectError(Builder().header(0, 2).str("k").put<uint32_t>(0).put<uint8_t>(1).str("k").put<uint32_t>(0).put<uint8_t>(1),
              "duplicate metadata key k");
  Builder deep;
  deep.header(0, 1).str("k").put<uint32_t>(9);
  for (int i = 0; i < 100; ++i) deep.put<uint32_t>(9).put<uint64_t>(1);
  expectError(deep, "nested deeper");
  expectError(Builder().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48), "not a power of two");
  expectError(Builder().header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(0), "not a power of two");
  expectError(Builder().header(0, 1).str("general.alignment").put<uint32_t>(8).str("32"), "not an integer");
}

TEST(GgufCorrupt, BadTensorInfos) {
  expectError(Builder().header(1, 0).info("w", {1, 1, 1, 1, 1}, 0, 0), "5 dimensions");
  expectError(Builder().header(1, 0).info("w", {4}, 4, 0), "unknown type 4");
  expectError(Builder().header(1, 0).info("w", {4}, 77, 0), "unknown type 77");
  expectError(Builder().header(1, 0).info("w", {48}, 2, 0).padTo(32).zeros(64), "not a multiple of Q4_0's block size 32");
  expectError(Builder().header(1, 0).info("w", {uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0), "overflows");
  expectError(Builder().header(1, 0).info("w", {~uint64_t{0}}, 0, 0), "overflows");
  expectError(Builder().header(1, 0).info("w", {uint64_t{1} << 62}, 0, 0), "byte size overflows");
  expectError(Builder().header(1, 0).info("w", {8}, 0, 16).padTo(32).zeros(64), "not a multiple of the alignment");
  expectError(Builder().header(1, 0).info("w", {8}, 0, 0).padTo(32).zeros(31), "run past the end");
  expectError(Builder().header(1, 0).info("w", {8}, 0, ~uint64_t{0} - 31).padTo(32).zeros(32), "run past the end");
  expectError(Builder().header(2, 0).info("a", {16}, 0, 0).info("b", {8}, 0, 32).padTo(32).zeros(128), "overlap");
  expectError(Builder().header(2, 0).info("a", {8}, 0, 0).info("a", {8}, 0, 32).padTo(32).zeros(64), "duplicate tensor name");
  // An unsupported type opens but does not dequantize.
  Builder iq;
  iq.header(1, 0).info("w", {256}, 16, 0).padTo(32).zeros(66);
  const GgufFile f(iq.bytes, "iq.gguf");
  EXPECT_THROW(f.dequantize("w"), Error);
}

TEST(GgufCorrupt, EveryTruncationOfARealFile) {
  const std::vector<uint8_t> bytes = readFileBytes(kWriterFile);
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + n);
    ASSERT_NE(errorOf(cut), "") << "truncated at " << n;
  }
}

TEST(GgufCorrupt, FlippedBytesGiveErrorsOrValidFiles) {
  const std::vector<uint8_t> bytes = readFileBytes(kWriterFile);
  const size_t headerEnd = GgufFile(kWriterFile).dataOffset();
  for (size_t i = 0; i < headerEnd; ++i) {
    for (uint8_t mask : {0x01, 0x80, 0xFF}) {
      std::vector<uint8_t> changed = bytes;
      changed[i] ^= mask;
      openAndUse(changed);
    }
  }
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> changed = bytes;
    for (int k = 0; k < 4; ++k) changed[rng() % headerEnd] = static_cast<uint8_t>(rng());
    openAndUse(changed);
  }
}

}  // namespace
