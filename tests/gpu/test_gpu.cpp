// Tensors on a GPU against the same operations on the CPU: bit-equal where docs/tensor.md says
// the GPU follows the CPU's order and rounding, close where it uses the GPU's own exp/log/tanh or
// tensor cores. Each test reports itself skipped, with the reason, where no GPU is found.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/gpu_checks.h"

using namespace gizml;
using gizml::test::expectBits;

namespace {

class Gpu : public gizml::test::GpuTest {};

T::Tensor random(uint64_t seed, const T::Shape& shape, DType dtype = DType::F32) {
  return T::normal(T::Key(seed), shape).cast(dtype);
}

void expectClose(const T::Tensor& gpuResult, const T::Tensor& cpu, double tolerance, const std::string& what) {
  const auto a = gpuResult.host().toDoubles(), b = cpu.toDoubles();
  ASSERT_EQ(a.size(), b.size()) << what;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(std::isnan(a[i]), std::isnan(b[i])) << what << " element " << i;
    if (std::isnan(a[i]) || std::isinf(b[i])) continue;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  EXPECT_LE(std::sqrt(num / std::max(den, 1e-30)), tolerance) << what;
}

}  // namespace

TEST_F(Gpu, Properties) {
  const auto& p = gpu().properties();
  EXPECT_FALSE(p.name.empty());
  EXPECT_GT(p.multiprocessors, 0);
  EXPECT_GT(p.memoryBytes, 0u);
  if (p.vendor == gizhw::gpu::Vendor::Nvidia && p.major == 9 && p.minor == 0) {
    EXPECT_EQ(p.arch, "sm_90a");
  }
  std::cout << gpu().describe() << ": cc " << p.major << "." << p.minor << ", " << p.multiprocessors << " SMs, "
            << (p.memoryBytes >> 20) << " MiB, L2 " << (p.l2Bytes >> 10) << " KiB, driver " << p.driverVersion << "\n";
}

TEST_F(Gpu, SpecStepTwo) {
  const auto a = T::tensor({2, 3}, {1.0, 2.0, 3.0, 4.0, 5.0, 6.0});
  const auto b = T::tensor({3, 2}, {1.0, 0.0, 0.0, 1.0, 1.0, 1.0});
  EXPECT_EQ(a.on(gpu()).matmul(b.on(gpu())).host().text(), "[[4, 5], [10, 11]]");
}

TEST_F(Gpu, RoundTripsEveryDType) {
  for (DType t : kAllDTypes) {
    const auto x = random(1, {3, 5}, t);
    const auto g = x.on(gpu());
    EXPECT_TRUE(g.onGpu());
    EXPECT_EQ(g.host().toDoubles(), x.toDoubles()) << dtypeName(t);
    EXPECT_EQ(g.on(gpu()).storage(), g.storage());  // already there: no copy
    expectBits(x.transpose(0, 1).on(gpu()), x.transpose(0, 1).contiguous(), "transposed view");
    expectBits(g.transpose(0, 1).contiguous(), x.transpose(0, 1).contiguous(), "contiguous on the GPU");
  }
}

TEST_F(Gpu, ExactElementwiseIsBitEqual) {
  const auto x = random(2, {257, 33}), y = random(3, {257, 33}), row = random(4, {33});
  const auto gx = x.on(gpu()), gy = y.on(gpu()), grow = row.on(gpu());
  expectBits(gx.add(gy), x.add(y), "add");
  expectBits(gx.sub(grow), x.sub(row), "sub broadcast");
  expectBits(gx.mul(gy), x.mul(y), "mul");
  expectBits(gx.div(gy), x.div(y), "div");
  expectBits(gx.abs().sqrt(), x.abs().sqrt(), "sqrt");
  expectBits(gx.abs().rsqrt(), x.abs().rsqrt(), "rsqrt");
  expectBits(gx.min(gy), x.min(y), "min");
  expectBits(gx.max(gy), x.max(y), "max");
  expectBits(gx.mod(gy), x.mod(y), "mod");
  expectBits(gx.floor(), x.floor(), "floor");
  expectBits(gx.mul(T::scalar(3.0).on(gpu())).round(), x.mul(T::scalar(3.0)).round(), "round");
  expectBits(gx.relu().sign(), x.relu().sign(), "relu sign");
  expectBits(T::where(gx.gt(gy), gx, gy), T::where(x.gt(y), x, y), "where");
  for (DType t : kAllDTypes) {
    expectBits(gx.mul(T::scalar(100.0).on(gpu())).cast(t), x.mul(T::scalar(100.0)).cast(t), std::string("cast to ") + dtypeName(t));
    const auto xt = x.mul(T::scalar(50.0)).cast(t);
    expectBits(xt.on(gpu()).add(xt.on(gpu())), xt.add(xt), std::string("add in ") + dtypeName(t));
    expectBits(xt.on(gpu()).cast(DType::F16), xt.cast(DType::F16), std::string("to f16 from ") + dtypeName(t));
  }
  const auto i = x.mul(T::scalar(1000.0)).cast(DType::I64), j = y.mul(T::scalar(10.0)).cast(DType::I32);
  const auto gi = i.on(gpu()), gj = j.on(gpu());
  expectBits(gi.mul(gj).sub(gi).mod(gj), i.mul(j).sub(i).mod(j), "integer arithmetic");
  expectBits(gj.pow(T::scalar(3.0, DType::I32).on(gpu())), j.pow(T::scalar(3.0, DType::I32)), "integer pow");
  expectBits(gi.lt(gj), i.lt(j), "integer compare");
}

TEST_F(Gpu, TranscendentalsAreClose) {
  const auto x = random(5, {1000}), gx = x.on(gpu());
  for (T::UnaryOp op : {T::UnaryOp::Exp, T::UnaryOp::Sin, T::UnaryOp::Cos, T::UnaryOp::Tanh, T::UnaryOp::Sigmoid,
                        T::UnaryOp::Silu, T::UnaryOp::GeluErf, T::UnaryOp::GeluTanh})
    expectClose(T::unary(op, gx), T::unary(op, x), 1e-6, T::opName(op));
  expectClose(gx.abs().log(), x.abs().log(), 1e-6, "log");
  expectClose(gx.abs().pow(gx), x.abs().pow(x), 1e-6, "pow");
}

TEST_F(Gpu, LazyChainIsOneKernelAndOneAllocation) {
  const int64_t n = 1 << 20;
  const auto x = T::uniform(T::Key(1), {n}, -2, 2).on(gpu()), y = T::uniform(T::Key(2), {n}, -2, 2).on(gpu());
  auto chain = [](const T::Tensor& a, const T::Tensor& b) {
    return ((T::lazy(a) * 2.0 + T::lazy(b)).relu() - 0.25).mul(T::lazy(a)).abs().sqrt().add(1.0).neg();
  };
  // Building the chain allocates its scalar operands (host tensors); the evaluation allocates
  // only the output.
  const auto lazyChain = chain(x, y);
  const uint64_t before = T::Storage::allocations();
  const auto out = lazyChain.eval();
  EXPECT_EQ(T::Storage::allocations() - before, 1u);
  expectBits(out, chain(x.host(), y.host()).eval(), "fused chain");
}

TEST_F(Gpu, ReductionsAreBitEqual) {
  for (int64_t n : {1, 17, 4096, 4097, 100003}) {
    const auto x = random(6 + n, {3, n}), gx = x.on(gpu());
    const std::string at = " over " + std::to_string(n);
    expectBits(gx.sum(), x.sum(), "sum" + at);
    expectBits(gx.sum({1}), x.sum({1}), "row sums" + at);
    expectBits(gx.sum({0}, true), x.sum({0}, true), "column sums" + at);
    expectBits(gx.mean({1}), x.mean({1}), "mean" + at);
    expectBits(gx.variance({1}, false, 1), x.variance({1}, false, 1), "variance" + at);
    expectBits(gx.max({1}), x.max({1}), "max" + at);
    expectBits(gx.min(), x.min(), "min" + at);
    expectBits(gx.argmax(1), x.argmax(1), "argmax" + at);
    expectBits(gx.argmin(0), x.argmin(0), "argmin" + at);
    const auto small = x.mul(T::scalar(0.01)).add(T::scalar(1.0));
    expectBits(small.on(gpu()).prod({1}), small.prod({1}), "prod" + at);
    expectBits(gx.cumsum(1), x.cumsum(1), "cumsum" + at);
    const auto i = x.mul(T::scalar(100.0)).cast(DType::I32);
    expectBits(i.on(gpu()).sum({1}), i.sum({1}), "integer sum" + at);
    expectBits(i.on(gpu()).max({1}), i.max({1}), "integer max" + at);
    expectBits(i.on(gpu()).mean({1}), i.mean({1}), "integer mean" + at);
    expectBits(i.on(gpu()).cumsum(1), i.cumsum(1), "integer cumsum" + at);
    expectBits(i.on(gpu()).argmax(1), i.argmax(1), "integer argmax" + at);
  }
  const auto bf = random(7, {4, 5000}, DType::BF16);
  expectBits(bf.on(gpu()).sum({1}), bf.sum({1}), "bf16 sum");
  const auto b = random(8, {1000}).gt(T::scalar(0.0));
  expectBits(b.on(gpu()).sum(), b.sum(), "bool count");
  auto nan = random(9, {100});
  nan = T::where(nan.gt(T::scalar(1.5)), T::scalar(NAN), nan);
  expectBits(nan.on(gpu()).argmax(0), nan.argmax(0), "argmax with NaN");
  expectBits(nan.on(gpu()).max(), nan.max(), "max with NaN");
}

TEST_F(Gpu, SoftmaxIsClose) {
  const auto x = random(10, {7, 5000}), gx = x.on(gpu());
  expectClose(gx.softmax(1), x.softmax(1), 1e-6, "softmax");
  expectClose(gx.logSoftmax(0), x.logSoftmax(0), 1e-6, "logSoftmax");
}

TEST_F(Gpu, MatmulF32IsBitEqual) {
  const auto a = random(11, {2, 70, 300}), b = random(12, {300, 45});
  expectBits(a.on(gpu()).matmul(b.on(gpu())), a.matmul(b), "batched f32 matmul");
  expectBits(a.on(gpu()).transpose(1, 2).matmul(a.on(gpu())), a.transpose(1, 2).matmul(a), "transposed operand");
  const auto v = random(13, {300});
  expectBits(b.on(gpu()).transpose(0, 1).matmul(v.on(gpu())), b.transpose(0, 1).matmul(v), "matrix-vector");
  const auto i = a.mul(T::scalar(10.0)).cast(DType::I64), j = b.mul(T::scalar(10.0)).cast(DType::I32);
  expectBits(i.on(gpu()).matmul(j.on(gpu())), i.matmul(j), "integer matmul");
}

TEST_F(Gpu, MatmulHalvesOnTensorCores) {
  for (DType t : {DType::BF16, DType::F16}) {
    for (int64_t s : {64, 200, 257}) {
      const auto a = random(14, {s, s + 3}, t), b = random(15, {s + 3, s - 1}, t);
      expectClose(a.on(gpu()).matmul(b.on(gpu())), a.matmul(b), t == DType::BF16 ? 8e-3 : 1e-3,
                  std::string("matmul ") + dtypeName(t) + " " + std::to_string(s));
    }
  }
}

TEST_F(Gpu, JoiningAndIndexing) {
  const auto x = random(16, {4, 6}), y = random(17, {4, 2});
  const auto gx = x.on(gpu()), gy = y.on(gpu());
  expectBits(T::concat({gx, gy}, 1), T::concat({x, y}, 1), "concat");
  expectBits(T::stack({gx, gx}, 0), T::stack({x, x}, 0), "stack");
  const auto idx = T::tensor({3}, {3, 0, -1}, DType::I64);
  expectBits(gx.indexSelect(0, idx.on(gpu())), x.indexSelect(0, idx), "indexSelect");
  const auto g = T::tensor({2, 6}, {0, 1, 2, 3, 0, 1, 3, 2, 1, 0, 3, 2}, DType::I32);
  expectBits(T::gather(gx.transpose(0, 1).transpose(0, 1), 0, g.on(gpu())), T::gather(x, 0, g), "gather");
  expectBits(gx.slice(1, 1, 5, 2).reshape({8}), x.slice(1, 1, 5, 2).reshape({8}), "slice then reshape");
}

TEST_F(Gpu, MixedDevicesAreAnError) {
  const auto x = random(18, {3}), gx = x.on(gpu());
  try {
    (void)gx.add(x);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("cpu"), std::string::npos) << m;
    EXPECT_NE(m.find(gpu().describe()), std::string::npos) << m;
  }
  EXPECT_THROW((void)gx.matmul(x.reshape({3, 1})), Error);
  EXPECT_THROW((void)T::concat({gx, x}, 0), Error);
  EXPECT_THROW((void)gx.rawData(), Error);  // CPU code cannot read GPU memory
}

TEST_F(Gpu, OutOfMemoryIsAnErrorAndTheAllocatorRecovers) {
  const auto before = gpu().allocatorStats();
  const auto keep = random(19, {1000}).on(gpu());
  try {
    (void)gpu().allocate(gpu().properties().memoryBytes * 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  expectBits(keep.add(keep), random(19, {1000}).add(random(19, {1000})), "after out of memory");
  {
    const auto block = gpu().allocate(1 << 20);
    EXPECT_NE(block.address(), 0u);
  }
  const auto reused = gpu().allocate(1 << 20);  // from the cache
  EXPECT_GT(gpu().allocatorStats().reuses, before.reuses);
}

TEST_F(Gpu, StreamsEventsAndPinnedCopies) {
  auto stream = gpu().newStream();
  auto start = gpu().newEvent(), end = gpu().newEvent();
  auto pinned = gpu().allocatePinned(1 << 20);
  std::memset(pinned.data(), 7, pinned.bytes());
  auto buffer = gpu().allocate(1 << 20);
  start.record(stream);
  gpu().copyToDevice(buffer.address(), pinned.data(), pinned.bytes(), stream);
  std::memset(pinned.data(), 0, pinned.bytes());
  stream.synchronize();
  gpu().copyToHost(pinned.data(), buffer.address(), pinned.bytes(), stream);
  end.record(stream);
  end.synchronize();
  EXPECT_EQ(static_cast<unsigned char*>(pinned.data())[12345], 7);
  EXPECT_GE(end.millisecondsSince(start), 0.0f);
}

TEST_F(Gpu, ClosedGpuIsAnError) {
  auto own = gizhw::gpu::open();
  ASSERT_TRUE(own);
  const auto x = random(20, {10}).on(*own);
  own->close();
  EXPECT_TRUE(own->closed());
  try {
    (void)x.add(x);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("closed"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)x.host(), Error);
  EXPECT_THROW((void)x.sum(), Error);
  own->close();  // twice: nothing
  auto again = gizhw::gpu::open();  // a fresh device
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->closed());
  EXPECT_EQ(random(21, {4}).on(*again).host().toFloats(), random(21, {4}).toFloats());
}
