// The safetensors reader on files written by the safetensors package, and on broken headers;
// saveSafetensors' files read back.
#include "llm/formats/safetensors.h"

#include <gizml/error.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "common/temporary.h"
#include "file_bytes.h"
#include "llm/formats/safetensors_checkpoint.h"
#include "common/test_paths.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

const std::string kDir = test_paths::testData() + "/safetensors";

std::vector<uint32_t> bitsOf(const tensor::Tensor& t) {
  const std::vector<float> f = t.toFloats();
  std::vector<uint32_t> bits(f.size());
  std::memcpy(bits.data(), f.data(), f.size() * 4);
  return bits;
}

// A file from a header text and `dataBytes` zero bytes.
std::vector<uint8_t> fileOf(const std::string& header, size_t dataBytes) {
  std::vector<uint8_t> bytes(8 + header.size() + dataBytes, 0);
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

std::string errorOf(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile f(bytes, "bad.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expectError(const std::string& header, size_t dataBytes, const std::string& fragment) {
  const std::string message = errorOf(fileOf(header, dataBytes));
  EXPECT_NE(message.find("bad.safetensors"), std::string::npos) << header << " -> " << message;
  EXPECT_NE(message.find(fragment), std::string::npos)
      << header << ": wanted '" << fragment << "' in: " << message;
}

TEST(Safetensors, EveryNumpyDtype) {
  const SafetensorsFile f(kDir + "/dtypes.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "np");
  EXPECT_EQ(f.metadata().at("note"), "gizml \xE2\x9C\x93");
  EXPECT_EQ(f.tensors().size(), 15u);

  const tensor::Tensor f32 = f.load("f32");
  EXPECT_EQ(f32.dtype(), DType::F32);
  EXPECT_EQ(f32.shape(), (tensor::Shape{2, 3}));
  EXPECT_EQ(f32.toFloats(), (std::vector<float>{-0.75f, -0.5f, -0.25f, 0, 0.25f, 0.5f}));
  EXPECT_EQ(f.load("f16").dtype(), DType::F16);
  EXPECT_EQ(f.load("f16").toFloats(), (std::vector<float>{1, -2.5f, 65504, halfToFloat(1)}));
  EXPECT_EQ(f.load("i64").toInts(), (std::vector<int64_t>{-(int64_t{1} << 62), -1, 0, int64_t{1} << 62}));
  EXPECT_EQ(f.load("i32").shape(), (tensor::Shape{2, 1}));
  EXPECT_EQ(f.load("i32").toInts(), (std::vector<int64_t>{-2147483648LL, 2147483647}));
  EXPECT_EQ(f.load("i16").dtype(), DType::I32);
  EXPECT_EQ(f.load("i16").toInts(), (std::vector<int64_t>{-32768, 0, 32767}));
  EXPECT_EQ(f.load("u16").toInts(), (std::vector<int64_t>{0, 65535}));
  EXPECT_EQ(f.load("u32").dtype(), DType::I64);
  EXPECT_EQ(f.load("u32").toInts(), (std::vector<int64_t>{0, 4294967295LL}));
  EXPECT_EQ(f.load("u64").toInts(), (std::vector<int64_t>{0, 9223372036854775807LL}));
  EXPECT_EQ(f.load("i8").toInts(), (std::vector<int64_t>{-128, 127, 0}));
  EXPECT_EQ(f.load("u8").dtype(), DType::U8);
  EXPECT_EQ(f.load("u8").toInts(), (std::vector<int64_t>{250, 251, 252, 253, 254, 255}));
  EXPECT_EQ(f.load("bool").dtype(), DType::Bool);
  EXPECT_EQ(f.load("bool").toInts(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f.load("scalar").shape(), tensor::Shape{});
  EXPECT_EQ(f.load("scalar").item(), 2.5);
  EXPECT_EQ(f.load("empty").shape(), (tensor::Shape{0, 4}));
  EXPECT_TRUE(f.tensorBytes(f.tensor("empty")).empty());

  // F64 rounds to F32 exactly as numpy's astype does (1e300 to inf, NaN stays NaN).
  const std::vector<uint32_t> f64 = bitsOf(f.load("f64"));
  const std::vector<uint32_t> expected = bitsOf(f.load("expected.f64"));
  ASSERT_EQ(f64.size(), expected.size());
  for (size_t i = 0; i < f64.size(); ++i) {
    const bool bothNaN = std::isnan(f.load("f64").toFloats()[i]) && std::isnan(f.load("expected.f64").toFloats()[i]);
    if (!bothNaN) {
      EXPECT_EQ(f64[i], expected[i]) << "f64 value " << i;
    }
  }

  const SafetensorsTensorInfo& raw = f.tensor("u16");
  EXPECT_EQ(raw.dtype, SafetensorsDType::U16);
  ASSERT_EQ(f.tensorBytes(raw).size(), 4u);
  EXPECT_EQ(f.tensorBytes(raw)[2], 0xFF);
  EXPECT_THROW(f.tensor("missing"), Error);
}

TEST(Safetensors, Bf16AndFloat8AgainstMlDtypes) {
  const SafetensorsFile f(kDir + "/low_precision.safetensors");
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_EQ(f.load("bf16").dtype(), DType::BF16);
  EXPECT_EQ(bitsOf(f.load("bf16")), bitsOf(f.load("expected.bf16")));
  for (const char* name : {"f8_e4m3", "f8_e5m2"}) {
    const tensor::Tensor got = f.load(name);
    const tensor::Tensor expected = f.load(std::string("expected.") + name);
    EXPECT_EQ(got.dtype(), DType::F32);
    EXPECT_EQ(got.shape(), expected.shape());
    const std::vector<float> g = got.toFloats(), e = expected.toFloats();
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(e[i])) {
        EXPECT_TRUE(std::isnan(g[i])) << name << " code " << i;
      } else {
        EXPECT_EQ(bitsOf(got)[i], bitsOf(expected)[i]) << name << " code " << i << ": " << g[i];
      }
    }
  }
  EXPECT_EQ(f.tensor("f8_e4m3").dtype, SafetensorsDType::F8_E4M3);
}

// tests/reference/make_float8_fixtures.py: torch's own FP8 codes and its .float() of each, the
// conversion ComfyUI's FP8 weights go through: the same bits (NaN codes NaN of the same sign).
TEST(Safetensors, Float8AgainstTorch) {
  const SafetensorsFile f(kDir + "/float8_torch.safetensors");
  EXPECT_EQ(f.tensor("e4m3").dtype, SafetensorsDType::F8_E4M3);
  EXPECT_EQ(f.tensor("e5m2").dtype, SafetensorsDType::F8_E5M2);
  for (const char* name : {"e4m3", "e5m2"}) {
    const tensor::Tensor got = f.load(name), expected = f.load(std::string("expected.") + name);
    ASSERT_EQ(got.shape(), (tensor::Shape{256}));
    const std::vector<float> g = got.toFloats(), e = expected.toFloats();
    const std::vector<uint32_t> gb = bitsOf(got), eb = bitsOf(expected);
    for (size_t i = 0; i < 256; ++i) {
      if (std::isnan(e[i])) {
        EXPECT_TRUE(std::isnan(g[i]) && std::signbit(g[i]) == std::signbit(e[i])) << name << " code " << i;
      } else {
        EXPECT_EQ(gb[i], eb[i]) << name << " code " << i << ": " << g[i] << ", torch " << e[i];
      }
    }
  }
}

TEST(Safetensors, ShardedCheckpoint) {
  for (const std::string& path : {kDir + "/sharded", kDir + "/sharded/model.safetensors.index.json"}) {
    const SafetensorsCheckpoint c(path);
    EXPECT_EQ(c.shards().size(), 2u);
    EXPECT_EQ(c.names(), (std::vector<std::string>{"embed.weight", "layers.0.weight",
                                                   "layers.1.weight", "lm_head.weight"}));
    EXPECT_NE(c.shardOf("lm_head.weight").path().find("model-00002-of-00002"), std::string::npos);
    EXPECT_EQ(c.load("lm_head.weight").toInts(), (std::vector<int64_t>{7, 8, 9}));
    EXPECT_EQ(c.load("embed.weight").shape(), (tensor::Shape{4, 3}));
    EXPECT_EQ(c.tensor("layers.0.weight").dtype, SafetensorsDType::F16);
    EXPECT_FALSE(c.has("missing"));
    EXPECT_THROW(c.load("missing"), Error);
  }
  const SafetensorsCheckpoint single(kDir + "/dtypes.safetensors");
  EXPECT_EQ(single.names().size(), 15u);
}

// An index in a temporary folder next to copies of the fixture shards.
class BrokenIndex : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gizml_index_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
      std::filesystem::copy_file(kDir + "/sharded/" + shard, dir_ / shard,
                                 std::filesystem::copy_options::overwrite_existing);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string errorWithIndex(const std::string& json) {
    std::ofstream(dir_ / "model.safetensors.index.json") << json;
    try {
      SafetensorsCheckpoint c(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::filesystem::path dir_;
};

TEST_F(BrokenIndex, Rejected) {
  const std::string a = "\"model-00001-of-00002.safetensors\"", b = "\"model-00002-of-00002.safetensors\"";
  const std::string all = "\"embed.weight\": " + a + ", \"layers.0.weight\": " + a +
                          ", \"layers.1.weight\": " + b + ", \"lm_head.weight\": " + b;
  EXPECT_EQ(errorWithIndex("{\"weight_map\": {" + all + "}}"), "");
  EXPECT_NE(errorWithIndex("{\"weight_map\": {" + all + ", \"extra\": " + a + "}}").find("does not hold it"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": {\"embed.weight\": " + b + "}}").find("does not hold it"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": {\"embed.weight\": " + a + "}}").find("is not mapped"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": {\"x\": \"../x.safetensors\"}}").find("not a plain file name"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": {\"x\": \"missing.safetensors\"}}").find("missing.safetensors"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": [1]}").find("no weight_map"), std::string::npos);
  EXPECT_NE(errorWithIndex("{\"weight_map\": ").find("not valid JSON"), std::string::npos);
}

TEST(Safetensors, BadHeaders) {
  const std::string t = R"("t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  EXPECT_EQ(errorOf(fileOf("{" + t + "}", 8)), "");
  EXPECT_EQ(errorOf(fileOf("{" + t + "}    ", 8)), "");  // space padding, as the crate writes
  EXPECT_NE(errorOf({1, 2, 3}).find("too short"), std::string::npos);
  expectError("{" + t, 8, "not valid JSON");
  expectError("[1]", 8, "not a JSON object");
  expectError("", 8, "not a JSON object");
  expectError("{\"t\": 5}", 0, "is not an object");
  expectError(R"({"t": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", 1, "unsupported dtype F4");
  expectError(R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", 8, "no dtype");
  expectError(R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", 8, "no shape");
  expectError(R"({"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8, "non-negative");
  expectError(R"({"t": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})", 8, "non-negative");
  expectError(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8, "data_offsets pair");
  expectError(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", 8, "end before");
  expectError(R"({"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", 8, "8 bytes for shape [3]");
  expectError(R"({"t": {"dtype": "F64", "shape": [2147483648, 2147483648], "data_offsets": [0, 8]}})", 8, "bytes for shape");
  expectError(R"({"t": {"dtype": "F32", "shape": [9223372036854775807, 4], "data_offsets": [0, 8]}})", 8, "overflows");
  expectError(R"({"t": {"dtype": "F32", "shape": [99999999999999999999], "data_offsets": [0, 8]}})", 8, "non-negative");
  expectError("{" + t + "}", 12, "file holds 12");
  expectError("{" + t + "}", 4, "file holds 4");
  expectError("{" + t + R"(, "u": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12, "gap or overlap");
  expectError("{" + t + R"(, "u": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]}})", 12, "gap or overlap");
  expectError("{" + t + ", " + t + "}", 8, "names 't' twice");
  expectError(R"({"__metadata__": {"a": 1}})", 0, "not a string");
  expectError(R"({"__metadata__": [1]})", 0, "not an object");
  expectError("{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}", 0, "nests too deeply");
  // A header length past the file, and one past the crate's limit.
  std::vector<uint8_t> bytes = fileOf("{}", 0);
  bytes[0] = 3;
  EXPECT_NE(errorOf(bytes).find("exceeds"), std::string::npos);
  bytes[0] = 0;
  bytes[7] = 1;
  EXPECT_NE(errorOf(bytes).find("exceeds"), std::string::npos);
}

// The bytes of a host tensor, in row-major order.
std::vector<uint8_t> bytesOf(const tensor::Tensor& t) {
  const tensor::Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.rawData());
  return {p, p + dtypeBytes(c.dtype(), c.numel())};
}

// A file of the running test alone (ctest runs the tests of this program side by side), removed
// when the process exits.
std::string savedPath() {
  const std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return test::temporary("saved_" + name, ".safetensors");
}

TEST(Safetensors, SavedFilesReadBackTheSame) {
  // Every dtype the reader gives (a scalar and an empty tensor among them), and a transposed view.
  std::map<std::string, tensor::Tensor> tensors = loadSafetensors(kDir + "/dtypes.safetensors");
  tensors["bf16"] = loadSafetensors(kDir + "/low_precision.safetensors").at("bf16");
  tensors["transposed"] = tensor::tensor({2, 3}, {1, 2, 3, 4, 5, 6}).transpose(0, 1);
  const std::string saved = savedPath();
  saveSafetensors(saved, tensors);
  const std::map<std::string, tensor::Tensor> back = loadSafetensors(saved);
  ASSERT_EQ(back.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const tensor::Tensor& b = back.at(name);
    EXPECT_EQ(b.dtype(), t.dtype()) << name;
    EXPECT_EQ(b.shape(), t.shape()) << name;
    EXPECT_EQ(bytesOf(b), bytesOf(t)) << name;
  }
  EXPECT_EQ(back.at("transposed").toFloats(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  // The header is padded to whole 8 bytes, so the data starts 8-byte aligned.
  const std::vector<uint8_t> file = readFileBytes(saved);
  uint64_t headerBytes;
  std::memcpy(&headerBytes, file.data(), 8);
  EXPECT_EQ(headerBytes % 8, 0u);
}

TEST(Safetensors, SavedF64StaysF64InTheFile) {
  const std::string saved = savedPath();
  saveSafetensors(saved, {{"d", tensor::tensor({2}, {0.1, 1e300}, DType::F64)}});
  const SafetensorsFile f(saved);
  EXPECT_EQ(f.tensor("d").dtype, SafetensorsDType::F64);
  double stored[2];
  std::memcpy(stored, f.tensorBytes(f.tensor("d")).data(), 16);
  EXPECT_EQ(stored[0], 0.1);
  EXPECT_EQ(stored[1], 1e300);
  EXPECT_EQ(f.load("d").dtype(), DType::F32);  // as every F64 file reads
}

TEST(Safetensors, SaveRefusesWhatTheFormatCannotHold) {
  const std::string saved = savedPath();
  const auto errorOfSave = [&](const std::map<std::string, tensor::Tensor>& tensors) -> std::string {
    try {
      saveSafetensors(saved, tensors);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string i4 = errorOfSave({{"codes", tensor::zeros({4}, DType::I4)}});
  EXPECT_NE(i4.find("'codes' is i4"), std::string::npos) << i4;
  EXPECT_NE(i4.find(saved), std::string::npos) << i4;
  EXPECT_NE(errorOfSave({{"__metadata__", tensor::zeros({1})}}).find("__metadata__"), std::string::npos);
  EXPECT_EQ(errorOfSave({{"t", tensor::zeros({1})}}), "");
  const std::string folder = (std::filesystem::temp_directory_path() / "gizml_no_such_folder").string();
  std::filesystem::remove_all(folder);
  try {
    saveSafetensors(folder + "/t.safetensors", {{"t", tensor::zeros({1})}});
    ADD_FAILURE() << "saved into a missing folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(folder + "/t.safetensors: cannot be written"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, TruncationsAndFlippedBytes) {
  const std::vector<uint8_t> bytes = readFileBytes(kDir + "/dtypes.safetensors");
  for (size_t n = 0; n < bytes.size(); ++n) {
    ASSERT_NE(errorOf(std::vector<uint8_t>(bytes.begin(), bytes.begin() + n)), "") << n;
  }
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> changed = bytes;
    for (int k = 0; k < 3; ++k) changed[rng() % 400] = static_cast<uint8_t>(rng());
    try {
      SafetensorsFile f(changed, "fuzzed.safetensors");
      for (const SafetensorsTensorInfo& t : f.tensors()) f.load(t);
    } catch (const Error&) {
    }
  }
}

}  // namespace
