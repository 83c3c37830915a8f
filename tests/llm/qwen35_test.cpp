// Qwen 3.5 on the CPU against transformers: tiny random-weight dense and MoE models
// (tests/reference/make_model_fixtures.py qwen3_5 qwen3_5_moe; 8 layers, 6 of them Gated DeltaNet,
// 2 key heads for 4 value heads, a prompt of 150 tokens spanning three chunks of the delta rule).
//
// Measured: max |logit error| over all teacher-forced positions as a share of the logits' range
// (16 bits: F16 holds these bf16 weights exactly, so it equals f32; greedy tokens equal
// transformers' at f32 and 16 bits).
//               f32        8 bits   transformers' own model, 0.5 % RMS noise on its matrices
//   qwen3_5     4e-6       0.236    0.210 (tests/reference/qwen35_sensitivity.py)
//   qwen3_5_moe 8e-6       0.503    0.317
// Unquantized, the models equal transformers to f32 rounding, greedy included. These random
// models are far more sensitive to their weights than the attention-only fixtures (0.011 for
// qwen3 under the same noise): each value head's output is normalised (the gated RMSNorm), so
// where a few tokens give a small q . k its sign alone survives and noise can flip it. 8-bit
// weights (0.47 % RMS error each) and the int8 activations of the quantized layers' kernels
// therefore move the logits by 24-50 % of their range (16-45 % with f32 activations).
#include <gizml/llm.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "counting_model.h"
#include "llm/models/gated_delta_net.h"
#include "llm_test_util.h"
#include "model_reference.h"

namespace {

class Qwen35Test : public ::testing::TestWithParam<std::string> {};

double worstLogitError(const std::string& arch, int bits) {
  const Reference ref = readReference(arch);
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(arch, bits));
  double worst = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p) {
    const std::vector<float> got = logitsOf(*model, ref.prompts[p]);
    EXPECT_EQ(got.size(), ref.logits[p].size());
    if (got.size() == ref.logits[p].size()) worst = std::max(worst, relativeMaxError(got, ref.logits[p]));
  }
  std::printf("%s, %d bits: max logit error %.6f of the range\n", arch.c_str(), bits, worst);
  return worst;
}

TEST_P(Qwen35Test, LogitsMatchTransformers) {
  EXPECT_LT(worstLogitError(GetParam(), kUnquantized), 1e-5);
  EXPECT_LT(worstLogitError(GetParam(), 16), 1e-2);  // F16 holds the fixtures' bf16 weights exactly
}

// At 8 bits the error is the model's own sensitivity, not ours: transformers' model moves as much
// under the same weight noise (header). The bounds keep the measured values from growing.
TEST_P(Qwen35Test, LogitsAt8BitsStayWithinTheMeasuredError) {
  const std::map<std::string, double> measured = {{"qwen3_5", 0.236}, {"qwen3_5_moe", 0.503}};
  EXPECT_LT(worstLogitError(GetParam(), 8), measured.at(GetParam()) * 1.05);
}

// llama.cpp's GGUF of the same model (tests/reference/make_qwen35_gguf.py, llama.cpp's own
// converter): norms with the 1 added, -exp(A_log), value heads tiled, experts stacked.
TEST_P(Qwen35Test, LlamaCppGgufGivesTheSameLogits) {
  const Reference ref = readReference(GetParam());
  const std::string folder = freshFolder("gguf");
  convert(modelData(GetParam()) + "/model.gguf", folder, Bits{.layers = 8, .head = 8, .group = 256});
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(ConvertedModel::open(folder));
  double worst = 0;
  for (size_t p = 0; p < ref.prompts.size(); ++p)
    worst = std::max(worst, relativeMaxError(logitsOf(*model, ref.prompts[p]), ref.logits[p]));
  std::printf("%s from llama.cpp's GGUF: max logit error %.6f of the range\n", GetParam().c_str(), worst);
  EXPECT_LT(worst, 1e-5);
}

TEST_P(Qwen35Test, GreedyContinuationMatchesTransformers) {
  const Reference ref = readReference(GetParam());
  for (int bits : {kUnquantized, 16}) {
    const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), bits));
    const std::vector<int32_t>& prompt = ref.prompts[ref.greedyPrompt];
    const int64_t vocab = model->config().vocabSize;
    const std::unique_ptr<SequenceState> state =
        model->newState(static_cast<int64_t>(prompt.size() + ref.greedy.size()));
    std::vector<int32_t> feed = prompt, got;
    while (got.size() < ref.greedy.size()) {
      const tensor::Tensor logits = model->forward({{state.get(), feed}})[0];
      got.push_back(static_cast<int32_t>(argmax(logits.data<float>(), vocab)));
      feed = {got.back()};
    }
    EXPECT_EQ(got, ref.greedy) << bits << " bits";
  }
}

// Prefill runs the chunked delta rule, decode the recurrence: the same states and logits.
TEST_P(Qwen35Test, PrefillGivesTheStatesAndLogitsOfDecodingOneByOne) {
  const Reference ref = readReference(GetParam());
  const std::vector<int32_t>& prompt = ref.prompts.back();  // past two chunks of 64
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), kUnquantized));
  const int64_t vocab = model->config().vocabSize, n = static_cast<int64_t>(prompt.size());
  const std::unique_ptr<SequenceState> once = model->newState(n), steps = model->newState(n);
  const std::vector<float> all = model->forward({{once.get(), prompt, true}})[0].toFloats();
  std::vector<float> oneByOne;
  for (int32_t t : prompt) {
    const std::vector<float> row = model->forward({{steps.get(), {t}}})[0].toFloats();
    oneByOne.insert(oneByOne.end(), row.begin(), row.end());
  }
  ASSERT_EQ(all.size(), static_cast<size_t>(n * vocab));
  EXPECT_LT(relativeMaxError(oneByOne, all), 1e-5);
  const auto& a = dynamic_cast<const HybridState&>(*once);
  const auto& b = dynamic_cast<const HybridState&>(*steps);
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < model->config().numLayers; ++i)
    for (auto [xt, yt] : {std::pair{&a.deltaNet(i).memory, &b.deltaNet(i).memory},
                          std::pair{&a.deltaNet(i).conv, &b.deltaNet(i).conv}}) {
      if (xt->ndim() == 0) continue;  // an attention layer
      const std::vector<float> x = xt->toFloats(), y = yt->toFloats();
      for (size_t j = 0; j < x.size(); ++j) {
        worst = std::max(worst, static_cast<double>(std::abs(x[j] - y[j])));
        scale = std::max(scale, static_cast<double>(std::abs(x[j])));
      }
    }
  std::printf("%s: states after %lld tokens differ by %.3g (largest value %.3g)\n", GetParam().c_str(),
              static_cast<long long>(n), worst, scale);
  EXPECT_GT(scale, 0.0);
  EXPECT_LT(worst, 1e-5 * scale);
}

TEST_P(Qwen35Test, RecurrentStatesTruncateOnlyToTheirEndOrToNothing) {
  const Reference ref = readReference(GetParam());
  const std::vector<int32_t>& prompt = ref.prompts[2];
  const std::unique_ptr<LanguageModel> model = buildLanguageModel(converted(GetParam(), kUnquantized));
  const std::unique_ptr<SequenceState> state = model->newState(64);
  const std::vector<float> first = model->forward({{state.get(), prompt}})[0].toFloats();
  const auto n = static_cast<int64_t>(prompt.size());
  EXPECT_EQ(state->reusable(n), n);
  EXPECT_EQ(state->reusable(n - 1), 0);
  expectError([&] { state->truncate(n - 1); }, {"cannot go back to " + std::to_string(n - 1)});
  state->truncate(0);
  EXPECT_EQ(model->forward({{state.get(), prompt}})[0].toFloats(), first);
}

// A chat's next turn resumes from the kept states: where it continues the held tokens, after
// them; where it departs from them (an edited answer), at the last mark before.
TEST_P(Qwen35Test, NextTurnReadsOnlyItsNewTokens) {
  const Reference ref = readReference(GetParam());
  auto counting = std::make_shared<CountingModel>(buildLanguageModel(converted(GetParam(), kUnquantized)));
  Engine engine(counting, nullptr, {}, 1, 200);
  const std::vector<int32_t> first = ref.prompts[3];  // 37 tokens, two "messages"
  Request turn;
  turn.prompt = first;
  turn.limit = 5;
  turn.marks = {20, first.size()};
  const std::vector<TokenId> answer = engine.generate({turn})[0].tokens;
  auto freshLogits = [&](const std::vector<int32_t>& prompt) {
    const std::unique_ptr<SequenceState> state = counting->newState(static_cast<int64_t>(prompt.size()));
    return counting->forward({{state.get(), prompt}})[0].toFloats();
  };
  auto firstStep = [&](const std::vector<int32_t>& prompt, size_t expectFed) {
    counting->fed.clear();
    Request request;
    request.prompt = prompt;
    request.limit = 1;
    engine.generate({request});
    ASSERT_FALSE(counting->fed.empty());
    EXPECT_EQ(counting->fed[0], static_cast<int64_t>(expectFed));
    const std::vector<float> resumed = counting->last;
    EXPECT_LT(relativeMaxError(resumed, freshLogits(prompt)), 1e-5);
  };
  // Held: the prompt and the answer but its last token, which was drawn and never fed.
  std::vector<int32_t> next = first;
  next.insert(next.end(), answer.begin(), answer.end());
  const size_t held = next.size() - 1;
  for (int32_t t : {7, 8, 9, 10}) next.push_back(t);
  firstStep(next, next.size() - held);
  // An edited answer: back to the mark at the end of the first prompt.
  std::vector<int32_t> edited = first;
  edited.push_back(answer[0] == 11 ? 12 : 11);
  edited.push_back(13);
  firstStep(edited, 2);
}

INSTANTIATE_TEST_SUITE_P(Qwen35, Qwen35Test, ::testing::Values("qwen3_5", "qwen3_5_moe"));

}  // namespace
