// RoPE of a pass's rows (llm/ops/rows.h: ops::rope) at a position a row ([rows]: what a batch of
// text rows passes) against a position a pair ([rows, half]: multimodal RoPE's form), on the CPU
// and on the GPU (gz_lm_rope, q and k in one launch), where the GPU's rows are checked against the
// CPU's. On the first GPU, in CI the host GPU emulator (ctest emulator_test_llm); the GPU part is
// skipped where there is none.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include <gizml/tensor.h>

#include "common/float_compare.h"
#include "common/gpu_checks.h"
#include "llm/ops/rows.h"

using namespace gizml;
using namespace gizml::llm;

namespace {

constexpr int64_t kRows = 5, kQHeads = 3, kKHeads = 1, kHeadDim = 8, kHalf = 4;
const std::vector<int32_t> kPositions = {0, 7, 3, 100, 2};

struct Turned {
  std::vector<float> q, k;
};

// q and k of fixed values turned at kPositions, given as [rows] or as [rows, half], where
// `gpu` says (nullopt: in host memory).
Turned turned(bool perRow, const std::optional<gizhw::gpu::Gpu>& gpu) {
  tensor::Tensor q = tensor::empty({kRows, kQHeads * kHeadDim}), k = tensor::empty({kRows, kKHeads * kHeadDim});
  for (int64_t i = 0; i < q.numel(); ++i) q.data<float>()[i] = static_cast<float>((i * 37 % 101) - 50) / 25.0f;
  for (int64_t i = 0; i < k.numel(); ++i) k.data<float>()[i] = static_cast<float>((i * 53 % 89) - 44) / 22.0f;
  tensor::Tensor invFreq = tensor::empty({kHalf});
  for (int64_t i = 0; i < kHalf; ++i) invFreq.data<float>()[i] = 1.0f / static_cast<float>(1 << (3 * i));
  tensor::Tensor positions = perRow ? tensor::empty({kRows}, DType::I32) : tensor::empty({kRows, kHalf}, DType::I32);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t i = 0; i < (perRow ? 1 : kHalf); ++i)
      positions.data<int32_t>()[r * (perRow ? 1 : kHalf) + i] = kPositions[static_cast<size_t>(r)];
  if (gpu) q = q.on(*gpu), k = k.on(*gpu), invFreq = invFreq.on(*gpu);
  ops::rope(q, kQHeads, k, kKHeads, kHeadDim, invFreq, 0, &positions);
  return {q.toFloats(), k.toFloats()};
}

}  // namespace

TEST(ModelRope, APositionARowTurnsAsThatPositionForEachPair) {
  const Turned row = turned(true, std::nullopt), pair = turned(false, std::nullopt);
  EXPECT_EQ(row.q, pair.q);
  EXPECT_EQ(row.k, pair.k);
}

class GpuModelRope : public test::GpuTest {};

TEST_F(GpuModelRope, QueriesAndKeysTurnInOneLaunchAsOnTheCpu) {
  const Turned cpu = turned(true, std::nullopt);
  const uint64_t before = gpu().activity().launches;
  const Turned row = turned(true, gpu());
  EXPECT_EQ(gpu().activity().launches - before, 1u);
  const Turned pair = turned(false, gpu());
  EXPECT_EQ(row.q, pair.q);
  EXPECT_EQ(row.k, pair.k);
  // cos and sin in double on both: the same values but for the last bits of another libm.
  EXPECT_LT(test::relativeMaxError(row.q, cpu.q), 1e-6);
  EXPECT_LT(test::relativeMaxError(row.k, cpu.k), 1e-6);
}
