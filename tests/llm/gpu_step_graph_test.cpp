// A GPU model's decode steps recorded once per batch size and replayed (gizhw::gpu::StepGraph):
// each step gives the bits of the same model queuing its kernels one by one, a replayed step
// queues no kernel of its own (one graph launch), a sequence crossing into a new chunk of
// positions records anew, and an engine's requests come out token for token the same. On the
// first GPU, in CI the host GPU emulator (ctest emulator_test_llm); skipped where there is none.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include <gizml/llm.h>

#include "common/gpu_checks.h"
#include "llm/language_model.h"
#include "llm_test_util.h"
#include "model_reference.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

class GpuModelSteps : public test::GpuTest, public ::testing::WithParamInterface<std::string> {
 protected:
  std::unique_ptr<LanguageModel> model(bool graphs, KvFormat kv = KvFormat(DType::F16)) {
    return buildLanguageModel(converted(GetParam(), 16), {.kvCache = kv, .gpu = gpu(), .stepGraphs = graphs});
  }
  int32_t token(int64_t i) const {
    return static_cast<int32_t>((i * 5 + 2) % converted(GetParam(), 16).config().vocabSize);
  }
  /// A decode step of two feeds on the recorded model and the same on the direct one (each of its
  /// own states): the same bits. Whether the recorded one replayed it (one graph launch and no
  /// launch of its own).
  bool replaysWithTheSameBits(LanguageModel& recorded, const std::vector<Feed>& feeds, LanguageModel& direct,
                              const std::vector<Feed>& same, int64_t step) {
    const gizhw::gpu::Activity before = gpu().activity();
    const std::vector<tensor::Tensor> got = recorded.forward(feeds);
    const std::vector<float> first = got[0].toFloats(), second = got[1].toFloats();
    const gizhw::gpu::Activity after = gpu().activity();
    const std::vector<tensor::Tensor> want = direct.forward(same);
    EXPECT_EQ(first, want[0].toFloats()) << "step " << step;
    EXPECT_EQ(second, want[1].toFloats()) << "step " << step;
    if (after.launches != before.launches) return false;
    EXPECT_EQ(after.graphLaunches, before.graphLaunches + 1) << "step " << step;
    return true;
  }
};

// Two sequences decoded side by side for 12 steps, the first from position 250: step 1 queues
// its kernels, step 2 records them, the later steps replay, but where the first sequence's
// position enters the second chunk of 256 (its attention's grid grows), which runs directly and
// records again.
// With keys and values in codes ("4/2": the keys' 4-bit codes written two to a byte by the
// step's rows), the same: for llama and gemma3 (its sliding windows) alone, the emulator's time.
TEST_P(GpuModelSteps, ReplayedStepsGiveTheBitsOfStepsQueuedOneByOne) {
  std::vector<KvFormat> formats = {KvFormat(DType::F16)};
  if (GetParam() == "llama" || GetParam() == "gemma3") formats.push_back(KvFormat::parse("4/2"));
  for (const KvFormat& kv : formats) {
  SCOPED_TRACE(kv.text());
  const std::unique_ptr<LanguageModel> recorded = model(true, kv), direct = model(false, kv);
  const std::vector<int64_t> prompts = {250, 9};
  std::vector<std::unique_ptr<SequenceState>> withGraphs, without;
  for (int64_t length : prompts) {
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) tokens[static_cast<size_t>(i)] = token(i);
    withGraphs.push_back(recorded->newState(300));
    without.push_back(direct->newState(300));
    recorded->forward({{withGraphs.back().get(), tokens, false}});
    direct->forward({{without.back().get(), tokens, false}});
  }
  std::vector<int> replayed;
  for (int64_t step = 0; step < 12; ++step) {
    const auto feeds = [&](const std::vector<std::unique_ptr<SequenceState>>& states) {
      return std::vector<Feed>{{states[0].get(), {token(step)}}, {states[1].get(), {token(step + 7)}}};
    };
    if (replaysWithTheSameBits(*recorded, feeds(withGraphs), *direct, feeds(without), step))
      replayed.push_back(static_cast<int>(step));
  }
  // Position 256 (the second chunk) is the first sequence's at step 6.
  EXPECT_EQ(replayed, (std::vector<int>{2, 3, 4, 5, 8, 9, 10, 11})) << GetParam();
  }
}

// A sequence taken back two tokens and decoded again (as a rejected draft or a regenerated turn
// is) meets the positions of steps a few steps back: the same bits as steps queued one by one.
TEST_P(GpuModelSteps, StepsAtPositionsSeenBeforeGiveTheSameBits) {
  if (GetParam().starts_with("qwen3_5")) GTEST_SKIP() << "a recurrent state goes back only to its marks, not two tokens";
  const std::unique_ptr<LanguageModel> recorded = model(true), direct = model(false);
  const std::unique_ptr<SequenceState> a = recorded->newState(64), b = direct->newState(64);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  recorded->forward({{a.get(), prompt, false}});
  direct->forward({{b.get(), prompt, false}});
  for (int round = 0; round < 3; ++round) {
    for (int64_t step = 0; step < 5; ++step) {
      const std::vector<float> got = recorded->forward({{a.get(), {token(step)}}})[0].toFloats();
      EXPECT_EQ(got, direct->forward({{b.get(), {token(step)}}})[0].toFloats()) << "round " << round << ", step " << step;
    }
    a->truncate(a->length() - 2);
    b->truncate(b->length() - 2);
  }
}

// An engine's greedy and seeded requests (which end at different steps, so the batch shrinks)
// give the same tokens with recorded steps as without.
TEST_P(GpuModelSteps, AnEnginesRequestsGiveTheSameTokens) {
  const std::shared_ptr<LanguageModel> recorded = model(true), direct = model(false);
  const std::vector<Request> requests = {request({5, 9, 2, 31, 7}, 14), request({4, 4, 8, 1}, 9, sample(0.9, 5, 1.0, 3)),
                                         request({7, 1, 30}, 11, sample(1.2, 0, 0.9, 8))};
  Engine withGraphs(recorded, nullptr, {}, 3, 64), without(direct, nullptr, {}, 3, 64);
  const gizhw::gpu::Activity before = gpu().activity();
  const std::vector<Result> got = withGraphs.generate(requests);
  const gizhw::gpu::Activity after = gpu().activity();
  const std::vector<Result> want = without.generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
  EXPECT_GT(after.graphLaunches, before.graphLaunches + 5);
}

// Decode steps of two of three sequences of one pool, a different two each step (as requests come
// and go in an engine's slots): the sequences' places, and Qwen 3.5's recurrent states, are found
// through tables copied up each step, so every step after the first two replays the one
// recording of its batch size, with the bits of steps queued one by one.
TEST_P(GpuModelSteps, StepsOfChangingSequencesReplayOneRecording) {
  const std::unique_ptr<LanguageModel> recorded = model(true), direct = model(false);
  const std::shared_ptr<StatePool> recordedPool = recorded->newPool(16, KvFormat(DType::F16));
  const std::shared_ptr<StatePool> directPool = direct->newPool(16, KvFormat(DType::F16));
  std::vector<std::unique_ptr<SequenceState>> withGraphs, without;
  for (int64_t length : {7, 30, 12}) {
    std::vector<int32_t> tokens(static_cast<size_t>(length));
    for (int64_t i = 0; i < length; ++i) tokens[static_cast<size_t>(i)] = token(i + length);
    withGraphs.push_back(recorded->newStateIn(recordedPool, 64));
    without.push_back(direct->newStateIn(directPool, 64));
    recorded->forward({{withGraphs.back().get(), tokens, false}});
    direct->forward({{without.back().get(), tokens, false}});
  }
  const std::vector<std::pair<size_t, size_t>> pairs = {{0, 1}, {1, 2}, {0, 2}, {2, 0}};
  std::vector<int> replayed;
  for (int64_t step = 0; step < 8; ++step) {
    const size_t x = pairs[static_cast<size_t>(step) % pairs.size()].first;
    const size_t y = pairs[static_cast<size_t>(step) % pairs.size()].second;
    const auto feeds = [&](const std::vector<std::unique_ptr<SequenceState>>& states) {
      return std::vector<Feed>{{states[x].get(), {token(step)}}, {states[y].get(), {token(step + 3)}}};
    };
    if (replaysWithTheSameBits(*recorded, feeds(withGraphs), *direct, feeds(without), step))
      replayed.push_back(static_cast<int>(step));
  }
  EXPECT_EQ(replayed, (std::vector<int>{2, 3, 4, 5, 6, 7})) << GetParam();
}

// Engine::warm records a decode step of each batch size up to the slots, so that a request's first
// decode step replays.
TEST_P(GpuModelSteps, AWarmedEnginesFirstDecodeStepReplays) {
  Engine engine(model(true), nullptr, {}, 2, 64);
  engine.warm();
  engine.add(request({5, 9, 2, 31, 7}, 6));
  engine.advance();  // the prompt
  const gizhw::gpu::Activity before = gpu().activity();
  engine.advance();
  EXPECT_EQ(gpu().activity().graphLaunches, before.graphLaunches + 1);
}

// qwen3_5: Gated DeltaNet layers beside attention ones; qwen3_5_moe: experts chosen on the device.
INSTANTIATE_TEST_SUITE_P(Architectures, GpuModelSteps,
                         ::testing::Values("llama", "gemma3", "qwen3", "qwen3_5", "qwen3_5_moe"));

}  // namespace
