// The GPU's attention over the KV pages (llm/ops/gpu: gz_lm_attention_part and _merge, chunks of
// 256 positions) on prompts that span several chunks, with and without sliding windows: against
// the CPU, a prompt read in parts and decoded against the same tokens read whole, and padding
// masked as keys against transformers. On the first
// GPU, in CI the host GPU emulator (ctest emulator_test_llm); skipped where there is none.
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/gpu_checks.h"
#include "llm/formats/safetensors.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "model_reference.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

class GpuModelAttention : public test::GpuTest, public ::testing::WithParamInterface<std::string> {
 protected:
  // 300 tokens: two chunks of positions, the second partly filled.
  std::vector<int32_t> prompt(int64_t length) const {
    const int64_t vocab = converted(GetParam(), 16).config().vocabSize;
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % vocab);
    return tokens;
  }
};

TEST_P(GpuModelAttention, PromptsOverSeveralChunksMatchTheCpu) {
  const std::vector<int32_t> tokens = prompt(300);
  const std::unique_ptr<LanguageModel> gpuModel =
      buildLanguageModel(converted(GetParam(), 16), {.kvCache = DType::F16, .gpu = gpu()});
  const std::unique_ptr<LanguageModel> cpuModel = buildLanguageModel(converted(GetParam(), 16), {.kvCache = DType::F16});
  const double error = relativeMaxError(logitsOf(*gpuModel, tokens), logitsOf(*cpuModel, tokens));
  std::printf("%s, 300 positions, 16 bits, KV f16: max logit error %.2e of the range against the CPU\n",
              GetParam().c_str(), error);
  EXPECT_LT(error, 1e-3);  // the 16-bit bound of gpu_model_test.cpp
}

// A row's context is the same bits whether its prompt came whole, in parts, or a token a step.
// Qwen 3.5's Gated DeltaNet layers read a prefill by the delta rule in chunks of 64 from the
// part's first row and a decode step by the recurrence, as on the CPU (docs/architecture.md): there
// the same to rounding (measured 6.6e-6 of the logits' range for the second part, 1.7e-6 for the
// step: the F16 cache turns a difference in the last bits into a value's F16 step where it crosses
// a rounding edge; a wrong state or chunk moves them by 1e-2 and more).
TEST_P(GpuModelAttention, PartsAndDecodeGiveTheWholeReadsBits) {
  const std::vector<int32_t> tokens = prompt(301);
  const std::unique_ptr<LanguageModel> model =
      buildLanguageModel(converted(GetParam(), 16), {.kvCache = DType::F16, .gpu = gpu()});
  const int64_t vocab = model->config().vocabSize;
  const std::vector<float> whole = logitsOf(*model, tokens);
  const auto expectWhole = [&](const std::vector<float>& got, int64_t from, int64_t to, const char* what) {
    const std::vector<float> want(whole.begin() + from * vocab, whole.begin() + to * vocab);
    if (GetParam() != "qwen3_5") {
      EXPECT_EQ(got, want) << what;
      return;
    }
    const double error = relativeMaxError(got, want);
    std::printf("qwen3_5, %s: logits within %.2e of the range of the whole prompt's\n", what, error);
    EXPECT_LT(error, 5e-5) << what;
  };
  const std::unique_ptr<SequenceState> state = model->newState(301);
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + 200), rest(tokens.begin() + 200, tokens.end() - 1);
  model->forward({{state.get(), head, true}});
  expectWhole(model->forward({{state.get(), rest, true}})[0].toFloats(), 200, 300, "the second part");
  expectWhole(model->forward({{state.get(), {tokens.back()}}})[0].toFloats(), 300, 301, "a decode step");
}

// The sequences of a pass are stored, turned and attend in one launch each a layer, every row at
// its own position and over its own pages: a decode step of three sequences (one past the first
// chunk) launches as many kernels as a step of one, and gives each the bits it gets alone.
TEST_P(GpuModelAttention, SequencesOfAStepShareItsLaunchesAndKeepTheirBits) {
  // Steps queued one launch at a time (not replayed from a recording), to count them.
  const std::unique_ptr<LanguageModel> model =
      buildLanguageModel(converted(GetParam(), 16), {.kvCache = DType::F16, .gpu = gpu(), .stepGraphs = false});
  const std::vector<int64_t> lengths = {5, 270, 37};
  const std::shared_ptr<StatePool> pool = model->newPool(64, KvFormat(DType::F16));
  std::vector<std::unique_ptr<SequenceState>> together, alone;
  std::vector<Feed> step;
  for (int64_t length : lengths) {
    const std::vector<int32_t> tokens = prompt(length);
    for (auto* states : {&together, &alone}) {
      states->push_back(model->newStateIn(pool, 300));
      model->forward({{states->back().get(), tokens, false}});
    }
    step.push_back({together.back().get(), {static_cast<int32_t>(length % 11)}});
  }
  const auto launches = [&] { return gpu().activity().launches; };
  const uint64_t before = launches();
  const std::vector<tensor::Tensor> logits = model->forward(step);
  const uint64_t batched = launches() - before;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const uint64_t start = launches();
    const std::vector<float> own = model->forward({{alone[i].get(), step[i].tokens}})[0].toFloats();
    EXPECT_EQ(launches() - start, batched) << "sequence " << i << " alone";
    EXPECT_EQ(logits[i].toFloats(), own) << "sequence " << i << " of " << lengths[i] << " positions";
  }
  std::printf("%s: a decode step of %zu sequences, %llu launches (as one alone)\n", GetParam().c_str(),
              lengths.size(), static_cast<unsigned long long>(batched));
}

// llama: every position; mistral: a sliding window of 8; gemma3: windows of 6 and a full layer;
// qwen3_5: Gated DeltaNet layers (each sequence's recurrent state) beside attention ones.
INSTANTIATE_TEST_SUITE_P(Architectures, GpuModelAttention, ::testing::Values("llama", "mistral", "gemma3", "qwen3_5"));

}  // namespace

namespace {

// Padding masked as keys on the GPU (Engine::hidden(prompt, layers, attended): the text encoders
// of FLUX klein read their prompt so): every layer's states against transformers' with an
// attention_mask of 9 ones then 8 zeros (make_hidden_fixtures.py masked, the fixture hidden_test.cpp
// reads on the CPU), unquantized with an f32 cache, within the CPU's bound; the attended tokens'
// states are the bits of the prompt cut there.
class GpuModelPadding : public test::GpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(GpuModelPadding, SeveralLayersWithPaddingGiveTransformersStates) {
  const SafetensorsFile file(modelData(GetParam()) + "/masked_hidden.safetensors");
  const int64_t attended = file.load("attended").contiguous().data<int64_t>()[0];
  const std::vector<int32_t> tokens = readReference(GetParam()).prompts[2];
  const auto n = static_cast<int64_t>(tokens.size());
  ASSERT_LT(attended, n);
  const ConvertedModel& weights = converted(GetParam(), kUnquantized);
  const int64_t all = weights.config().numLayers, hidden = weights.config().hiddenSize;
  const auto engine = [&] {
    return Engine(std::shared_ptr<LanguageModel>(buildLanguageModel(weights, {.kvCache = DType::F32, .gpu = gpu()})),
                  nullptr, {}, 1, 64);
  };
  const std::vector<int64_t> layers = {all, 0, 1};
  const tensor::Tensor got = engine().hidden(tokens, layers, attended);
  ASSERT_TRUE(got.onGpu());
  ASSERT_EQ(got.shape(), (tensor::Shape{n, 3 * hidden}));
  double worst = 0;
  for (size_t k = 0; k < layers.size(); ++k) {
    const int64_t at = static_cast<int64_t>(k) * hidden;
    const std::vector<float> want = file.load("hidden_" + std::to_string(layers[k])).toFloats();
    worst = std::max(worst, relativeMaxError(got.slice(1, at, at + hidden).contiguous().toFloats(), want));
  }
  std::printf("%s on %s: max error of the padded states %.2e of the range\n", GetParam().c_str(),
              gpu().describe().c_str(), worst);
  EXPECT_LT(worst, 1e-5);
  const std::vector<int32_t> cut(tokens.begin(), tokens.begin() + attended);
  EXPECT_EQ(got.slice(0, 0, attended).contiguous().toFloats(), engine().hidden(cut, layers).toFloats());
}

INSTANTIATE_TEST_SUITE_P(Architectures, GpuModelPadding, ::testing::Values("llama", "qwen2", "qwen3"));

}  // namespace
