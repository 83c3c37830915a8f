// convert on the tiny Hugging Face folder, the tiny GGUF and the LoRA adapter, then the folder
// read back by ConvertedModel; and bad inputs, each an Error naming the file and field.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/formats/safetensors.h"
#include "llm/quant/converted_model.h"
#include "llm/quant/lora.h"
#include "llm_test_util.h"

using namespace gizml;
using namespace gizml::llm;
namespace fs = std::filesystem;

namespace {

double relativeError(const tensor::Tensor& got, const tensor::Tensor& want) {
  const std::vector<float> g = got.toFloats(), w = want.toFloats();
  double err = 0, norm = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
    norm += static_cast<double>(w[i]) * w[i];
  }
  return std::sqrt(err / norm);
}

nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

void writeJson(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

TEST(Convert, HuggingFaceFolderRoundTrips) {
  const std::string out = freshFolder("out");
  const ConvertReport report = convert(llmData("tiny_hf"), out);
  const ConvertedModel m = ConvertedModel::open(out);
  EXPECT_EQ(m.config(), readHfConfig(llmData("tiny_hf")));
  const SafetensorsFile expected(llmData("tiny_hf_expected.safetensors"));
  ASSERT_EQ(m.tensors().size(), expected.tensors().size());
  for (const SafetensorsTensorInfo& info : expected.tensors()) {
    SCOPED_TRACE(info.name);
    const StoredTensor& t = m.tensor(info.name);
    EXPECT_EQ(t.offset % 64, 0u);
    const double err = relativeError(m.dequantize(info.name), expected.load(info.name));
    if (info.name == "model.embed_tokens.weight") {  // tied: stored as the output layer, 6 bits
      EXPECT_EQ(t.formatName(), "q6");
      EXPECT_LT(err, 0.03);
    } else if (info.shape.size() == 2) {
      EXPECT_EQ(t.formatName(), "q4");
      EXPECT_LT(err, 0.12);
    } else {
      EXPECT_EQ(t.formatName(), "f32");
      EXPECT_EQ(err, 0.0);
    }
  }
  EXPECT_EQ(m.chatTemplate(), "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}");
  EXPECT_TRUE(fs::exists(fs::path(out) / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(fs::path(out) / "tokenizer_config.json"));
  const nlohmann::json saved = readJson(out + "/report.json");
  EXPECT_EQ(saved["tensors"].size(), report.tensors.size());
  EXPECT_GT(report.bitsPerWeight, 4.0);
  EXPECT_NE(report.text().find("model.layers.1.mlp.down_proj.weight"), std::string::npos);
}

TEST(Convert, GgufOfEveryBlockTypeRoundTrips) {
  const std::string out = freshFolder("out");
  convert(llmData("tiny.gguf"), out, Bits{.layers = 8, .head = 8, .group = 32});
  const ConvertedModel m = ConvertedModel::open(out);
  EXPECT_EQ(m.config().architecture, Architecture::Llama);
  EXPECT_FALSE(m.config().tieWordEmbeddings);
  const SafetensorsFile expected(llmData("tiny_gguf_expected.safetensors"));
  ASSERT_EQ(m.tensors().size(), expected.tensors().size());
  for (const SafetensorsTensorInfo& info : expected.tensors()) {
    SCOPED_TRACE(info.name);
    // 8 bits on top of the GGUF's own rounding; rows in the wrong order would be far off.
    EXPECT_LT(relativeError(m.dequantize(info.name), expected.load(info.name)), 0.01);
  }
  EXPECT_EQ(m.chatTemplate(), "{{ messages[0].content }}");
  const nlohmann::json tok = readJson(out + "/tokenizer_gguf.json");
  EXPECT_EQ(tok["model"], "gpt2");
  EXPECT_EQ(tok["tokens"].size(), 32u);
  EXPECT_EQ(tok["bos_token_id"], 1);
}

TEST(Convert, SixteenBitsStoreF16OrBf16BeyondF16sRange) {
  // One weight of the source set to 99840, beyond F16's largest (65504): that tensor alone is BF16.
  const std::string src = freshFolder("src");
  fs::copy(llmData("tiny_hf"), src, fs::copy_options::recursive);
  const std::string shard = src + "/model-00001-of-00002.safetensors";
  const std::string big = "model.layers.0.mlp.down_proj.weight";
  uint64_t begin = 0;
  {
    const SafetensorsFile file(shard);
    for (const SafetensorsTensorInfo& info : file.tensors())
      if (info.name == big) begin = info.begin;
  }
  ASSERT_GT(begin, 0u);
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t headerBytes = 0;
    file.read(reinterpret_cast<char*>(&headerBytes), 8);
    file.seekp(static_cast<std::streamoff>(8 + headerBytes + begin));
    const uint16_t value = floatToBf16(99840.0f);  // exact in BF16
    file.write(reinterpret_cast<const char*>(&value), 2);
  }
  const std::string out = freshFolder("out");
  const ConvertReport report = convert(src, out, Bits{.layers = 16, .head = 16});
  EXPECT_NEAR(report.bitsPerWeight, 16.0, 0.5);  // norms stay f32
  const ConvertedModel m = ConvertedModel::open(out);
  const SafetensorsFile expected(llmData("tiny_hf_expected.safetensors"));
  for (const SafetensorsTensorInfo& info : expected.tensors()) {
    SCOPED_TRACE(info.name);
    const StoredTensor& t = m.tensor(info.name);
    const std::vector<float> got = m.dequantize(info.name).toFloats(), want = expected.load(info.name).toFloats();
    if (info.shape.size() == 1) {
      EXPECT_EQ(t.formatName(), "f32");
      EXPECT_EQ(got, want);
    } else if (info.name == big) {
      EXPECT_EQ(t.formatName(), "bf16");
      EXPECT_EQ(got[0], 99840.0f);
      // The source is BF16, so BF16 holds its other values exactly.
      EXPECT_EQ(std::vector<float>(got.begin() + 1, got.end()), std::vector<float>(want.begin() + 1, want.end()));
    } else {
      EXPECT_EQ(t.formatName(), "f16");
      EXPECT_EQ(t.bytes, static_cast<uint64_t>(info.numel) * 2);
      // Round to nearest F16: within half a unit in the last place, 2^-11 of the value, or half
      // the subnormal step 2^-24 below 2^-14.
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(std::abs(got[i] - want[i]), std::max(std::abs(want[i]) * 0x1p-11f, 0x1p-25f)) << i;
    }
  }
  // The head at 16 bits, the layers at 8: both kinds in one folder.
  const std::string mixed = freshFolder("mixed");
  convert(llmData("tiny_hf"), mixed, Bits{.layers = 8, .head = 16});
  const ConvertedModel mm = ConvertedModel::open(mixed);
  EXPECT_EQ(mm.tensor("model.embed_tokens.weight").formatName(), "f16");  // tied: the head
  EXPECT_EQ(mm.tensor("model.layers.0.mlp.down_proj.weight").formatName(), "q8");
}

TEST(Convert, LoraMergeEqualsNumpy) {
  const LoraAdapter lora(llmData("tiny_lora"));
  EXPECT_EQ(lora.rank(), 4);
  EXPECT_EQ(lora.scale(), 2.0);
  const SafetensorsFile base(llmData("tiny_hf_expected.safetensors"));
  const SafetensorsFile merged(llmData("lora_merged.safetensors"));
  ASSERT_EQ(lora.targets().size(), merged.tensors().size());
  for (const SafetensorsTensorInfo& info : merged.tensors()) {
    const std::vector<float> got = lora.merge(info.name, base.load(info.name)).toFloats();
    const std::vector<float> want = merged.load(info).toFloats();
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6f) << info.name << " " << i;
  }
  // Through convert at 8 bits: near the merged weights, far from the base ones.
  const std::string out = freshFolder("out");
  convert(llmData("tiny_hf"), out, Bits{.layers = 8, .head = 8, .group = 32}, llmData("tiny_lora"));
  const ConvertedModel m = ConvertedModel::open(out);
  const std::string q = "model.layers.1.self_attn.q_proj.weight";
  EXPECT_LT(relativeError(m.dequantize(q), merged.load(q)), 0.01);
  EXPECT_GT(relativeError(m.dequantize(q), base.load(q)), 0.1);
}

TEST(Convert, BadSourcesAreErrors) {
  const std::string src = freshFolder("src");
  fs::copy(llmData("tiny_hf"), src, fs::copy_options::recursive);
  nlohmann::json config = readJson(src + "/config.json");
  config.erase("num_attention_heads");
  writeJson(src + "/config.json", config);
  expectError([&] { convert(src, freshFolder("a")); }, {src + "/config.json", "num_attention_heads", "missing"});
  config = readJson(llmData("tiny_hf/config.json"));
  config["model_type"] = "falcon";
  writeJson(src + "/config.json", config);
  expectError([&] { convert(src, freshFolder("b")); }, {src + "/config.json", "model_type", "'falcon'"});
  expectError([&] { convert(llmData("no_such_model"), freshFolder("c")); }, {"no_such_model"});
  expectError([&] { convert(llmData("tiny_hf"), freshFolder("d"), Bits{.layers = 1}); }, {"layer bits", "2..8 or 16"});
  expectError([&] { convert(llmData("tiny_hf"), freshFolder("e"), Bits{.head = 12}); }, {"head bits", "not 12"});
}

TEST(Convert, BadLoraAdaptersAreErrors) {
  expectError([] { convert(llmData("tiny_hf"), freshFolder("a"), {}, llmData("tiny_lora_bad")); },
              {"tiny_lora_bad/adapter_model.safetensors", "lora_A.weight", "[3, 64]", "r=4"});
  const std::string lora = freshFolder("lora");
  fs::copy(llmData("tiny_lora"), lora, fs::copy_options::recursive);
  nlohmann::json cfg = readJson(lora + "/adapter_config.json");
  cfg.erase("lora_alpha");
  writeJson(lora + "/adapter_config.json", cfg);
  expectError([&] { convert(llmData("tiny_hf"), freshFolder("b"), {}, lora); },
              {lora + "/adapter_config.json", "lora_alpha", "missing"});
  // An adapter for another model's shapes names both shapes.
  expectError([] { convert(llmData("tiny.gguf"), freshFolder("c"), {}, llmData("tiny_lora")); },
              {"tiny_lora/adapter_model.safetensors", "[64, 64]", "model.layers.0.self_attn.q_proj.weight",
               "[256, 256]"});
}

TEST(Convert, DamagedOutputsAreErrors) {
  const std::string out = freshFolder("out");
  convert(llmData("tiny_hf"), out);
  const std::string manifest = out + "/manifest.json", data = out + "/weights.bin";
  const nlohmann::json good = readJson(manifest);

  fs::resize_file(data, fs::file_size(data) - 64);
  expectError([&] { ConvertedModel::open(out); }, {data, "data_bytes", manifest});
  fs::resize_file(data, good["data_bytes"].get<uint64_t>());

  nlohmann::json bad = good;
  bad["tensors"][3]["bytes"] = bad["tensors"][3]["bytes"].get<uint64_t>() + 1;
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, good["tensors"][3]["name"].get<std::string>(), "bytes"});

  bad = good;
  bad["tensors"][2]["offset"] = 8;
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, "64-byte aligned"});

  bad = good;
  bad["tensors"][1]["format"] = "q9";
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, "tensors[1].format", "'q9'"});
  bad["tensors"][1]["format"] = "f8";
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, "tensors[1].format", "'f8'"});

  // A q4 tensor relabelled f16 has the wrong byte count for it.
  bad = good;
  size_t q4 = 0;
  while (bad["tensors"][q4]["format"] != "q4") ++q4;
  bad["tensors"][q4]["format"] = "f16";
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, good["tensors"][q4]["name"].get<std::string>(), "f16 take"});

  bad = good;
  bad["config"].erase("head_dim");
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, "config.head_dim", "missing"});

  bad = good;
  bad["architecture"] = "qwen3";
  writeJson(manifest, bad);
  expectError([&] { ConvertedModel::open(out); }, {manifest, "architecture"});

  writeJson(manifest, good);
  EXPECT_NO_THROW(ConvertedModel::open(out));
}

}  // namespace
