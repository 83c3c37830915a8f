// The language models on a GPU (ModelOptions::gpu; llm/ops/gpu/): each architecture's tiny
// fixture (tests/reference/make_model_fixtures.py) against transformers and against the CPU, on
// the first GPU, which in CI is the host GPU emulator (ctest label `emulator`, GIZML_GPU_EMULATOR=1);
// skipped where there is no GPU.
//
// The GPU's quantized linears multiply the activations and the stored weights as F16 (each
// activation row scaled by a power of two) on the tensor cores with F32 sums, its 16-bit ones the
// activations kept to 22 bits (their F16 and what F16 left, two products), its f32 ones in f32
// (the CPU's quantize the activations to int8 per group for the quantized layers), and its
// attention sums chunks of 256 positions in f32, so the two differ by rounding. Measured on the emulator,
// max |logit error| as a share of the range over the fixture's prompts (f32 weights with an f32
// KV cache; the stored formats with the GPU's default F16 cache, where the CPU's comparison runs
// with F16 too):
//            f32 vs transformers   16 bits vs transformers   8 bits vs CPU   4 bits vs CPU
//   llama    3.0e-7                1.7e-4                    8.3e-3          9.1e-3
//   mistral  3.6e-7                2.3e-4                    1.3e-2          1.4e-2
//   qwen2    2.9e-7                2.4e-4                    9.7e-3          1.1e-2
//   qwen3    3.9e-7                2.3e-4                    9.0e-3          1.2e-2
//   qwen3_vl 4.2e-7                2.7e-4                    1.3e-2          1.2e-2
//   gemma3   6.0e-7                3.1e-4                    1.8e-2          1.5e-2
// The greedy continuations equal transformers' (f32 and 16 bits), and batched rows give the bits
// of each row alone. Qwen 3.5 unquantized (its DeltaNet's delta rule in chunks for a prefill, on
// both): qwen3_5 5.1e-6 against transformers and 5.4e-6 against the CPU, qwen3_5_moe 7.4e-6 and
// 6.9e-6; greedy equal; MTP drafts keep the greedy tokens.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "llm_test_util.h"
#include "llm/language_model.h"
#include "llm/ops/kv_cache.h"
#include "llm/ops/rows.h"
#include "llm/quant/converted_model.h"
#include "model_reference.h"
#include "mtp_fixture.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

class GpuModelTest : public test::GpuTest, public ::testing::WithParamInterface<std::string> {
 protected:
  std::unique_ptr<LanguageModel> onGpu(int bits, DType kv = DType::F16) {
    return buildLanguageModel(converted(GetParam(), bits), {.kvCache = kv, .gpu = gpu()});
  }
};

TEST_P(GpuModelTest, LogitsMatchTransformersAndTheCpu) {
  const Reference ref = readReference(GetParam());
  // f32 weights with an f32 cache: rounding alone; the stored formats with the GPU's default cache.
  for (auto [bits, kv] : {std::pair{kUnquantized, DType::F32}, std::pair{16, DType::F16}, std::pair{8, DType::F16},
                          std::pair{4, DType::F16}}) {
    {
      const std::unique_ptr<LanguageModel> model = onGpu(bits, kv);
      const std::unique_ptr<LanguageModel> cpu = buildLanguageModel(converted(GetParam(), bits), {.kvCache = kv});
      double vsReference = 0, vsCpu = 0;
      for (size_t p = 0; p < ref.prompts.size(); ++p) {
        const std::unique_ptr<SequenceState> state = model->newState(static_cast<int64_t>(ref.prompts[p].size()));
        const tensor::Tensor logits = model->forward({{state.get(), ref.prompts[p], true}})[0];
        ASSERT_TRUE(logits.onGpu());
        const std::vector<float> got = logits.toFloats();
        ASSERT_EQ(got.size(), ref.logits[p].size());
        vsReference = std::max(vsReference, relativeMaxError(got, ref.logits[p]));
        vsCpu = std::max(vsCpu, relativeMaxError(got, logitsOf(*cpu, ref.prompts[p])));
      }
      std::printf("%s on %s, %d bits, KV %s: max logit error %.2e of the range against transformers, %.2e against "
                  "the CPU\n", GetParam().c_str(), gpu().describe().c_str(), bits, dtypeName(kv), vsReference, vsCpu);
      if (bits == kUnquantized || bits == 16) {
        EXPECT_LT(vsReference, kv == DType::F16 ? 1e-3 : 1e-5);
      }
      // Quantized: the CPU's int8 activations against the GPU's f32 ones.
      EXPECT_LT(vsCpu, bits == 4 ? 5e-2 : bits == 8 ? 2.5e-2 : kv == DType::F16 ? 1e-3 : 1e-5);
    }
  }
}

// Keys and values in codes (the engine's default 8 bits, and keys in 4 and values in 2): the GPU
// codes what the CPU codes (tests/llm/gpu_kv_codes_test.cpp), so the logits differ by the rest's
// rounding, and where that moves a key or a value across a code's edge: measured on the emulator,
// 4e-7 to 6.4e-4 of the range (gemma3 at 8 bits the most; 8 bits have 17 times the edges of 4).
TEST_P(GpuModelTest, CodedKeysAndValuesMatchTheCpu) {
  const Reference ref = readReference(GetParam());
  for (const char* format : {"8", "4/2"}) {
    const KvFormat kv = KvFormat::parse(format);
    const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), 16), {.kvCache = kv, .gpu = gpu()});
    const std::unique_ptr<LanguageModel> cpu = buildLanguageModel(converted(GetParam(), 16), {.kvCache = kv});
    double vsCpu = 0;
    for (const std::vector<int32_t>& prompt : ref.prompts)
      vsCpu = std::max(vsCpu, relativeMaxError(logitsOf(*model, prompt), logitsOf(*cpu, prompt)));
    std::printf("%s on %s, 16 bits, KV %s: max logit error %.2e of the range against the CPU\n", GetParam().c_str(),
                gpu().describe().c_str(), format, vsCpu);
    EXPECT_LT(vsCpu, 2.5e-3);
  }
}

TEST_P(GpuModelTest, GreedyContinuationMatchesTransformers) {
  const Reference ref = readReference(GetParam());
  EXPECT_EQ(greedyContinuation(*onGpu(kUnquantized, DType::F32), ref), ref.greedy);
  EXPECT_EQ(greedyContinuation(*onGpu(16), ref), ref.greedy);
}

TEST_P(GpuModelTest, BatchedSequencesGiveTheirOwnLogits) {
  // Each row's sums run in an order that does not depend on the rows beside it: the same bits.
  expectBatchedRowsAlone(*onGpu(8), readReference(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Architectures, GpuModelTest,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen3_vl", "gemma3"));

// Qwen 3.5, dense and MoE (Gated DeltaNet layers, gated attention, routed experts): unquantized,
// against transformers and the CPU (a prefill's delta rule in chunks on both, in other sum orders),
// and its greedy continuation.
class GpuQwen35 : public test::GpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GpuQwen35, LogitsAndGreedyMatchTransformers) {
  const Reference ref = readReference(GetParam());
  const std::unique_ptr<LanguageModel> model =
      buildLanguageModel(converted(GetParam(), kUnquantized), {.kvCache = DType::F32, .gpu = gpu()});
  const std::unique_ptr<LanguageModel> cpu = buildLanguageModel(converted(GetParam(), kUnquantized));
  double vsReference = 0, vsCpu = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p) {
    const std::vector<float> got = logitsOf(*model, ref.prompts[p]);
    ASSERT_EQ(got.size(), ref.logits[p].size());
    vsReference = std::max(vsReference, relativeMaxError(got, ref.logits[p]));
    vsCpu = std::max(vsCpu, relativeMaxError(got, logitsOf(*cpu, ref.prompts[p])));
  }
  std::printf("%s on %s: max logit error %.2e of the range against transformers, %.2e against the CPU\n",
              GetParam().c_str(), gpu().describe().c_str(), vsReference, vsCpu);
  EXPECT_LT(vsReference, 1e-4);
  EXPECT_LT(vsCpu, 1e-4);
  EXPECT_EQ(greedyContinuation(*model, ref), ref.greedy);
}

// 16-bit weights against the CPU, within the other architectures' bound (measured: qwen3_5
// 5.3e-5, qwen3_5_moe 7.1e-5, whose experts are chosen on the device), and transformers' greedy
// tokens. (At 8 and 4 bits this random tiny model's logits move by 0.16 to 0.77 of their range
// from the unquantized ones on the CPU and the GPU alike, so the two differ by as much: no check
// of the kernels there; the one below compares the MoE kernels bit for bit.) The same with keys
// and values in 8 bits (measured 3.7e-4 and 3.5e-4: codes that rounding moves across an edge).
TEST_P(GpuQwen35, SixteenBitWeightsMatchTheCpu) {
  const Reference ref = readReference(GetParam());
  for (const KvFormat kv : {KvFormat(DType::F16), KvFormat::parse("8")}) {
    const std::unique_ptr<LanguageModel> model =
        buildLanguageModel(converted(GetParam(), 16), {.kvCache = kv, .gpu = gpu()});
    const std::unique_ptr<LanguageModel> cpu = buildLanguageModel(converted(GetParam(), 16), {.kvCache = kv});
    double vsCpu = 0;
    for (const std::vector<int32_t>& prompt : ref.prompts)
      vsCpu = std::max(vsCpu, relativeMaxError(logitsOf(*model, prompt), logitsOf(*cpu, prompt)));
    std::printf("%s on %s, 16 bits, KV %s: max logit error %.2e of the range against the CPU\n", GetParam().c_str(),
                gpu().describe().c_str(), kv.text().c_str(), vsCpu);
    EXPECT_LT(vsCpu, 1e-3);
    EXPECT_EQ(greedyContinuation(*model, ref), ref.greedy);
  }
}

INSTANTIATE_TEST_SUITE_P(Qwen35, GpuQwen35, ::testing::Values("qwen3_5", "qwen3_5_moe"));

class GpuQwen35Moe : public test::GpuTest {};

// The MoE model's experts chosen on the device (ops::DeviceExperts: tiles of each expert's rows,
// the weighted sum in expert order, nothing read back) give the bits of the routes read back and
// a loop over the experts, at every stored format: group rows (8 and 4 bits) and 16-bit rows. The
// fixture's prompts make tiles of 16 rows; a prompt of 136 tokens (272 pairs over 8 experts, 32
// or more each on average) tiles of 64.
TEST_F(GpuQwen35Moe, ExpertsChosenOnTheDeviceGiveTheBitsOfTheLoopOverExperts) {
  Reference ref = readReference("qwen3_5_moe");
  const ModelConfig& config = converted("qwen3_5_moe", 16).config();
  ASSERT_GE(136 * config.numExpertsPerToken, 32 * config.numExperts);
  std::vector<int32_t> longPrompt(136);
  for (size_t i = 0; i < longPrompt.size(); ++i) longPrompt[i] = static_cast<int32_t>((i * 11 + 5) % config.vocabSize);
  ref.prompts.push_back(longPrompt);
  for (int bits : {16, 8, 4}) {
    const std::unique_ptr<LanguageModel> onDevice =
        buildLanguageModel(converted("qwen3_5_moe", bits), {.kvCache = DType::F16, .gpu = gpu()});
    const std::unique_ptr<LanguageModel> loop = buildLanguageModel(
        converted("qwen3_5_moe", bits), {.kvCache = DType::F16, .gpu = gpu(), .expertsOnDevice = false});
    for (size_t p = 0; p < ref.prompts.size(); ++p) {
      const gizhw::gpu::Activity before = gpu().activity();
      const std::vector<float> got = logitsOf(*onDevice, ref.prompts[p]);
      const gizhw::gpu::Activity after = gpu().activity();
      EXPECT_EQ(got, logitsOf(*loop, ref.prompts[p])) << bits << " bits, prompt " << p;
      EXPECT_EQ(after.copiesToHost - before.copiesToHost, 1u) << "the logits alone";
    }
  }
}

// Qwen 3.5 with an MTP layer (mtp_fixture.h) on the GPU: the engine's greedy tokens are the same
// with and without drafts.
class GpuQwen35Mtp : public test::GpuTest {};

TEST_F(GpuQwen35Mtp, DraftsKeepTheGreedyTokens) {
  const std::string hf = freshFolder("mtp_hf");
  writeQwen35WithMtp(modelData("qwen3_5"), hf, true);
  const std::string out = freshFolder("mtp");
  convert(hf, out, Bits{.layers = 8, .head = 8, .group = 256});
  const std::shared_ptr<LanguageModel> model =
      buildLanguageModel(ConvertedModel::open(out), {.kvCache = DType::F32, .gpu = gpu()});
  const Reference ref = readReference("qwen3_5");
  const std::vector<Request> requests = {request(ref.prompts[1], 24), request(ref.prompts[2], 16)};
  auto run = [&](int drafts) {
    Engine engine(model, nullptr, {}, 2, 128);
    engine.setDrafts(drafts);
    engine.warm();  // with drafts: the MTP layer's pass too
    return engine.generate(requests);
  };
  const std::vector<Result> plain = run(0), drafted = run(3);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(drafted[i].tokens, plain[i].tokens) << "request " << i;
    EXPECT_GT(drafted[i].drafted, 0) << "request " << i;
  }
}

class GpuModelErrors : public test::GpuTest {};

TEST_F(GpuModelErrors, OperandsOnTwoDevicesNameBoth) {
  const tensor::Tensor host = tensor::zeros({2, 4});
  const tensor::Tensor device = on(tensor::zeros({2, 4}));
  expectError([&] { ops::addInPlace(device, host); }, {"addInPlace", "two devices", "cpu", device.device()});
}

TEST_F(GpuModelErrors, HeadsTooLongToCodeNameTheLimit) {
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 16), {.gpu = gpu()});
  expectError([&] {
    ops::KvPool(model.get(), {true}, 1, 1024, KvFormat::parse("8"), 1, {gpu()});
  }, {"KV cache", "1024", "too long to code", "512"});
}

}  // namespace

namespace {

class GpuModelEngine : public test::GpuTest {};

// An engine's requests on a GPU model, two at once (one sampled), give the tokens each gives alone.
TEST_F(GpuModelEngine, RequestsTogetherGiveTheirTokensAlone) {
  const std::shared_ptr<LanguageModel> model =
      buildLanguageModel(converted("llama", 8), {.kvCache = std::nullopt, .gpu = gpu()});
  Sampling sampled;
  sampled.temperature = 0.9;
  sampled.seed = 7;
  const std::vector<Request> requests = {request({5, 9, 2, 31, 7, 11, 3}, 8),
                                         request({4, 4, 8, 1, 2, 9, 40, 17, 6}, 6, sampled)};
  Engine together(model, nullptr, {}, 2, 64);
  const std::vector<Result> both = together.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    Engine alone(model, nullptr, {}, 1, 64);
    EXPECT_EQ(both[i].tokens, alone.generate({requests[i]})[0].tokens) << "request " << i;
    EXPECT_EQ(both[i].tokens.size(), static_cast<size_t>(requests[i].limit));
  }
}

// On a GPU an engine keeps keys and values in 8 bits where its pool fits the GPU's free memory,
// as on the CPU (the spec's default), and its tokens are those of states with that cache alone.
TEST_F(GpuModelEngine, KeepsKeysAndValuesInEightBits) {
  const std::shared_ptr<LanguageModel> model =
      buildLanguageModel(converted("llama", 8), {.kvCache = std::nullopt, .gpu = gpu()});
  Engine engine(model, nullptr, {}, 2, 64);
  EXPECT_EQ(engine.kvFormat().text(), "8");
  const std::vector<int32_t> prompt = {5, 9, 2, 31, 7, 11, 3};
  const std::vector<TokenId> got = engine.generate({request(prompt, 5)})[0].tokens;
  // The same greedy loop over a state of its own with keys and values in 8 bits.
  const std::unique_ptr<SequenceState> state = model->newStateIn(model->newPool(1, KvFormat::parse("8")), 64);
  std::vector<TokenId> want;
  std::vector<int32_t> feed = prompt;
  while (want.size() < got.size()) {
    const std::vector<float> logits = model->forward({{state.get(), feed}})[0].toFloats();
    want.push_back(static_cast<TokenId>(argmax(logits.data(), model->config().vocabSize)));
    feed = {want.back()};
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.size(), 5u);
}

// Warming runs each kernel once and leaves the engine as it was: the same tokens after it.
TEST_F(GpuModelEngine, WarmingLeavesTheEngineAsItWas) {
  const std::shared_ptr<LanguageModel> model =
      buildLanguageModel(converted("llama", 8), {.kvCache = std::nullopt, .gpu = gpu()});
  const Request r = request({5, 9, 2, 31, 7}, 6);
  Engine cold(model, nullptr, {}, 2, 64);
  const std::vector<TokenId> want = cold.generate({r})[0].tokens;
  Engine warmed(model, nullptr, {}, 2, 64);
  EXPECT_GT(warmed.warm(), 0.0);
  EXPECT_EQ(warmed.freeSlots(), 2);
  EXPECT_EQ(warmed.generate({r})[0].tokens, want);
}

// A state on the GPU copied into a pool in host memory (where an engine parks a slot's start) and
// back gives the next step the logits of the state that never left.
// Codes lie in host memory as on the GPU (one layout): a page copies between them as it is.
TEST_F(GpuModelEngine, StatesParkedInHostMemoryComeBack) {
  for (const KvFormat format : {KvFormat(DType::F16), KvFormat::parse("4/2")}) {
  SCOPED_TRACE(format.text());
  const std::unique_ptr<LanguageModel> model =
      buildLanguageModel(converted("llama", 8), {.kvCache = format, .gpu = gpu()});
  const std::vector<int32_t> prompt = {5, 9, 2, 31, 7, 11, 3, 8, 8, 1};
  const std::unique_ptr<SequenceState> original = model->newStateIn(model->newPool(1, format), 64);
  model->forward({{original.get(), prompt}});
  const std::unique_ptr<SequenceState> parked = model->newStateIn(model->newPool(1, format, true), 64);
  ASSERT_TRUE(parked->copyFrom(*original));
  const auto& hostPages = dynamic_cast<const ops::KvCache&>(*parked).pool().layer(0).keys.data;
  EXPECT_FALSE(hostPages.onGpu());
  const std::unique_ptr<SequenceState> back = model->newStateIn(model->newPool(1, format), 64);
  ASSERT_TRUE(back->copyFrom(*parked));
  EXPECT_EQ(back->length(), static_cast<int64_t>(prompt.size()));
  const std::vector<float> want = model->forward({{original.get(), {42}}})[0].toFloats();
  EXPECT_EQ(model->forward({{back.get(), {42}}})[0].toFloats(), want);
  }
}

// On a GPU with little memory (the emulator's GIZML_GPU_EMULATOR_MEMORY, set by the ctest entry
// emulator_small_test_llm; skipped elsewhere): a model larger than its free memory is an Error
// naming both sizes, and a step that runs out of memory ends its requests with an Error while the
// engine goes on with the next.
class GpuModelSmallMemory : public test::GpuTest {
 protected:
  void SetUp() override {
    if (!std::getenv("GIZML_GPU_EMULATOR_MEMORY")) GTEST_SKIP() << "needs the emulator's small memory";
    test::GpuTest::SetUp();
  }
};

TEST_F(GpuModelSmallMemory, ATooLargeModelNamesBothSizes) {
  expectError([&] { buildLanguageModel(converted("llama", kUnquantized), {.gpu = gpu()}); },
              {"its weights take", "MiB free on", gpu().describe()});
}

TEST_F(GpuModelSmallMemory, AStepOutOfMemoryEndsItsRequestsAndTheEngineGoesOn) {
  const std::shared_ptr<LanguageModel> model = buildLanguageModel(converted("llama", 4), {.gpu = gpu()});
  Engine engine(model, nullptr, {}, 1, 256);
  std::vector<TokenId> longPrompt(240);
  for (size_t i = 0; i < longPrompt.size(); ++i) longPrompt[i] = static_cast<TokenId>(i % 500);
  engine.add(request(longPrompt, 4));
  expectError([&] { engine.advance(); }, {"out of memory"});
  EXPECT_EQ(engine.running(), 0);
  const std::vector<Result> after = engine.generate({request({5, 9, 2, 31}, 4)});
  EXPECT_EQ(after[0].tokens.size(), 4u);
}

}  // namespace
