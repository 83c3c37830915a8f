// netops' GPU kernels give the host's bits (the spec: "adds in one order on both"). Skipped, by
// name, where there is no GPU; tests/gpu/test_kernels_compile.cpp compiles them everywhere.
#include <gizml/netops.h>
#include <gtest/gtest.h>

#include <bit>
#include <optional>

#include "common/gpu_checks.h"

using namespace gizml;

namespace {

class NetopsGpu : public gizml::test::GpuTest {};

T::Tensor randomTensor(uint64_t seed, const T::Shape& shape, double spread = 2.0) {
  return T::uniform(T::Key(seed), shape, -spread, spread);
}

void expectSameBits(const T::Tensor& gpuResult, const T::Tensor& hostResult) {
  ASSERT_TRUE(gpuResult.onGpu());
  const std::vector<float> got = gpuResult.host().toFloats(), want = hostResult.toFloats();
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && bad++ < 5)
      ADD_FAILURE() << "[" << i << "]: GPU " << got[i] << " vs host " << want[i];
}

TEST_F(NetopsGpu, AttentionGivesTheHostsBits) {
  struct Shape {
    int64_t b, tq, tk, d, e;
    bool causal;
    double rate;
  };
  for (const Shape& s : {Shape{2, 5, 40, 12, 7, false, 0.0}, Shape{2, 6, 35, 64, 64, true, 0.0},
                         Shape{1, 33, 33, 8, 20, true, 0.0}, Shape{2, 4, 21, 8, 5, true, 0.3},
                         Shape{1, 300, 300, 64, 64, false, 0.1}}) {
    const T::Tensor q = randomTensor(1, {s.b, s.tq, s.d}), k = randomTensor(2, {s.b, s.tk, s.d}),
                    v = randomTensor(3, {s.b, s.tk, s.e});
    const T::Key key(17);
    const double scale = 0.125;
    expectSameBits(netops::attention(q.on(*gpu_), k.on(*gpu_), v.on(*gpu_), scale, s.causal, s.rate, key),
                   netops::attention(q, k, v, scale, s.causal, s.rate, key));
  }
}

TEST_F(NetopsGpu, LayerNormAndItsGradientGiveTheHostsBits) {
  const T::Tensor x = randomTensor(5, {3, 7, 45}, 4.0), w = randomTensor(6, {45}), b = randomTensor(7, {45});
  const T::Tensor dy = randomTensor(8, x.shape());
  const std::vector<T::Tensor> host = netops::layerNorm(x, w, b, 1e-5);
  const std::vector<T::Tensor> gpu = netops::layerNorm(x.on(*gpu_), w.on(*gpu_), b.on(*gpu_), 1e-5);
  for (size_t i = 0; i < 3; ++i) expectSameBits(gpu[i], host[i]);
  const std::vector<T::Tensor> hostGrad = netops::layerNormGrad(dy, x, w, host[1], host[2]);
  const std::vector<T::Tensor> gpuGrad = netops::layerNormGrad(dy.on(*gpu_), x.on(*gpu_), w.on(*gpu_), gpu[1], gpu[2]);
  for (size_t i = 0; i < 3; ++i) expectSameBits(gpuGrad[i], hostGrad[i]);
}

TEST_F(NetopsGpu, DropoutGivesTheHostsMask) {
  const T::Tensor x = randomTensor(9, {37, 1001});
  expectSameBits(netops::dropout(x.on(*gpu_), T::Key(10), 0.35), netops::dropout(x, T::Key(10), 0.35));
}

TEST_F(NetopsGpu, CrossEntropyRowsGiveTheHostsBits) {
  for (int64_t classes : {1, 5, 77, 4099}) {
    const T::Tensor logits = randomTensor(4, {9, classes}, 8.0);
    std::vector<int64_t> labels;
    for (int64_t r = 0; r < 9; ++r) labels.push_back((r * 31) % classes);
    expectSameBits(netops::crossEntropyRows(logits.on(*gpu_), labels), netops::crossEntropyRows(logits, labels));
    EXPECT_EQ(netops::crossEntropyLoss(logits.on(*gpu_), labels), netops::crossEntropyLoss(logits, labels));
    expectSameBits(netops::crossEntropyGrad(logits.on(*gpu_), labels, 0.25), netops::crossEntropyGrad(logits, labels, 0.25));
  }
}

}  // namespace#include "common/gpu_checks.h"

