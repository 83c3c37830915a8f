// SmolLM2 (the real model of PyPI, at our default 4 bits) on the first GPU, in CI the host GPU
// emulator (ctest emulator_slow_test_smollm2): the rivers question read in one pass, then a few
// of transformers' answer tokens decoded one a step, against the CPU's logits and transformers'
// greedy tokens. Skipped without a GPU or without the model (scripts/setup.sh installs it).
#include <gizml/llm.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/float_compare.h"
#include "common/gpu_checks.h"
#include "llm/language_model.h"
#include "llm/quant/converted_model.h"
#include "real_models.h"

namespace {

class GpuRealModel : public gizml::test::GpuTest {};

TEST_F(GpuRealModel, SmolLM2ReadsAndDecodesAsOnTheCpu) {
  const Case c = {"smollm2", Bits{}, nullptr, "smollm2_rivers.json"};
  const std::string folder = convertedFolder(c);
  if (folder.empty()) GTEST_SKIP() << notInstalled(c);
  const nlohmann::json ref = referenceOf(c);
  const std::vector<TokenId> prompt = ref["prompt"], answer = ref["greedy"];
  const ConvertedModel weights = ConvertedModel::open(folder);
  const std::unique_ptr<LanguageModel> onGpu =
      buildLanguageModel(weights, {.kvCache = gizml::DType::F16, .gpu = gpu()});
  const std::unique_ptr<LanguageModel> onCpu = buildLanguageModel(weights, {.kvCache = gizml::DType::F16});
  const int64_t vocab = onGpu->config().vocabSize;
  constexpr size_t kSteps = 3;
  const auto length = static_cast<int64_t>(prompt.size() + kSteps);
  const std::unique_ptr<SequenceState> gpuState = onGpu->newState(length), cpuState = onCpu->newState(length);
  std::vector<int32_t> feed(prompt.begin(), prompt.end());
  for (size_t step = 0; step <= kSteps; ++step) {
    // The last row's logits (the head of every row is the same kernel's work over more rows).
    const std::vector<float> got = onGpu->forward({{gpuState.get(), feed}})[0].toFloats();
    const std::vector<float> want = onCpu->forward({{cpuState.get(), feed}})[0].toFloats();
    ASSERT_EQ(got.size(), static_cast<size_t>(vocab));
    ASSERT_EQ(want.size(), got.size());
    const double error = gizml::test::relativeMaxError(got, want);
    const auto token = static_cast<TokenId>(std::max_element(got.begin(), got.end()) - got.begin());
    std::printf("SmolLM2 on %s, step %zu (%zu rows): max logit error %.2e of the range against the CPU, argmax %d "
                "(transformers' %d)\n", gpu().describe().c_str(), step, feed.size(), error, token,
                static_cast<int>(answer[step]));
    EXPECT_LT(error, 5e-2);  // the 4-bit bound of tests/llm/gpu_model_test.cpp
    EXPECT_EQ(token, answer[step]) << "step " << step;
    feed = {static_cast<int32_t>(answer[step])};
  }
}

}  // namespace
