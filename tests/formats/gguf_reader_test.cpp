// The GGUF reader on files written by gguf-py's GGUFWriter and by llama.cpp.
#include "llm/formats/gguf.h"

#include <gizml/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "file_bytes.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

const std::string kWriterFile = test_paths::testData() + "/gguf/writer.gguf";

std::vector<uint32_t> bitsOf(const tensor::Tensor& t) {
  const std::vector<float> f = t.toFloats();
  std::vector<uint32_t> bits(f.size());
  std::memcpy(bits.data(), f.data(), f.size() * 4);
  return bits;
}

TEST(GgufReader, ScalarMetadataOfEveryType) {
  const GgufFile f(kWriterFile);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.getString("general.architecture"), "testarch");
  EXPECT_EQ(f.getInt("test.u8"), 200);
  EXPECT_EQ(f.getInt("test.i8"), -100);
  EXPECT_EQ(f.getInt("test.u16"), 60000);
  EXPECT_EQ(f.getInt("test.i16"), -30000);
  EXPECT_EQ(f.getInt("test.u32"), 4000000000);
  EXPECT_EQ(f.getInt("test.i32"), -2000000000);
  EXPECT_EQ(f.getFloat("test.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(f.value("test.u64").bits, 18000000000000000000ull);
  EXPECT_THROW(f.getInt("test.u64"), Error);  // beyond int64
  EXPECT_EQ(f.getInt("test.i64"), -9000000000000000000);
  EXPECT_EQ(f.getFloat("test.f64"), 2.718281828459045);
  EXPECT_TRUE(f.getBool("test.bool_true"));
  EXPECT_FALSE(f.getBool("test.bool_false"));
  EXPECT_EQ(f.getString("test.string"), "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93");
  EXPECT_EQ(f.getString("test.empty_string"), "");
  EXPECT_EQ(f.value("test.u16").type, GgufValueType::U16);
  EXPECT_EQ(f.value("test.f64").type, GgufValueType::F64);
}

TEST(GgufReader, ArraysAndNestedArrays) {
  const GgufFile f(kWriterFile);
  EXPECT_EQ(f.getStrings("test.strings"),
            (std::vector<std::string>{"a", "", "<0x0A>", "\xE2\x96\x81the"}));
  EXPECT_EQ(f.getInts("test.ints"), (std::vector<int64_t>{1, -2, 3, 2147483647}));
  EXPECT_EQ(f.value("test.ints").elementType, GgufValueType::I32);
  EXPECT_EQ(f.getInts("test.u16s"), (std::vector<int64_t>{0, 1, 65535}));
  EXPECT_EQ(f.getInts("test.i64s"), (std::vector<int64_t>{-(int64_t{1} << 62), 5}));
  EXPECT_EQ(f.getFloats("test.floats"),
            (std::vector<double>{0.5, -1.25, static_cast<double>(3.0e38f)}));
  const std::vector<double> f64s = f.getFloats("test.f64s");
  ASSERT_EQ(f64s.size(), 2u);
  EXPECT_EQ(f64s[0], 1.0 / 3.0);
  EXPECT_TRUE(std::signbit(f64s[1]));
  const GgufValue& bools = f.value("test.bools");
  EXPECT_EQ(bools.typeText(), "array of bool");
  EXPECT_EQ(bools.raw, (std::vector<uint8_t>{1, 0, 1}));

  const GgufValue& nested = f.value("test.nested");
  EXPECT_EQ(nested.elementType, GgufValueType::Array);
  ASSERT_EQ(nested.arrays.size(), 3u);
  EXPECT_EQ(nested.arrays[0].asInts(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(nested.arrays[1].asInts(), (std::vector<int64_t>{3}));
  EXPECT_EQ(nested.arrays[2].asStrings(), (std::vector<std::string>{"x", "y"}));
}

TEST(GgufReader, GettersNameKeyAndTypeOnError) {
  const GgufFile f(kWriterFile);
  try {
    f.getString("test.u32");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("writer.gguf: test.u32 is u32, not a string"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.getInt("no.such.key"), Error);
  EXPECT_THROW(f.getInts("test.strings"), Error);
  EXPECT_THROW(f.getBool("test.u8"), Error);
  EXPECT_EQ(f.getInt("no.such.key", 7), 7);
  EXPECT_EQ(f.getString("no.such.key", "x"), "x");
  EXPECT_EQ(f.getFloat("test.u8", 0.0), 200.0);
  EXPECT_THROW(f.getBool("test.u8", false), Error);  // present with another type
}

TEST(GgufReader, TensorInfosAndDequantization) {
  const GgufFile f(kWriterFile);
  ASSERT_EQ(f.tensors().size(), 14u);
  const GgufTensorInfo& q8 = f.tensor("q8_0");
  EXPECT_EQ(q8.type, GgmlType::Q8_0);
  EXPECT_EQ(q8.ne, (std::vector<int64_t>{64, 2, 2}));
  EXPECT_EQ(q8.shape(), (tensor::Shape{2, 2, 64}));
  EXPECT_EQ(q8.numel, 256);
  EXPECT_EQ(q8.bytes, 8u * 34u);
  EXPECT_EQ(f.tensorBytes(q8).size(), q8.bytes);
  EXPECT_EQ(f.findTensor("missing"), nullptr);
  EXPECT_THROW(f.tensor("missing"), Error);

  EXPECT_EQ(f.dequantize("f32").toFloats(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  for (const char* name : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k"}) {
    const tensor::Tensor got = f.dequantize(name);
    const tensor::Tensor expected = f.dequantize(std::string("expected.") + name);
    EXPECT_EQ(got.dtype(), DType::F32);
    EXPECT_EQ(got.shape(), expected.shape()) << name;
    EXPECT_EQ(bitsOf(got), bitsOf(expected)) << name;
  }
}

TEST(GgufReader, Version2AndInMemoryBytes) {
  std::vector<uint8_t> bytes = readFileBytes(kWriterFile);
  bytes[4] = 2;  // version 2 has version 3's layout (3 only adds big-endian files)
  const GgufFile f(bytes, "v2.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.path(), "v2.gguf");
  EXPECT_EQ(f.dequantize("f32").toFloats(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
}

TEST(GgufReader, LlamaVocabOnlyFile) {
  const GgufFile f(test_paths::sharedData() + "/tokenizer-tests/llama-spm.gguf");
  EXPECT_EQ(f.tensors().size(), 0u);
  EXPECT_EQ(f.getString("general.architecture"), "llama");
  EXPECT_EQ(f.getString("tokenizer.ggml.model"), "llama");
  const std::vector<std::string> tokens = f.getStrings("tokenizer.ggml.tokens");
  ASSERT_EQ(tokens.size(), 32000u);
  EXPECT_EQ(tokens[1], "<s>");
  EXPECT_EQ(f.getFloats("tokenizer.ggml.scores").size(), 32000u);
  EXPECT_EQ(f.getInts("tokenizer.ggml.token_type").size(), 32000u);
}

TEST(GgufReader, MissingFileNamesPath) {
  try {
    GgufFile f("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf"), std::string::npos);
  }
}

}  // namespace
