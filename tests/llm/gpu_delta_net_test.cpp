// Gated DeltaNet's mixing on a GPU (llm/ops/gpu/delta_net.cu.inc): a run of one row by the
// recurrence, a longer one by the delta rule in chunks of 64 (gz_lm_delta_chunks, then the state
// through each run's chunks, gz_lm_delta_carry), as the CPU does (cpu/delta_net.cpp, checked
// against transformers through the Qwen 3.5 fixtures); keys longer than the chunks' kernel holds
// by the recurrence. Real head sizes (Qwen 3.5's 128 x 128) and odd ones, runs that end a chunk early, exactly or one row after, from states that are not zero,
// with decays that fall through the denormal range within a chunk. On the first GPU, in CI the
// host GPU emulator (ctest emulator_test_llm); skipped where there is none.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <random>
#include <tuple>
#include <vector>

#include "common/float_compare.h"
#include "common/gpu_checks.h"
#include "llm/ops/delta_net.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kKeyHeads = 2, kValueHeads = 4, kKernel = 4;
// Runs of rows: a prefill of 200 (four chunks, the last of 8), a decode step, one chunk and one
// row, exactly a chunk, two rows.
const std::vector<int64_t> kRuns = {200, 1, 65, 64, 2};

std::vector<double> normals(size_t n, uint32_t seed, double sd) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, sd);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

// One layer's inputs for the rows of all runs, and each run's state before them.
struct Inputs {
  ops::DeltaNetShape shape;
  tensor::Tensor qkv, b, a, taps, decayRate, dtBias;
  std::vector<std::vector<double>> conv, memory;

  Inputs(int64_t keyDim, int64_t valueDim) : shape{kKeyHeads, kValueHeads, keyDim, valueDim, kKernel} {
    int64_t rows = 0;
    for (int64_t n : kRuns) rows += n;
    const int64_t channels = shape.channels();
    qkv = tensor::tensor({rows, channels}, normals(static_cast<size_t>(rows * channels), 1, 1.0));
    b = tensor::tensor({rows, kValueHeads}, normals(static_cast<size_t>(rows * kValueHeads), 2, 1.0));
    a = tensor::tensor({rows, kValueHeads}, normals(static_cast<size_t>(rows * kValueHeads), 3, 2.0));
    taps = tensor::tensor({kKernel, channels}, normals(static_cast<size_t>(kKernel * channels), 4, 0.5));
    // -exp(A_log) for A_log = log of 0.5, 2, 8, 16 (transformers draws A from U(0, 16)): the last
    // heads' decays reach e^-100 and less within a chunk.
    decayRate = tensor::tensor({kValueHeads}, std::vector<double>{-0.5, -2.0, -8.0, -16.0});
    dtBias = tensor::tensor({kValueHeads}, normals(kValueHeads, 5, 1.0));
    for (size_t r = 0; r < kRuns.size(); ++r) {
      conv.push_back(normals(static_cast<size_t>((kKernel - 1) * channels), 10 + r, 1.0));
      memory.push_back(normals(static_cast<size_t>(kValueHeads * keyDim * valueDim), 20 + r, 0.1));
    }
  }
};

// The mixed rows and each run's state after them.
struct Mixed {
  std::vector<float> o;
  std::vector<std::vector<float>> conv, memory;
};

// Runs `which` of kRuns mixed in one call, on `gpu` or the CPU.
Mixed mix(const Inputs& in, const std::vector<size_t>& which, const std::optional<gizhw::gpu::Gpu>& gpu) {
  const auto place = [&](const tensor::Tensor& t) { return gpu ? t.on(*gpu) : t.clone(); };
  const ops::DeltaNetShape& s = in.shape;
  std::vector<ops::DeltaNetState> states;
  std::vector<int64_t> firsts;
  int64_t first = 0;
  for (size_t r = 0; r < kRuns.size(); ++r) {
    firsts.push_back(first);
    first += kRuns[r];
  }
  for (size_t r : which)
    states.push_back({place(tensor::tensor({s.kernel - 1, s.channels()}, in.conv[r])),
                      place(tensor::tensor({s.valueHeads, s.keyDim, s.valueDim}, in.memory[r]))});
  std::vector<ops::DeltaNetRows> runs;
  for (size_t i = 0; i < which.size(); ++i) runs.push_back({firsts[which[i]], kRuns[which[i]], &states[i]});
  const tensor::Tensor o = place(tensor::zeros({first, s.valueHeads * s.valueDim}));
  ops::deltaNetMix(s, {place(in.taps), place(in.decayRate), place(in.dtBias)}, place(in.qkv), place(in.b),
                   place(in.a), runs, o);
  Mixed out;
  const std::vector<float> all = o.toFloats();
  const int64_t width = s.valueHeads * s.valueDim;
  for (size_t r : which)
    out.o.insert(out.o.end(), all.begin() + firsts[r] * width, all.begin() + (firsts[r] + kRuns[r]) * width);
  for (const ops::DeltaNetState& state : states) {
    out.conv.push_back(state.conv.toFloats());
    out.memory.push_back(state.memory.toFloats());
  }
  return out;
}

class GpuDeltaNet : public test::GpuTest, public ::testing::WithParamInterface<std::tuple<int64_t, int64_t>> {};

TEST_P(GpuDeltaNet, RunsMixAsOnTheCpuAndAsEachAlone) {
  const auto [keyDim, valueDim] = GetParam();
  const Inputs in(keyDim, valueDim);
  const std::vector<size_t> all = {0, 1, 2, 3, 4};
  const Mixed cpu = mix(in, all, std::nullopt), got = mix(in, all, gpu());
  const double outputError = test::relativeMaxError(got.o, cpu.o);
  double stateError = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(got.conv[r], cpu.conv[r]) << "run " << r << "'s conv state";
    stateError = std::max(stateError, test::relativeMaxError(got.memory[r], cpu.memory[r]));
  }
  std::printf("keys %lld, values %lld: outputs within %.2e of their range of the CPU's, states %.2e\n",
              static_cast<long long>(keyDim), static_cast<long long>(valueDim), outputError, stateError);
  // f32 sums in other orders (measured 1.7e-7 to 2.0e-7 in chunks; 2.3e-6 and 3.6e-6 by the
  // recurrence, against the CPU's chunks); a wrong row, chunk or decay moves them by more than 1e-2.
  EXPECT_LT(outputError, 1e-5);
  EXPECT_LT(stateError, 1e-5);
  // Each run's rows and state are the bits it gets alone: nothing depends on the runs beside it.
  size_t offset = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    const Mixed alone = mix(in, {r}, gpu());
    const size_t n = alone.o.size();
    EXPECT_EQ(alone.o, std::vector<float>(got.o.begin() + offset, got.o.begin() + offset + n)) << "run " << r;
    EXPECT_EQ(alone.memory[0], got.memory[r]) << "run " << r;
    offset += n;
  }
}

// Keys of 320, longer than the chunks' kernel holds (GZ_LM_DELTA_MAX_KEY): by the recurrence.
INSTANTIATE_TEST_SUITE_P(HeadSizes, GpuDeltaNet,
                         ::testing::Values(std::tuple<int64_t, int64_t>{128, 128}, std::tuple<int64_t, int64_t>{64, 48},
                                           std::tuple<int64_t, int64_t>{320, 16}));

}  // namespace
