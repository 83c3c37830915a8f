// StepGraph: a step of allocations, an upload of new inputs, a fill, launches and a copy on the
// device, run again and again: run directly, then recorded, then replayed, each time the bits of
// the same step run without it; a replay queues no kernel; a step whose work changes (an
// argument, one operation fewer) runs directly and is recorded again; one that reads back is
// never recorded, its host code run once; memory allocated between replays never takes the recording's. Runs on any
// GPU whose driver records graphs and on the emulator (GIZML_GPU_EMULATOR=1).
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/gpu_checks.h"
#include "graph_kernels.h"

namespace {

namespace gpu = gizhw::gpu;
using Ran = gpu::StepGraph::Ran;

const char* const kSource = gizml::test::kGraphKernels;

class StepGraphs : public gizml::test::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!gpu().canCapture()) GTEST_SKIP() << "the driver of " << gpu().describe() << " has no graphs";
    out_ = gpu().allocate(kN * 4);
  }
  static constexpr int kN = 300;

  // The step: its input x uploaded into memory it allocates, a scratch row filled, two launches
  // (the second left out with `short_`), the result copied into out_; `readBack` reads it back.
  void step(const std::vector<float>& x, float a) {
    ++hostRuns_;
    const gpu::Stream& s = gpu().stream();
    const gpu::Buffer in = gpu().allocate(kN * 4), y = gpu().allocate(kN * 4);
    gpu().copyToDevice(in.address(), x.data(), kN * 4, s);
    gpu().fill(y.address(), 0x3e, kN * 4, s);
    uint64_t xa = in.address(), ya = y.address();
    int n = kN;
    gpu().kernel(kSource, "graph_mix").launch({(kN + 63) / 64}, {64}, 0, s, {&xa, &ya, &a, &n});
    if (readBack_) read();
    if (!short_) gpu().kernel(kSource, "graph_square").launch({(kN + 63) / 64}, {64}, 0, s, {&ya, &n});
    gpu().copyOnDevice(out_.address(), ya, kN * 4, s);
  }
  std::vector<float> read() {
    std::vector<float> v(kN);
    gpu().copyToHost(v.data(), out_.address(), kN * 4, gpu().stream());
    gpu().synchronize();
    return v;
  }
  // The step's result for (x, a) run directly, outside any StepGraph.
  std::vector<float> direct(const std::vector<float>& x, float a) {
    step(x, a);
    return read();
  }
  static std::vector<float> input(int k) {
    std::vector<float> v(kN);
    for (int i = 0; i < kN; ++i) v[i] = 0.013f * static_cast<float>((i * (k + 3)) % 97 - 40);
    return v;
  }
  static bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  }
  // Runs the step in `graph` with input k and checks its result against the direct run's.
  Ran runAndCheck(gpu::StepGraph& graph, int k, float a) {
    const Ran ran = graph.run([&] { step(input(k), a); });
    const std::vector<float> got = read();
    EXPECT_TRUE(sameBits(got, direct(input(k), a))) << "input " << k;
    return ran;
  }

  gpu::Buffer out_;
  bool short_ = false, readBack_ = false;
  int hostRuns_ = 0;
};

TEST_F(StepGraphs, RecordedOnceThenReplayedWithNewInputsAndNoLaunches) {
  gpu::StepGraph graph(gpu());
  EXPECT_EQ(runAndCheck(graph, 0, 1.7f), Ran::Directly);
  EXPECT_EQ(runAndCheck(graph, 1, 1.7f), Ran::Recorded);
  for (int k = 2; k < 6; ++k) {
    const gpu::Activity before = gpu().activity();
    const Ran ran = graph.run([&] { step(input(k), 1.7f); });
    const gpu::Activity after = gpu().activity();
    EXPECT_EQ(ran, Ran::Replayed);
    EXPECT_EQ(after.launches, before.launches) << "a replay queues no kernel of its own";
    EXPECT_EQ(after.graphLaunches, before.graphLaunches + 1);
    // Buffers taken and written between replays are never the recording's.
    const gpu::Buffer other = gpu().allocate(kN * 4), more = gpu().allocate(kN * 4);
    gpu().fill(other.address(), 0x7f, kN * 4, gpu().stream());
    gpu().fill(more.address(), 0x11, kN * 4, gpu().stream());
    EXPECT_TRUE(sameBits(read(), direct(input(k), 1.7f))) << "input " << k;
  }
  EXPECT_TRUE(graph.recordable());
}

TEST_F(StepGraphs, AStepWhoseWorkChangedRunsDirectlyAndIsRecordedAgain) {
  gpu::StepGraph graph(gpu());
  runAndCheck(graph, 0, 0.9f);
  runAndCheck(graph, 1, 0.9f);
  EXPECT_EQ(runAndCheck(graph, 2, 0.9f), Ran::Replayed);
  EXPECT_EQ(runAndCheck(graph, 3, 1.3f), Ran::Directly);  // another argument's value
  EXPECT_EQ(runAndCheck(graph, 4, 1.3f), Ran::Recorded);
  EXPECT_EQ(runAndCheck(graph, 5, 1.3f), Ran::Replayed);
  short_ = true;  // one launch fewer than recorded
  EXPECT_EQ(runAndCheck(graph, 6, 1.3f), Ran::Directly);
  EXPECT_EQ(runAndCheck(graph, 7, 1.3f), Ran::Recorded);
  short_ = false;  // one more
  EXPECT_EQ(runAndCheck(graph, 8, 1.3f), Ran::Directly);
}

TEST_F(StepGraphs, AStepThatReadsBackIsNeverRecorded) {
  gpu::StepGraph graph(gpu());
  readBack_ = true;
  EXPECT_EQ(graph.run([&] { step(input(0), 2.1f); }), Ran::Directly);
  hostRuns_ = 0;
  EXPECT_EQ(graph.run([&] { step(input(1), 2.1f); }), Ran::Directly);
  EXPECT_EQ(hostRuns_, 1) << "the try at recording goes on directly from the read";
  EXPECT_FALSE(graph.recordable());
  const std::vector<float> got = read();
  EXPECT_TRUE(sameBits(got, direct(input(1), 2.1f)));
  EXPECT_EQ(runAndCheck(graph, 2, 2.1f), Ran::Directly);
}

}  // namespace
