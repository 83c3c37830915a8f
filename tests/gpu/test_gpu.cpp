// Tensors on a GPU: devices, memory, streams, and the comparisons with the CPU that
// tests/ops/backend_ops_test.cpp's table of operations (small odd shapes) leaves out: reductions of
// long rows (many chunks and blocks) and half-precision products on tensor cores at tile-crossing
// sizes. Each test reports itself skipped, with the reason, where no GPU is found.
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

TEST_F(Gpu, LongReductionsAreBitEqual) {
  // One full chunk of 4096 and 25 of them: the table's rows are at most 4097 long.
  for (int64_t n : {4096, 100003}) {
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
    const auto small = x.mul(T::scalar(0.01)).add(T::scalar(1.0));
    expectBits(small.on(gpu()).prod({1}), small.prod({1}), "prod" + at);
    expectBits(gx.cumsum(1), x.cumsum(1), "cumsum" + at);
    const auto i = x.mul(T::scalar(100.0)).cast(DType::I32);
    expectBits(i.on(gpu()).sum({1}), i.sum({1}), "integer sum" + at);
    expectBits(i.on(gpu()).cumsum(1), i.cumsum(1), "integer cumsum" + at);
  }
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
