// attentionRows / attendedRows / crossAttentionRows / headPrepInPlace / neighborhood3d on a GPU
// (src/netops/attention_rows_gpu.cpp) against the exact host functions on the same BF16 inputs,
// the kernels' compile checks (NVRTC + ptxas, hipRTC) and the choice of kernel. The GPU tests
// skip without a GPU (GIZML_GPU_EMULATOR=1 runs them on the host emulator).
//
// Tolerances, as a fraction of the largest |value| of the host result:
// - tensor cores (heads of 64 and 128): P is rounded to BF16 for P V and the sums run in another
//   order (tiles of 64 or 32 keys, f32 accumulate): 1e-2 (measured on the emulator: up to 3.5e-3);
// - the plain kernel (other heads, AMD, pre-sm_80) takes the host's steps in the host's order;
//   what differs is the GPU's expf and the output's rounding to BF16, at most 2^-8 of the largest
//   |value|: 5e-3 (measured: 3.4e-3);
// - with HeadPrep the GPU rounds the prepared q and k to BF16 in qkv (the host keeps them F32):
//   3e-2 (measured: 4.5e-3).
// - the 8-bit path (quantized, heads of 64/128, sm_89+): INT8 Q K^T per block of 64 rows (K less
//   its mean), E4M3 P and V (3 mantissa bits: 2^-4 relative a weight or value, errors that mostly
//   average out over the keys): 8e-2 (measured on the emulator: up to 4.3e-2, where the e4m3
//   product accumulates in full f32; a GPU's FP8 accumulator keeps fewer bits). The test prints
//   the error it measures ("[ measured ]").
// headPrepInPlace itself takes the host's steps in f32 and rounds once: the same bits as the host
// on the same values, rounded to BF16.
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "netops/attention_rows_gpu.h"
#include "netops/kernel_sources.h"

using namespace gizml;
namespace N = gizml::netops;
namespace gpu = gizhw::gpu;

namespace {

constexpr double kMmaTolerance = 1e-2, kPlainTolerance = 5e-3, kPrepTolerance = 3e-2, kQuantTolerance = 8e-2;

// Random BF16 host values (the GPU gets a copy of these exact values).
T::Tensor bf16Random(const T::Shape& shape, uint64_t seed, double scale = 1.0) {
  return T::normal(T::Key(seed), shape, 0.0, scale).cast(DType::BF16);
}

// Every element of got (a GPU result) within tol max|want| of want (a host result).
void expectClose(const T::Tensor& got, const T::Tensor& want, double tol, const std::string& what) {
  ASSERT_TRUE(got.onGpu()) << what;
  const T::Tensor g = got.host();
  ASSERT_EQ(g.dtype(), DType::BF16) << what;
  ASSERT_EQ(g.shape(), want.shape()) << what;
  const auto a = g.toDoubles(), b = want.toDoubles();
  double scale = 0, worst = 0;
  for (double x : b) scale = std::max(scale, std::fabs(x));
  size_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(a[i] - b[i]);
    worst = std::max(worst, err);
    if (!(err <= tol * scale) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << " on the GPU, " << b[i] << " on the host";
  }
  std::printf("[ measured ] %s: max error %.3g of max |out| %.3g\n", what.c_str(), worst / scale, scale);
}

double toleranceFor(const gpu::Gpu& g, int64_t head) {
  return N::detail::attentionKernelFor(g.properties(), head) == N::detail::AttentionKernel::Bf16Mma
             ? kMmaTolerance
             : kPlainTolerance;
}

class NetopsAttentionRowsGpu : public gizml::test::GpuTest {
 protected:
  N::HeadPrep prepFor(int64_t head, int64_t rows, int64_t half, bool onGpu) const {
    N::HeadPrep p;
    p.qw = T::normal(T::Key(91), {head}, 1.0, 0.2);
    p.kw = T::normal(T::Key(92), {head}, 1.0, 0.2);
    if (half > 0) {
      const auto ang = T::normal(T::Key(93), {rows, half}, 0.0, 2.0);
      p.cos = T::lazy(ang).cos().eval();
      p.sin = T::lazy(ang).sin().eval();
    }
    p.eps = 1e-6;
    if (onGpu) {
      p.qw = p.qw.on(*gpu_);
      p.kw = p.kw.on(*gpu_);
      if (half > 0) {
        p.cos = p.cos.on(*gpu_);
        p.sin = p.sin.on(*gpu_);
      }
    }
    return p;
  }
};

}  // namespace

TEST_F(NetopsAttentionRowsGpu, AttendedRowsMatchHost) {
  struct Case {
    int64_t heads, head, n, group, queries;
  };
  // Heads of 64 and 128 (tensor cores), 32 (the plain kernel); n not a multiple of 64; groups
  // that do and do not divide n and cut through the 64-query tiles; queries < n.
  // Group 1: each row sees only itself (out = v, the sharpest mask); 300 rows: five key tiles.
  for (const Case c : {Case{2, 64, 150, 0, 0}, Case{2, 64, 150, 40, 100}, Case{1, 128, 97, 0, 77},
                       Case{2, 32, 90, 50, 0}, Case{1, 64, 70, 1, 0}, Case{1, 64, 300, 0, 0}}) {
    const std::string what = "heads " + std::to_string(c.heads) + " x " + std::to_string(c.head) + ", n " +
                             std::to_string(c.n) + ", group " + std::to_string(c.group) + ", queries " +
                             std::to_string(c.queries);
    const auto qkv = bf16Random({c.n, 3 * c.heads * c.head}, 10 + c.head + c.group, 1.5);
    const auto want = N::attendedRows(qkv, c.heads, c.head, false, c.group, {}, c.queries);
    const auto got = N::attendedRows(qkv.on(*gpu_), c.heads, c.head, false, c.group, {}, c.queries);
    expectClose(got, want, toleranceFor(*gpu_, c.head), what);
  }
}

TEST_F(NetopsAttentionRowsGpu, AttentionRowsIntoARowStridedOutput) {
  // out a column slice of a wider tensor: rows of unit stride, a row stride of its own.
  const int64_t n = 70, heads = 2, head = 64;
  const auto qkv = bf16Random({n, 3 * heads * head}, 5);
  auto wide = T::zeros({n, 3 * heads * head}).cast(DType::BF16).on(*gpu_);
  const auto out = wide.slice(1, heads * head, 2 * heads * head);
  N::attentionRows(qkv.on(*gpu_), heads, head, false, 0, out);
  const auto want = N::attendedRows(qkv, heads, head, false, 0);
  expectClose(out.contiguous(), want, toleranceFor(*gpu_, head), "into a slice");
  // The columns around it are untouched.
  const auto left = wide.slice(1, 0, heads * head).host().toDoubles();
  EXPECT_TRUE(std::all_of(left.begin(), left.end(), [](double x) { return x == 0.0; }));
}

TEST_F(NetopsAttentionRowsGpu, UnalignedRowsTakeThePlainKernel) {
  // A view whose rows start one value apart from 16-byte boundaries (odd row stride): cp.async
  // cannot stage it, so heads of 64 run on the plain kernel, to its tolerance.
  const int64_t n = 40, heads = 1, head = 64, width = 3 * heads * head;
  const auto wide = bf16Random({n, width + 1}, 6);
  const auto qkv = wide.slice(1, 1, width + 1);
  const auto want = N::attendedRows(qkv, heads, head, false, 0);
  const auto got = N::attendedRows(wide.on(*gpu_).slice(1, 1, width + 1), heads, head, false, 0);
  expectClose(got, want, kPlainTolerance, "unaligned rows");
}

TEST_F(NetopsAttentionRowsGpu, HeadPrepInPlaceGivesTheHostsBits) {
  const int64_t rows = 20, n = 13, heads = 2, head = 64, row0 = 5;
  for (int64_t half : {int64_t{0}, int64_t{32}, int64_t{16}}) {
    const auto qkv = bf16Random({rows, 3 * heads * head}, 30 + half, 2.0);
    auto host = qkv.cast(DType::F32);
    N::headPrepInPlace(host, n, heads, head, prepFor(head, row0 + n, half, false), row0);
    auto dev = qkv.on(*gpu_);
    N::headPrepInPlace(dev, n, heads, head, prepFor(head, row0 + n, half, true), row0);
    test::expectBits(dev, host.cast(DType::BF16), "headPrepInPlace, half " + std::to_string(half));
  }
}

TEST_F(NetopsAttentionRowsGpu, AttentionRowsPreparesQkvInPlaceFirst) {
  const int64_t n = 80, heads = 2, head = 64;
  const auto qkv = bf16Random({n, 3 * heads * head}, 40, 2.0);
  const auto want = N::attendedRows(qkv, heads, head, false, 0, {prepFor(head, n, 32, false)});
  auto dev = qkv.on(*gpu_);
  const auto got = N::attendedRows(dev, heads, head, false, 0, {prepFor(head, n, 32, true)});
  expectClose(got, want, kPrepTolerance, "attendedRows with HeadPrep");
  // qkv now holds the prepared q and k (the spec's BF16 path prepares in place), v as it was.
  auto prepared = qkv.on(*gpu_);
  N::headPrepInPlace(prepared, n, heads, head, prepFor(head, n, 32, true), 0);
  test::expectBits(dev, prepared.host(), "qkv after attendedRows with HeadPrep");
}

TEST_F(NetopsAttentionRowsGpu, CrossAttentionRowsMatchesHost) {
  for (int64_t head : {int64_t{64}, int64_t{128}, int64_t{48}}) {
    const int64_t nq = 70, nk = 45, heads = 2;
    const auto q = bf16Random({nq, heads * head}, 50 + head), kv = bf16Random({nk, 2 * heads * head}, 60 + head);
    auto want = T::zeros({nq, heads * head});
    N::crossAttentionRows(q, kv, heads, head, want);
    auto got = T::zeros({nq, heads * head}).cast(DType::BF16).on(*gpu_);
    N::crossAttentionRows(q.on(*gpu_), kv.on(*gpu_), heads, head, got);
    expectClose(got, want, toleranceFor(*gpu_, head), "crossAttentionRows, head " + std::to_string(head));
  }
}

TEST_F(NetopsAttentionRowsGpu, Neighborhood3dMatchesHost) {
  struct Case {
    std::vector<int64_t> grid, kernel;
    int64_t heads, head;
  };
  // Windows shifted at the edges; a kernel longer than its axis (clipped); a plain-kernel head.
  for (const Case& c : {Case{{3, 5, 7}, {3, 3, 5}, 2, 64}, Case{{2, 4, 9}, {5, 3, 3}, 1, 128},
                        Case{{3, 4, 5}, {3, 3, 3}, 2, 16}}) {
    const int64_t positions = c.grid[0] * c.grid[1] * c.grid[2];
    const auto qkv = bf16Random({positions, 3 * c.heads * c.head}, 70 + c.head, 1.5);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head));
    const auto want = N::neighborhood3d(qkv, c.grid, c.kernel, c.heads, scale);
    const auto got = N::neighborhood3d(qkv.on(*gpu_), c.grid, c.kernel, c.heads, scale);
    expectClose(got, want, toleranceFor(*gpu_, c.head), "neighborhood3d, head " + std::to_string(c.head));
  }
}

TEST_F(NetopsAttentionRowsGpu, QuantizedPathWithinItsTolerance) {
  using N::detail::AttentionKernel;
  if (N::detail::attentionKernelFor(gpu_->properties(), 64, true) != AttentionKernel::Int8Fp8)
    GTEST_SKIP() << gpu_->describe() << " has no 8-bit matrix cores (sm_89+): quantized runs the BF16 path there";
  struct Case {
    int64_t heads, head, n, group, queries;
    bool prep;
  };
  // K with a large mean (the outlier channels smoothing removes); groups; queries < n; HeadPrep
  // applied in the quantizing pass, qkv left as it was.
  for (const Case c : {Case{2, 64, 150, 0, 0, false}, Case{1, 128, 130, 50, 100, false}, Case{2, 64, 96, 0, 0, true}}) {
    const std::string what = "8-bit, head " + std::to_string(c.head) + ", n " + std::to_string(c.n) + ", group " +
                             std::to_string(c.group) + (c.prep ? ", HeadPrep" : "");
    auto x = T::normal(T::Key(100 + c.head + c.n), {c.n, 3 * c.heads * c.head}, 0.0, 1.5);
    const auto offset = T::normal(T::Key(101), {1, 3 * c.heads * c.head}, 0.0, 3.0);
    const auto qkv = (T::lazy(x) + T::lazy(offset)).eval().cast(DType::BF16);
    std::vector<N::HeadPrep> hostPrep, gpuPrep;
    if (c.prep) {
      hostPrep.push_back(prepFor(c.head, c.n, c.head / 2, false));
      gpuPrep.push_back(prepFor(c.head, c.n, c.head / 2, true));
    }
    const auto want = N::attendedRows(qkv, c.heads, c.head, true, c.group, hostPrep, c.queries);
    const auto dev = qkv.on(*gpu_);
    const auto got = N::attendedRows(dev, c.heads, c.head, true, c.group, gpuPrep, c.queries);
    expectClose(got, want, kQuantTolerance, what);
    test::expectBits(dev, qkv, what + ": qkv unchanged");
  }
}

TEST_F(NetopsAttentionRowsGpu, BadInputNamesTheArgument) {
  const auto qkv = bf16Random({8, 48}, 80).on(*gpu_);
  expectError([&] { N::attendedRows(T::ones({8, 48}).on(*gpu_), 2, 8, false, 0); }, {"attendedRows", "qkv", "BF16"});
  expectError([&] { N::attendedRows(qkv, 2, 4, false, 0); }, {"attendedRows", "qkv's rows are 48 wide"});
  expectError([&] { N::attendedRows(qkv, 2, 8, false, -1); }, {"attendedRows", "group"});
  expectError([&] { N::attendedRows(qkv, 2, 8, false, 0, {}, 9); }, {"attendedRows", "queries 9"});
  auto out = T::zeros({8, 16}).cast(DType::BF16);
  expectError([&] { N::attentionRows(qkv, 2, 8, false, 0, out); }, {"attentionRows", "out is on cpu"});
  expectError([&] { N::attentionRows(qkv, 2, 8, false, 0, out.on(*gpu_).slice(0, 0, 7)); },
              {"attentionRows", "out has shape [7, 16]"});
  expectError([&] { N::attentionRows(qkv, 2, 8, false, 0, T::zeros({8, 16}).on(*gpu_)); },
              {"attentionRows", "out must be BF16"});
  // prep's tensors must be F32 on qkv's GPU; qkv is not touched when they are not.
  N::HeadPrep p = prepFor(8, 8, 0, false);
  const auto before = qkv.host().toDoubles();
  expectError([&] { N::attentionRows(qkv, 2, 8, false, 0, out.on(*gpu_), {p}); }, {"attentionRows", "prep.qw"});
  EXPECT_EQ(qkv.host().toDoubles(), before);
  expectError([&] { N::headPrepInPlace(qkv, 9, 2, 8, prepFor(8, 8, 0, true), 0); }, {"headPrepInPlace", "n 9"});
  // heads head against the widths of q, kv and out.
  const auto q = bf16Random({4, 16}, 81).on(*gpu_), kv = bf16Random({5, 32}, 82).on(*gpu_);
  auto cout = T::zeros({4, 16}).cast(DType::BF16).on(*gpu_);
  expectError([&] { N::crossAttentionRows(q, kv, 2, 4, cout); }, {"crossAttentionRows", "q's rows are 16 wide"});
  expectError([&] { N::crossAttentionRows(q, kv.slice(1, 0, 30), 2, 8, cout); },
              {"crossAttentionRows", "kv's rows are 30 wide"});
  expectError([&] { N::crossAttentionRows(q, kv.host(), 2, 8, cout); }, {"crossAttentionRows", "kv is on cpu"});
  expectError([&] { N::crossAttentionRows(q, kv.cast(DType::F32), 2, 8, cout); }, {"crossAttentionRows", "kv", "BF16"});
  expectError([&] { N::neighborhood3d(T::ones({8, 48}).on(*gpu_), {2, 2, 2}, {1, 1, 1}, 2, 1.0); },
              {"neighborhood3d", "qkv", "BF16"});
  expectError([&] { N::neighborhood3d(qkv, {2, 2, 2}, {2, 1, 1}, 2, 1.0); }, {"neighborhood3d", "kernel[0]"});
}

TEST(NetopsAttentionRowsGpuChoice, TensorCoresForHeadsOf64And128OnSm80AndLater) {
  using N::detail::AttentionKernel;
  gpu::Properties p;
  p.vendor = gpu::Vendor::Nvidia;
  p.major = 9;
  EXPECT_EQ(N::detail::attentionKernelFor(p, 64), AttentionKernel::Bf16Mma);
  EXPECT_EQ(N::detail::attentionKernelFor(p, 128), AttentionKernel::Bf16Mma);
  EXPECT_EQ(N::detail::attentionKernelFor(p, 96), AttentionKernel::Plain);
  EXPECT_EQ(N::detail::attentionKernelFor(p, 64, true), AttentionKernel::Int8Fp8);
  EXPECT_EQ(N::detail::attentionKernelFor(p, 96, true), AttentionKernel::Plain);
  p.major = 8;
  p.minor = 0;  // A100: no e4m3 product, quantized runs on BF16
  EXPECT_EQ(N::detail::attentionKernelFor(p, 128, true), AttentionKernel::Bf16Mma);
  p.minor = 9;  // Ada
  EXPECT_EQ(N::detail::attentionKernelFor(p, 128, true), AttentionKernel::Int8Fp8);
  p.major = 7;
  EXPECT_EQ(N::detail::attentionKernelFor(p, 64), AttentionKernel::Plain);
  p.vendor = gpu::Vendor::Amd;
  p.major = 9;
  EXPECT_EQ(N::detail::attentionKernelFor(p, 64), AttentionKernel::Plain);
}

// The kernels compile where CI can: NVRTC for sm_80 and sm_90a with the tensor-core path really
// in the PTX (and ptxas assembling it), hipRTC for gfx90a and gfx1030 (the plain kernels only).
TEST(NetopsAttentionRowsGpuCompile, NvrtcAndPtxas) {
  GIZML_SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    gpu::Compiled c;
    try {
      c = gpu::compileCuda(N::netopsAttentionRowsKernelSource(), arch, true);
    } catch (const Error& e) {
      ADD_FAILURE() << arch << ": " << e.what();
      continue;
    }
    EXPECT_NE(c.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos) << arch;
    EXPECT_NE(c.ptx.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos) << arch;
    EXPECT_NE(c.ptx.find("cp.async.cg.shared.global"), std::string::npos) << arch;
    for (const char* kernel : {"gz_ar_prep", "gz_ar_plain", "gz_ar_mma64", "gz_ar_mma128"})
      EXPECT_NE(c.ptx.find(std::string(".entry ") + kernel), std::string::npos) << arch << " " << kernel;
    // The 8-bit path exists where the e4m3 product does (sm_89+): on sm_90a, not on sm_80.
    const bool fp8 = std::string(arch) == "sm_90a";
    EXPECT_EQ(c.ptx.find("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32") != std::string::npos, fp8) << arch;
    EXPECT_EQ(c.ptx.find("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32") != std::string::npos, fp8) << arch;
    for (const char* kernel : {"gz_ar8_prep", "gz_ar8_kmean", "gz_ar8_quant", "gz_ar8_vmax", "gz_ar8_quant_v", "gz_ar8_attn64",
                               "gz_ar8_attn128"})
      EXPECT_EQ(c.ptx.find(std::string(".entry ") + kernel + "(") != std::string::npos, fp8) << arch << " " << kernel;
    test::assemblePtx(c.ptx, arch, std::string("attention rows kernels, ") + arch);
  }
}

TEST(NetopsAttentionRowsGpuCompile, Hiprtc) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    try {
      EXPECT_FALSE(gpu::compileHip(N::netopsAttentionRowsKernelSource(), arch).empty()) << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << arch << ": " << std::string(e.what()).substr(0, 3000);
    }
  }
}
