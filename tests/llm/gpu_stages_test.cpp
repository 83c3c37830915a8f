// A model in stages across GPUs (ModelOptions::stages, loadAcross, load's automatic split): on
// two emulated devices (the ctest entry emulator_stages_test_llm sets GIZML_GPU_EMULATOR_DEVICES=2;
// skipped where fewer than two GPUs show). Each stage runs the kernels one GPU runs for its
// layers, so a model in stages gives the bits of the same model on one GPU.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "llm/language_model.h"
#include "llm/ops/kv_cache.h"
#include "llm/quant/converted_model.h"
#include "llm_test_util.h"
#include "model_reference.h"
#include "mtp_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

// Layer counts that summed to the layers place any split: no GPU needed.
TEST(Stages, CountsFollowFreeMemory) {
  EXPECT_EQ(stageCounts(10, {3u << 30, 1u << 30}), (std::vector<int64_t>{8, 2}));  // 7.5 and 2.5: the first tie
  EXPECT_EQ(stageCounts(8, {1, 1}), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(stageCounts(3, {5, 5, 5, 5}), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(stageCounts(36, {80, 0, 40}), (std::vector<int64_t>{24, 0, 12}));
  expectError([] { stageCounts(4, {0, 0}); }, {"no free memory"});
}

class GpuStages : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    second_ = gizhw::gpu::open(1);
    if (!second_) GTEST_SKIP() << "needs two GPUs (GIZML_GPU_EMULATOR_DEVICES=2)";
  }
  gizhw::gpu::Gpu& second() { return *second_; }
  std::unique_ptr<LanguageModel> oneGpu(const ConvertedModel& weights, std::optional<KvFormat> kv) {
    return buildLanguageModel(weights, {.kvCache = kv, .gpu = gpu()});
  }
  std::unique_ptr<LanguageModel> twoGpus(const ConvertedModel& weights, std::optional<KvFormat> kv, int64_t first) {
    const int64_t layers = weights.config().numLayers;
    return buildLanguageModel(weights, {.kvCache = kv, .stages = {{gpu(), first}, {second(), layers - first}}});
  }
  std::optional<gizhw::gpu::Gpu> second_;
};

// Where a layer's keys and values are.
std::shared_ptr<gizhw::gpu::Device> pagesOf(const SequenceState& state, int64_t layer) {
  return dynamic_cast<const ops::KvCache&>(state).pool().layer(layer).keys.data.storage()->gpu();
}

// llama (8 bits, 16-bit keys and values: a layer on each GPU) and Qwen 3.5 (f32: three DeltaNet
// layers on the first GPU, the other five on the second): the logits of every prompt row and of
// decode steps after it, bit for bit.
TEST_F(GpuStages, TwoStagesGiveTheOneGpuLogits) {
  struct Case {
    std::string arch;
    int bits;
    KvFormat kv;
    int64_t first;
  };
  for (const Case& c : {Case{"llama", 8, KvFormat(DType::F16), 1}, Case{"qwen3_5", kUnquantized, KvFormat(DType::F32), 3}}) {
    SCOPED_TRACE(c.arch);
    const ConvertedModel& weights = converted(c.arch, c.bits);
    const std::unique_ptr<LanguageModel> one = oneGpu(weights, c.kv), two = twoGpus(weights, c.kv, c.first);
    const Reference ref = readReference(c.arch);
    for (const std::vector<int32_t>& prompt : ref.prompts) {
      const auto n = static_cast<int64_t>(prompt.size());
      const std::unique_ptr<SequenceState> a = one->newState(n + 3), b = two->newState(n + 3);
      const tensor::Tensor staged = two->forward({{b.get(), prompt, true}})[0];
      EXPECT_EQ(staged.storage()->gpu(), second().device()) << "the logits are the last stage's";
      EXPECT_EQ(staged.toFloats(), one->forward({{a.get(), prompt, true}})[0].toFloats());
      for (int32_t next : {3, 17, 5})
        EXPECT_EQ(two->forward({{b.get(), {next}}})[0].toFloats(), one->forward({{a.get(), {next}}})[0].toFloats());
    }
    // Each stage's keys and values on its own GPU.
    const std::unique_ptr<SequenceState> state = two->newState(8);
    const int64_t last = weights.config().numLayers - 1;
    EXPECT_EQ(pagesOf(*state, last), second().device());
    if (c.arch == "llama") {
      EXPECT_EQ(pagesOf(*state, 0), gpu().device());
    }
  }
}

// Each GPU's layers go up through its own pinned staging (llm/ops/gpu/weight_upload.h): every
// byte the load copies to either GPU comes from pinned memory, and each gets its share.
TEST_F(GpuStages, EachGpuUploadsItsStageThroughPinnedStaging) {
  const std::vector<gizhw::gpu::Gpu> gpus = {gpu(), second()};
  std::vector<gizhw::gpu::Activity> before;
  for (const gizhw::gpu::Gpu& g : gpus) before.push_back(g.activity());
  const std::unique_ptr<LanguageModel> two = twoGpus(converted("llama", 8), KvFormat(DType::F16), 1);
  for (size_t i = 0; i < gpus.size(); ++i) {
    const gizhw::gpu::Activity after = gpus[i].activity();
    const uint64_t pinned = after.pinnedBytesToDevice - before[i].pinnedBytesToDevice;
    EXPECT_GT(pinned, 0u) << gpus[i].describe();
    EXPECT_EQ(after.bytesToDevice - before[i].bytesToDevice, pinned) << gpus[i].describe();
  }
}

// The requests of a chat through an engine, one after another in one slot: the second starts with
// the first's prompt and answer, and reads only the rest (Progress::cached).
struct Turns {
  std::vector<std::vector<TokenId>> tokens;
  std::vector<int64_t> cached;
};
Turns chat(const std::shared_ptr<LanguageModel>& model, int drafts = 0) {
  Engine engine(model, nullptr, {}, 1, 128);
  engine.setDrafts(drafts);
  Turns out;
  std::vector<TokenId> prompt = {5, 9, 2, 31, 7, 11, 3, 8};
  for (int turn = 0; turn < 2; ++turn) {
    Request r = request(prompt, 6);
    r.marks = {prompt.size()};
    const int id = engine.add(r);
    std::vector<TokenId> tokens;
    int64_t cached = 0;
    while (engine.running() > 0)
      for (const Progress& p : engine.advance())
        if (p.request == id) {
          tokens.insert(tokens.end(), p.tokens.begin(), p.tokens.end());
          cached += p.cached;
        }
    out.tokens.push_back(tokens);
    out.cached.push_back(cached);
    prompt.insert(prompt.end(), tokens.begin(), tokens.end());
    prompt.insert(prompt.end(), {4, 40, 17});
  }
  return out;
}

TEST_F(GpuStages, AnEngineGivesTheOneGpuTokensAndReusesAChatsStart) {
  for (const char* arch : {"llama", "qwen3_5"}) {
    SCOPED_TRACE(arch);
    const ConvertedModel& weights = converted(arch, 8);
    const Turns one = chat(oneGpu(weights, std::nullopt)), two = chat(twoGpus(weights, std::nullopt, 1));
    EXPECT_EQ(two.tokens, one.tokens);
    EXPECT_EQ(two.cached, one.cached);
    EXPECT_EQ(two.cached[0], 0);
    EXPECT_GE(two.cached[1], 8 + 6 - 1) << "the second turn reads only what follows the first";
  }
}

// Qwen 3.5 with its MTP layer (on the last stage, beside the output layer it shares): drafts keep
// the greedy tokens of the model on one GPU.
TEST_F(GpuStages, TheLastStageDrafts) {
  const std::string hf = freshFolder("mtp_hf");
  writeQwen35WithMtp(modelData("qwen3_5"), hf, true);
  const std::string folder = freshFolder("mtp");
  convert(hf, folder, Bits{.layers = 8, .head = 8, .group = 256});
  const ConvertedModel weights = ConvertedModel::open(folder);
  const std::shared_ptr<LanguageModel> two = twoGpus(weights, KvFormat(DType::F32), 4);
  ASSERT_TRUE(two->drafts());
  const std::unique_ptr<SequenceState> state = two->newState(8);
  EXPECT_EQ(pagesOf(*state, weights.config().numLayers), second().device()) << "the MTP layer's keys";
  const Turns drafted = chat(two, 3), plain = chat(oneGpu(weights, KvFormat(DType::F32)));
  EXPECT_EQ(drafted.tokens, plain.tokens);
}

TEST_F(GpuStages, LoadAcrossAndTheAutomaticSplit) {
  const std::string folder = loadableLlama("load");
  // Counts in proportion to free memory: both emulated GPUs are alike, a layer each.
  const Model across = loadAcross(folder, {0, 1});
  expectError([&] { across.engine(1, 16).hidden({5, 9}); }, {"stages", "logits only"});
  EXPECT_EQ(across.engine(1, 32).generate({request({5, 9, 2}, 4)})[0].tokens,
            load(folder, {.gpu = gpu(), .stageBelow = 0}).engine(1, 32).generate({request({5, 9, 2}, 4)})[0].tokens);
  // Weights that would leave less than stageBelow free on the GPU: across both (so logits only).
  const Model split = load(folder, {.gpu = gpu(), .stageBelow = gpu().freeBytes()});
  expectError([&] { split.engine(1, 16).hidden({5, 9}); }, {"stages", "logits only"});
  EXPECT_NO_THROW(load(folder, {.gpu = gpu(), .stageBelow = 0}).engine(1, 16).hidden({5, 9}));
}

TEST_F(GpuStages, BadStagesNameWhatIsWrong) {
  const std::string folder = loadableLlama("load");  // two layers
  expectError([&] { loadAcross(folder, {0, 1}, {1}); }, {"1 layer counts for 2 GPUs"});
  expectError([&] { loadAcross(folder, {0, 1}, {1, 2}); }, {"sum to 3", "the model has 2 layers"});
  expectError([&] { loadAcross(folder, {0, 7}); }, {"no GPU 7", "shows 2", "CUDA_VISIBLE_DEVICES"});
  expectError([&] { loadAcross(folder, {1, 1}); }, {"GPU 1 is named twice"});
  expectError([&] { loadAcross(folder, {0, 1}, {2, 0}); }, {"at least one", second().describe()});
  expectError([&] { loadAcross(folder, {0, 1}, {}, {.gpu = gpu()}); }, {"LoadOptions::gpu and layers must be unset"});
}

}  // namespace
