// ModelConfig from the published config.json files of each architecture, from GGUF metadata
// written as llama.cpp writes it, and through our manifest's JSON.
#include "llm/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "llm/formats/gguf.h"
#include "llm_test_util.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

ModelConfig hf(const std::string& name) { return readHfConfig(llmData("configs/" + name + ".json")); }
ModelConfig gg(const std::string& name) { return configFromGguf(GgufFile(llmData("configs/" + name + ".gguf"))); }

TEST(ModelConfig, Llama32WithLlama3RopeScaling) {
  const ModelConfig c = hf("llama-3.2-1b");
  EXPECT_EQ(c.architecture, Architecture::Llama);
  EXPECT_EQ(c.hiddenSize, 2048);
  EXPECT_EQ(c.numLayers, 16);
  EXPECT_EQ(c.numHeads, 32);
  EXPECT_EQ(c.numKvHeads, 8);
  EXPECT_EQ(c.headDim, 64);
  EXPECT_EQ(c.ropeScaling.type, "llama3");
  EXPECT_EQ(c.ropeScaling.factor, 32.0);
  EXPECT_EQ(c.ropeScaling.lowFreqFactor, 1.0);
  EXPECT_EQ(c.ropeScaling.highFreqFactor, 4.0);
  EXPECT_EQ(c.ropeScaling.originalMaxPositions, 8192);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_FALSE(c.qkNorm);
  EXPECT_EQ(c.bosTokenId, 128000);
  EXPECT_EQ(c.eosTokenIds, std::vector<int64_t>{128001});
}

TEST(ModelConfig, MistralHeadDimFromHiddenAndNoWindow) {
  const ModelConfig c = hf("mistral-7b-v0.3");
  EXPECT_EQ(c.architecture, Architecture::Mistral);
  EXPECT_EQ(c.headDim, 128);
  EXPECT_EQ(c.slidingWindow, 0);
  EXPECT_FALSE(c.tieWordEmbeddings);
  EXPECT_EQ(c.layerTypes, std::vector<LayerType>(32, LayerType::FullAttention));
}

TEST(ModelConfig, Qwen2HasBiasesAndIgnoresItsUnusedWindow) {
  const ModelConfig c = hf("qwen2.5-0.5b");
  EXPECT_TRUE(c.attentionBias);
  EXPECT_EQ(c.slidingWindow, 0);
  EXPECT_EQ(c.headDim, 64);
  EXPECT_EQ(c.numKvHeads, 2);
}

TEST(ModelConfig, Qwen3AndQwen3VLText) {
  const ModelConfig q3 = hf("qwen3-0.6b");
  EXPECT_EQ(q3.headDim, 128);
  EXPECT_TRUE(q3.qkNorm);
  EXPECT_EQ(q3.ropeScaling.type, "default");
  const ModelConfig vl = hf("qwen3-vl-2b");
  EXPECT_EQ(vl.architecture, Architecture::Qwen3VLText);
  EXPECT_EQ(vl.hiddenSize, 2048);
  EXPECT_EQ(vl.ropeTheta, 5000000.0);
  EXPECT_EQ(vl.mropeSection, (std::vector<int64_t>{24, 20, 20}));
  EXPECT_TRUE(vl.mropeInterleaved);
  EXPECT_EQ(vl.eosTokenIds, std::vector<int64_t>{151645});
}

TEST(ModelConfig, Qwen35HybridLayers) {
  const ModelConfig c = hf("qwen3.5-0.8b");
  EXPECT_EQ(c.architecture, Architecture::Qwen3_5Text);
  EXPECT_EQ(c.numLayers, 24);
  EXPECT_EQ(c.headDim, 256);
  EXPECT_EQ(c.partialRotaryFactor, 0.25);
  EXPECT_EQ(c.ropeTheta, 1e7);
  EXPECT_EQ(c.mropeSection, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_EQ(c.layerTypes[2], LayerType::LinearAttention);
  EXPECT_EQ(c.layerTypes[3], LayerType::FullAttention);
  EXPECT_EQ(c.linearNumKeyHeads, 16);
  EXPECT_EQ(c.linearValueHeadDim, 128);
  EXPECT_EQ(c.linearConvKernel, 4);
  EXPECT_EQ(c.mtpLayers, 1);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_TRUE(c.attnOutputGate);
  EXPECT_EQ(c.bosTokenId, -1);
  const ModelConfig moe = hf("qwen3.5-35b-a3b");
  EXPECT_EQ(moe.architecture, Architecture::Qwen3_5MoeText);
  EXPECT_EQ(moe.numExperts, 256);
  EXPECT_EQ(moe.numExpertsPerToken, 8);
  EXPECT_EQ(moe.moeIntermediateSize, 512);
  EXPECT_EQ(moe.sharedExpertIntermediateSize, 512);
  EXPECT_EQ(moe.linearNumValueHeads, 32);
  EXPECT_EQ(moe.layerTypes.size(), 40u);
  EXPECT_FALSE(moe.tieWordEmbeddings);
}

TEST(ModelConfig, Gemma3SlidingPatternAndLocalBase) {
  const ModelConfig c = hf("gemma-3-270m");
  EXPECT_EQ(c.architecture, Architecture::Gemma3Text);
  EXPECT_EQ(c.slidingWindow, 512);
  EXPECT_EQ(c.ropeLocalTheta, 10000.0);
  EXPECT_EQ(c.layerTypes[4], LayerType::SlidingAttention);
  EXPECT_EQ(c.layerTypes[5], LayerType::FullAttention);
  EXPECT_TRUE(c.tieWordEmbeddings);
  EXPECT_EQ(c.queryPreAttnScalar, 256.0);
}

TEST(ModelConfig, GgufMetadataGivesTheSameDescription) {
  for (const char* name : {"qwen2.5-0.5b", "qwen3-0.6b", "qwen3-vl-2b", "qwen3.5-0.8b", "qwen3.5-35b-a3b",
                           "gemma-3-270m"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(configToJson(gg(name)).dump(1), configToJson(hf(name)).dump(1));
  }
  // Llama 3's rope_scaling has no GGUF keys: llama.cpp stores its frequencies as rope_freqs.
  ModelConfig llama = hf("llama-3.2-1b");
  llama.ropeScaling = RopeScaling{};
  EXPECT_EQ(configToJson(gg("llama-3.2-1b")).dump(1), configToJson(llama).dump(1));
}

TEST(ModelConfig, ManifestJsonRoundTrips) {
  for (const char* name : {"llama-3.2-1b", "qwen3.5-35b-a3b", "gemma-3-270m"}) {
    const ModelConfig c = hf(name);
    EXPECT_EQ(configFromJson(configToJson(c), "manifest.json"), c) << name;
  }
  nlohmann::json j = configToJson(hf("qwen3-0.6b"));
  j.erase("num_kv_heads");
  expectError([&] { configFromJson(j, "m.json"); }, {"m.json", "config.num_kv_heads", "missing"});
}

TEST(ModelConfig, ErrorsNameTheFileAndField) {
  expectError([] { parseHfConfig(R"({"model_type": "llama", "vocab_size": 10})", "a/config.json"); },
              {"a/config.json", "hidden_size", "missing"});
  expectError([] { parseHfConfig(R"({"model_type": "gpt5"})", "b/config.json"); },
              {"b/config.json", "model_type", "unknown architecture 'gpt5'"});
  expectError([] { parseHfConfig(R"({"vocab_size": 3})", "c/config.json"); }, {"c/config.json", "model_type"});
  expectError(
      [] {
        parseHfConfig(R"({"model_type": "qwen3_5", "text_config": {"vocab_size": 8, "hidden_size": "big"}})",
                      "d/config.json");
      },
      {"d/config.json", "text_config.hidden_size", "not an integer"});
  expectError([] { parseHfConfig("{not json", "e/config.json"); }, {"e/config.json", "not valid JSON"});
  expectError([] { readHfConfig("/nonexistent/folder/config.json"); }, {"/nonexistent/folder/config.json"});
}

}  // namespace
