// Stream capture into graphs (Gpu::capture, Graph::launch): a captured sequence of launches,
// copies and fills replayed gives the bits of running it directly; a replay reads its buffers'
// contents as they are when it runs (graphs bind pointers, not values) and the arguments' values
// as they were captured; what a capture cannot hold is an Error and leaves the stream usable.
// Runs on any GPU and on the emulator (GIZML_GPU_EMULATOR=1).
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/gpu_checks.h"
#include "graph_kernels.h"

namespace {

namespace gpu = gizhw::gpu;

const char* const kSource = gizml::test::kGraphKernels;

class Graphs : public gizml::test::GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!gpu().canCapture()) GTEST_SKIP() << "the driver of " << gpu().describe() << " has no graphs";
  }
  static constexpr int kN = 200;

  // The buffers of one run: x, y (filled with 0x3e bytes first) and z.
  struct Run {
    gpu::Buffer x, y, z;
  };
  Run buffers(const std::vector<float>& x) {
    Run r{gpu().allocate(kN * 4), gpu().allocate(kN * 4), gpu().allocate(kN * 4)};
    gpu().copyToDevice(r.x.address(), x.data(), kN * 4, gpu().stream());
    return r;
  }
  // The sequence under test: a fill, two launches, a copy on the device, a launch.
  void work(const Run& r, float a) {
    const gpu::Stream& s = gpu().stream();
    gpu::Kernel mix = gpu().kernel(kSource, "graph_mix"), square = gpu().kernel(kSource, "graph_square");
    uint64_t x = r.x.address(), y = r.y.address(), z = r.z.address();
    int n = kN;
    gpu().fill(y, 0x3e, kN * 4, s);
    mix.launch({(kN + 63) / 64}, {64}, 0, s, {&x, &y, &a, &n});
    square.launch({(kN + 63) / 64}, {64}, 0, s, {&y, &n});
    gpu().copyOnDevice(z, y, kN * 4, s);
    mix.launch({(kN + 63) / 64}, {64}, 0, s, {&y, &z, &a, &n});
  }
  std::vector<float> read(const gpu::Buffer& b) {
    std::vector<float> v(kN);
    gpu().copyToHost(v.data(), b.address(), kN * 4, gpu().stream());
    gpu().synchronize();
    return v;
  }
  static std::vector<float> ramp(float scale) {
    std::vector<float> v(kN);
    for (int i = 0; i < kN; ++i) v[i] = scale * static_cast<float>(i - kN / 3);
    return v;
  }
  static void expectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what;
  }
};

TEST_F(Graphs, ReplayGivesTheBitsOfRunningTheWorkAndReadsTheBuffersAsTheyAreThen) {
  const std::vector<float> x1 = ramp(0.01f), x2 = ramp(-0.023f);
  const Run direct = buffers(x1);
  work(direct, 1.7f);
  const std::vector<float> expected1 = read(direct.z);
  work(direct, 1.7f);  // the same inputs again: a check that the work itself is repeatable
  expectSameBits(read(direct.z), expected1, "the direct run twice");

  const Run captured = buffers(x1);
  gpu().fill(captured.z.address(), 0, kN * 4, gpu().stream());
  float a = 1.7f;
  const gpu::Graph graph = gpu().capture(gpu().stream(), [&] { work(captured, a); });
  ASSERT_TRUE(graph);
  expectSameBits(read(captured.z), std::vector<float>(kN, 0.0f), "z after the capture (recorded, not run)");

  graph.launch(gpu().stream());
  expectSameBits(read(captured.z), expected1, "the first replay");
  graph.launch(gpu().stream());
  expectSameBits(read(captured.z), expected1, "the second replay");

  // New contents of x: the replay reads them. The kernel argument a was copied at the capture.
  a = 5.0f;
  gpu().copyToDevice(captured.x.address(), x2.data(), kN * 4, gpu().stream());
  graph.launch(gpu().stream());
  work(direct, 1.0f);  // another value of a, so that the next check cannot pass by chance
  gpu().copyToDevice(direct.x.address(), x2.data(), kN * 4, gpu().stream());
  work(direct, 1.7f);
  expectSameBits(read(captured.z), read(direct.z), "a replay after x changed");
}

TEST_F(Graphs, PinnedHostCopiesAreRecordedAndReadTheHostMemoryAtEachReplay) {
  gpu::PinnedBuffer in = gpu().allocatePinned(kN * 4), out = gpu().allocatePinned(kN * 4);
  const Run r = buffers(ramp(0.0f));
  const gpu::Graph graph = gpu().capture(gpu().stream(), [&] {
    gpu().copyToDevice(r.x.address(), in.data(), kN * 4, gpu().stream());
    work(r, 0.9f);
    gpu().copyToHost(out.data(), r.z.address(), kN * 4, gpu().stream());
  });
  for (float scale : {0.02f, -0.05f}) {
    const std::vector<float> x = ramp(scale);
    std::memcpy(in.data(), x.data(), kN * 4);
    graph.launch(gpu().stream());
    gpu().synchronize();
    std::vector<float> got(kN);
    std::memcpy(got.data(), out.data(), kN * 4);
    const Run direct = buffers(x);
    work(direct, 0.9f);
    expectSameBits(got, read(direct.z), "the replay's host copies");
  }
}

TEST_F(Graphs, WhatACaptureCannotHoldIsAnErrorAndTheStreamStaysUsable) {
  const Run r = buffers(ramp(0.01f));
  const auto message = [&](const std::function<void()>& inside) {
    try {
      gpu().capture(gpu().stream(), inside);
    } catch (const gizml::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              work(r, 1.0f);
              gpu().synchronize();
            }).find("cuStreamSynchronize"),
            std::string::npos);
  // An exception of the caller's own ends the capture too.
  EXPECT_EQ(message([&] { throw gizml::Error("mine"); }), "mine");
  if (gpu().properties().emulated) {
    // The emulator refuses a captured copy with pageable host memory, and memory from the driver.
    std::vector<float> host(kN);
    EXPECT_NE(message([&] { gpu().copyToDevice(r.x.address(), host.data(), kN * 4, gpu().stream()); }).find("not pinned"),
              std::string::npos);
    EXPECT_NE(message([&] { gpu().allocate(size_t{3} << 20); }).find("cuMemAlloc"), std::string::npos);
  }
  // The stream still runs and captures work.
  const Run direct = buffers(ramp(0.01f));
  work(direct, 1.0f);
  const gpu::Graph graph = gpu().capture(gpu().stream(), [&] { work(r, 1.0f); });
  graph.launch(gpu().stream());
  expectSameBits(read(r.z), read(direct.z), "a capture after the failed ones");
}

}  // namespace
