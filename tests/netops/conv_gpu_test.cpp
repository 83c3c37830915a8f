// netops' convolution and pooling on a GPU (im2col, col2im, im2col1d, col2im1d, conv1d,
// convTranspose1d, pool2d, pool2dGrad, patchRows, lazyConv, lazyConv3) against the host functions
// on the same values, and the compile checks of their kernels (src/netops/kernels/netops_conv.cu.inc).
// The GPU tests skip without a GPU (GIZML_GPU_EMULATOR=1 runs them on the host emulator).
//
// Bits: every function whose host code fixes an order of additions gives the host's bits (copies;
// col2im's offsets in order; pooling's windows in order; the 1-D convolutions' GPU matmul, which
// adds in the CPU sgemm's order, and their bias add; lazyConv in F32 and lazyConv3 off the matrix
// cores, which are patchRows and that matmul). Tolerance: lazyConv/lazyConv3 in BF16, see
// expectWithinBf16Bound.
#include <gizhw/gpu.h>
#include <gizml/netops.h>
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "netops/kernel_sources.h"

using namespace gizml;
namespace N = gizml::netops;
namespace gpu = gizhw::gpu;

namespace {

T::Tensor randomTensor(const T::Shape& shape, uint64_t seed) { return T::normal(T::Key(seed), shape, 0.0, 1.0); }

std::string label(const char* fn, std::initializer_list<int64_t> args) {
  std::string s = fn;
  for (int64_t a : args) s.append(" ").append(std::to_string(a));
  return s;
}

class NetopsConvGpu : public gizml::test::GpuTest {};

// BF16 products against the host's F32: each operand rounds to BF16 (relative error <= 2^-9), so
// each product moves by at most about 2^-8 of |w p|, and the sum by 2^-8 of S = sum |w| |p| (the
// same convolution of |w| and |x|); the F32 sums in another order add K 2^-24 of S (< 2^-12 S
// for K <= 2^12). Where the product itself is stored in BF16 first (the built-patches path) one
// more rounding of 2^-9 |y|. Bound: 2^-7 S + 2^-8 |y|.
void expectWithinBf16Bound(const T::Tensor& gpuResult, const T::Tensor& host, const T::Tensor& sumAbs,
                           const std::string& what) {
  ASSERT_TRUE(gpuResult.onGpu()) << what;
  const T::Tensor g = gpuResult.host();
  ASSERT_EQ(g.dtype(), DType::F32) << what;
  ASSERT_EQ(g.shape(), host.shape()) << what;
  const auto a = g.toDoubles(), b = host.toDoubles(), s = sumAbs.toDoubles();
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::abs(a[i] - b[i]), std::ldexp(s[i], -7) + std::ldexp(std::abs(b[i]), -8))
        << what << ": element " << i << " is " << a[i] << " on the GPU, " << b[i] << " on the host";
}

}  // namespace

TEST_F(NetopsConvGpu, Im2colAndCol2imGiveTheHostsBits) {
  struct Case {
    int64_t n, c, h, w, kh, kw, stride, pad;
  };
  for (const Case& k : {Case{1, 1, 5, 5, 3, 3, 1, 1}, Case{2, 3, 7, 9, 3, 2, 2, 1}, Case{1, 2, 4, 6, 1, 1, 1, 0},
                        Case{3, 1, 11, 5, 4, 4, 3, 2}, Case{1, 4, 6, 6, 5, 3, 1, 0}, Case{2, 2, 3, 3, 3, 3, 2, 2}}) {
    const std::string what = label("im2col", {k.n, k.c, k.h, k.w, k.kh, k.kw, k.stride, k.pad});
    const auto x = randomTensor({k.n, k.c, k.h, k.w}, 11);
    const auto cols = N::im2col(x, k.kh, k.kw, k.stride, k.pad);
    test::expectBits(N::im2col(on(x), k.kh, k.kw, k.stride, k.pad), cols, what);
    // col2im of other values: overlapping windows (stride < kh) add several entries per element.
    const auto c2 = randomTensor(cols.shape(), 12);
    test::expectBits(N::col2im(on(c2), k.n, k.c, k.h, k.w, k.kh, k.kw, k.stride, k.pad),
                     N::col2im(c2, k.n, k.c, k.h, k.w, k.kh, k.kw, k.stride, k.pad), "col2im of " + what);
  }
  // No images: empty results of the right shapes, nothing launched.
  const auto none = T::zeros({0, 2, 4, 4});
  test::expectBits(N::im2col(on(none), 3, 3, 1, 1), N::im2col(none, 3, 3, 1, 1), "im2col of no images");
  test::expectBits(N::col2im(on(T::zeros({0, 18})), 0, 2, 4, 4, 3, 3, 1, 1), N::col2im(T::zeros({0, 18}), 0, 2, 4, 4, 3, 3, 1, 1),
                   "col2im of no images");
  // A non-contiguous F16 operand is read as F32 on the GPU, as on the host.
  const auto x = randomTensor({2, 5, 4, 3}, 13).permute({0, 3, 2, 1}).cast(DType::F16);
  test::expectBits(N::im2col(on(x), 2, 2, 1, 0), N::im2col(x, 2, 2, 1, 0), "im2col of an f16 view");
}

TEST_F(NetopsConvGpu, Im2col1dAndCol2im1dGiveTheHostsBits) {
  struct Case {
    int64_t t, c, k, stride, pad, dilation, first, count;
  };
  for (const Case& k : {Case{9, 3, 3, 1, 1, 1, 0, -1}, Case{17, 2, 4, 2, 3, 1, 0, -1}, Case{10, 5, 3, 1, 2, 2, 2, 4},
                        Case{7, 1, 1, 3, 0, 1, 1, -1}, Case{12, 4, 5, 3, 4, 1, 0, 0}}) {
    const std::string what = label("im2col1d", {k.t, k.c, k.k, k.stride, k.pad, k.dilation, k.first, k.count});
    const auto x = randomTensor({k.t, k.c}, 21);
    test::expectBits(N::im2col1d(on(x), k.k, k.stride, k.pad, k.dilation, k.first, k.count),
                     N::im2col1d(x, k.k, k.stride, k.pad, k.dilation, k.first, k.count), what);
  }
  struct Adj {
    int64_t n, c, length, k, stride, pad;
  };
  for (const Adj& a : {Adj{5, 3, 9, 3, 2, 1}, Adj{8, 2, 8, 4, 1, 0}, Adj{4, 1, 13, 5, 3, 2}, Adj{1, 6, 2, 3, 1, 1}}) {
    const auto cols = randomTensor({a.n, a.c * a.k}, 22);
    test::expectBits(N::col2im1d(on(cols), a.c, a.length, a.k, a.stride, a.pad),
                     N::col2im1d(cols, a.c, a.length, a.k, a.stride, a.pad),
                     label("col2im1d", {a.n, a.c, a.length, a.k, a.stride, a.pad}));
  }
}

TEST_F(NetopsConvGpu, Conv1dAndConvTranspose1dGiveTheHostsBits) {
  const auto x = randomTensor({19, 6}, 31), w = randomTensor({5, 6, 3}, 32), b = randomTensor({5}, 33);
  for (int64_t stride : {1, 2})
    for (int64_t pad : {0, 1, 2})
      for (int64_t dilation : {1, 2}) {
        const std::string what = label("conv1d", {stride, pad, dilation});
        test::expectBits(N::conv1d(on(x), on(w), {on(b)}, stride, pad, dilation), N::conv1d(x, w, {b}, stride, pad, dilation),
                         what);
        test::expectBits(N::conv1d(on(x), on(w), {}, stride, pad, dilation), N::conv1d(x, w, {}, stride, pad, dilation),
                         what + " without bias");
      }
  // A long window: K = c k = 300 crosses the matmul's 256-term blocks.
  const auto xl = randomTensor({40, 60}, 34), wl = randomTensor({7, 60, 5}, 35);
  test::expectBits(N::conv1d(on(xl), on(wl), {}, 1, 2, 1), N::conv1d(xl, wl, {}, 1, 2, 1), "conv1d with K = 300");
  const auto xt = randomTensor({11, 5}, 36), wt = randomTensor({5, 4, 4}, 37), bt = randomTensor({4}, 38);
  for (int64_t stride : {1, 2, 3})
    for (int64_t pad : {0, 1}) {
      const std::string what = label("convTranspose1d", {stride, pad});
      test::expectBits(N::convTranspose1d(on(xt), on(wt), {on(bt)}, stride, pad), N::convTranspose1d(xt, wt, {bt}, stride, pad),
                       what);
      test::expectBits(N::convTranspose1d(on(xt), on(wt), {}, stride, pad), N::convTranspose1d(xt, wt, {}, stride, pad),
                       what + " without bias");
    }
}

TEST_F(NetopsConvGpu, PoolingAndItsGradientGiveTheHostsBits) {
  auto x = randomTensor({2, 3, 7, 9}, 41);
  // Ties (the first largest wins) and a NaN (it wins) in the first plane; -0 against +0.
  std::vector<double> v = x.toDoubles();
  v[0] = v[1] = v[9] = 5.0;
  v[30] = std::nan("");
  v[60] = -0.0;
  v[61] = 0.0;
  x = T::tensor(x.shape(), v);
  const auto dx = on(x);
  // One window over the whole plane.
  test::expectBits(N::pool2d(dx, 7, 1, false), N::pool2d(x, 7, 1, false), "max pool of one 7 x 7 window");
  for (int64_t size : {1, 2, 3})
    for (int64_t stride : {1, 2, 3})
      for (bool average : {false, true}) {
        const std::string what = label(average ? "mean pool" : "max pool", {size, stride});
        const auto y = N::pool2d(x, size, stride, average);
        test::expectBits(N::pool2d(dx, size, stride, average), y, what);
        const auto dy = randomTensor(y.shape(), 42);
        test::expectBits(N::pool2dGrad(on(dy), dx, size, stride, average), N::pool2dGrad(dy, x, size, stride, average),
                         "gradient of " + what);
      }
}

TEST_F(NetopsConvGpu, PatchRowsGiveTheHostsBitsInEveryDtype) {
  const auto x = randomTensor({3, 7, 10}, 51);
  struct Case {
    int64_t kh, kw, pad, r0, r1;
  };
  for (const Case& k : {Case{3, 3, 1, 0, 7}, Case{3, 3, 1, 2, 5}, Case{1, 1, 0, 0, 7}, Case{5, 3, 2, 6, 7},
                        Case{2, 4, 0, 0, 6}, Case{3, 3, 0, 3, 3}})
    for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
      const std::string what = label("patchRows", {k.kh, k.kw, k.pad, k.r0, k.r1}) + " " + dtypeName(dt);
      test::expectBits(N::patchRows(on(x), k.kh, k.kw, k.pad, k.r0, k.r1, dt), N::patchRows(x, k.kh, k.kw, k.pad, k.r0, k.r1, dt),
                       what);
    }
}

TEST_F(NetopsConvGpu, LazyConvInF32GivesTheHostsBitsAndChains) {
  const auto x = randomTensor({4, 9, 11}, 61), w = randomTensor({6, 4 * 3 * 3}, 62), b = randomTensor({6, 1}, 63);
  for (int64_t pad : {0, 1, 2}) {
    const auto host = N::lazyConv(w, x, 3, 3, pad, DType::F32).eval();
    test::expectBits(N::lazyConv(on(w), on(x), 3, 3, pad, DType::F32).eval(), host, label("lazyConv f32 pad", {pad}));
  }
  // The bias and activation chained on the Lazy run as one pass over the product, as on the host.
  const auto chained = (N::lazyConv(on(w), on(x), 3, 3, 1, DType::F32) + T::lazy(on(b))).relu().eval();
  test::expectBits(chained, (N::lazyConv(w, x, 3, 3, 1, DType::F32) + T::lazy(b)).relu().eval(), "lazyConv + bias, relu");
  const auto w15 = randomTensor({3, 4 * 1 * 5}, 64);
  test::expectBits(N::lazyConv(on(w15), on(x), 1, 5, 2, DType::F32).eval(), N::lazyConv(w15, x, 1, 5, 2, DType::F32).eval(),
                   "lazyConv 1 x 5");
}

TEST_F(NetopsConvGpu, LazyConvInBf16IsWithinItsBound) {
  // Width 16: the implicit GEMM on NVIDIA's matrix cores (patches read inside the product); width
  // 13 and a 5 x 5 window: patches built first, the half-precision matmul. Odd sizes cross tiles:
  // o = 70 (two 64-row tiles), 16 x 13 = 208 pixels, K = 9 c = 45 (two K blocks, the last partial).
  struct Case {
    int64_t o, c, h, w, k, pad;
  };
  for (const Case& k : {Case{70, 5, 13, 16, 3, 1}, Case{8, 3, 5, 8, 3, 1}, Case{9, 2, 9, 13, 3, 1}, Case{4, 3, 7, 8, 5, 2},
                        Case{130, 17, 9, 24, 3, 1}}) {
    const std::string what = label("lazyConv bf16", {k.o, k.c, k.h, k.w, k.k, k.pad});
    const auto x = randomTensor({k.c, k.h, k.w}, 71), w = randomTensor({k.o, k.c * k.k * k.k}, 72);
    const auto host = N::lazyConv(w, x, k.k, k.k, k.pad, DType::F32).eval();
    const auto sumAbs = N::lazyConv(w.abs(), x.abs(), k.k, k.k, k.pad, DType::F32).eval();
    expectWithinBf16Bound(N::lazyConv(on(w), on(x), k.k, k.k, k.pad, DType::BF16).eval(), host, sumAbs, what);
    // x already in BF16 on the GPU: the product reads its bits.
    const auto xb = x.cast(DType::BF16);
    expectWithinBf16Bound(N::lazyConv(on(w), on(xb), k.k, k.k, k.pad, DType::BF16).eval(),
                          N::lazyConv(w, xb, k.k, k.k, k.pad, DType::F32).eval(), sumAbs, what + " of bf16 x");
  }
}

TEST_F(NetopsConvGpu, LazyConv3MatchesTheHost) {
  const int64_t n = 3, c = 2, o = 9;
  const auto w = randomTensor({o, 27 * c}, 81);
  // Width 16: one batched implicit product on NVIDIA's matrix cores (BF16 bound), else a
  // lazyConv a frame in F32 (the host's bits); width 7 always the latter.
  for (int64_t width : {16, 7}) {
    const auto x = randomTensor({n + 2, c, 5, width}, 82).cast(DType::BF16);
    const auto host = N::lazyConv3(w, x).eval();
    const auto got = N::lazyConv3(on(w), on(x)).eval();
    ASSERT_EQ(got.shape(), (T::Shape{n, o, 5 * width}));
    if (width % 8 == 0 && gpu_->properties().vendor == gpu::Vendor::Nvidia && gpu_->properties().major >= 8)
      expectWithinBf16Bound(got, host, N::lazyConv3(w.abs(), x.abs()).eval(), "lazyConv3 width 16");
    else
      test::expectBits(got, host, "lazyConv3 width " + std::to_string(width));
  }
}

TEST_F(NetopsConvGpu, BadInputOnTheGpuNamesTheArgument) {
  const auto x4 = on(T::ones({1, 2, 5, 5}));
  expectError([&] { N::im2col(on(T::ones({2, 5, 5})), 3, 3, 1, 1); }, {"im2col", "x of shape [2, 5, 5]"});
  expectError([&] { N::im2col(x4, 7, 3, 1, 0); }, {"im2col", "kh = 7"});
  expectError([&] { N::col2im(on(T::ones({3, 18})), 1, 2, 5, 5, 3, 3, 1, 1); }, {"col2im", "cols of shape [3, 18]"});
  expectError([&] { N::im2col1d(on(T::ones({6, 2})), 3, 0, 0, 1); }, {"im2col1d", "stride = 0"});
  expectError([&] { N::col2im1d(on(T::ones({4, 5})), 2, 6, 3, 1, 0); }, {"col2im1d", "cols of shape [4, 5]"});
  expectError([&] { N::conv1d(on(T::ones({6, 2})), T::ones({3, 2, 2}), {}, 1, 0, 1); }, {"conv1d", "two devices"});
  expectError([&] { N::conv1d(on(T::ones({6, 2})), on(T::ones({3, 2, 2})), {on(T::ones({4}))}, 1, 0, 1); },
              {"conv1d", "bias of shape [4]"});
  expectError([&] { N::convTranspose1d(on(T::ones({6, 3})), on(T::ones({2, 3, 2})), {}, 1, 0); },
              {"convTranspose1d", "w of shape [2, 3, 2]"});
  expectError([&] { N::pool2d(x4, 6, 1, false); }, {"pool2d", "size = 6"});
  expectError([&] { N::pool2dGrad(on(T::ones({1, 2, 3, 3})), x4, 2, 2, true); }, {"pool2dGrad", "dy of shape"});
  expectError([&] { N::pool2d(on(T::ones({1, 1, 4, 4}, DType::I32)), 2, 2, false); }, {"pool2d", "x has dtype"});
  const auto x3 = on(T::ones({2, 5, 5}));
  expectError([&] { N::patchRows(x3, 3, 3, 1, 2, 9, DType::F32); }, {"patchRows", "r1 9"});
  expectError([&] { N::patchRows(x3, 3, 3, 1, 0, 5, DType::I8); }, {"patchRows", "dtype"});
  expectError([&] { N::patchRows(on(T::ones({2, 5, 5}, DType::I32)), 3, 3, 1, 0, 5, DType::F32); },
              {"patchRows", "x has dtype"});
  expectError([&] { N::lazyConv(on(T::ones({4, 17})), x3, 3, 3, 1, DType::BF16); }, {"lazyConv", "w has 17 inputs"});
  expectError([&] { N::lazyConv(T::ones({4, 18}), x3, 3, 3, 1, DType::BF16); }, {"lazyConv", "two devices"});
  expectError([&] { N::lazyConv(on(T::ones({4, 18})), x3, 9, 3, 1, DType::BF16); }, {"lazyConv", "does not fit"});
  expectError([&] { N::lazyConv3(on(T::ones({4, 27})), on(T::ones({3, 2, 4, 8}))); }, {"lazyConv3", "expected 27 c"});
  expectError([&] { N::lazyConv3(on(T::ones({4, 54})), on(T::ones({2, 2, 4, 8}))); }, {"lazyConv3", "frames"});
}

// ---- Compile checks of the kernel source (no GPU needed): NVRTC + ptxas for sm_80 and sm_90a,
// hipRTC for gfx90a and gfx1030 (the plain path of the implicit GEMM).
namespace {

const char* kArchs[] = {"sm_80", "sm_90a"};

// The PTX of one kernel: from its .entry to the next (its device functions are inlined).
std::string entryPtx(const std::string& ptx, const std::string& name) {
  const size_t at = ptx.find(".entry " + name);
  if (at == std::string::npos) return {};
  const size_t next = ptx.find(".entry ", at + 1);
  return ptx.substr(at, next == std::string::npos ? std::string::npos : next - at);
}

}  // namespace

TEST(NetopsConvGpuCompile, NvrtcAndPtxasForSm80AndSm90a) {
  GIZML_SKIP_WITHOUT_NVRTC();
  for (const char* arch : kArchs) {
    gpu::Compiled c;
    try {
      c = gpu::compileCuda(N::netopsConvKernelSource(), arch, true);
    } catch (const Error& e) {
      ADD_FAILURE() << "netops_conv.cu.inc for " << arch << ": " << e.what();
      continue;
    }
    EXPECT_FALSE(c.cubin.empty()) << arch;
    test::assemblePtx(c.ptx, arch, std::string("netops_conv.cu.inc for ") + arch);
    for (const char* kernel : {"gz_conv_implicit_bf16", "gz_conv_implicit_f32"}) {
      const std::string body = entryPtx(c.ptx, kernel);
      ASSERT_FALSE(body.empty()) << kernel << " is missing from the PTX for " << arch;
      // The matrix-core path, not the plain one.
      EXPECT_NE(body.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos) << kernel << " " << arch;
      EXPECT_NE(body.find("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"), std::string::npos) << kernel << " " << arch;
    }
    for (const char* kernel : {"gz_conv_im2col", "gz_conv_col2im", "gz_conv_im2col1d", "gz_conv_col2im1d", "gz_conv_pool",
                               "gz_conv_pool_grad", "gz_conv_patch_rows"})
      EXPECT_FALSE(entryPtx(c.ptx, kernel).empty()) << kernel << " is missing from the PTX for " << arch;
  }
}

TEST(NetopsConvGpuCompile, HiprtcForGfx90aAndGfx1030) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    try {
      EXPECT_FALSE(gpu::compileHip(N::netopsConvKernelSource(), arch).empty()) << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << "netops_conv.cu.inc for " << arch << ": " << std::string(e.what()).substr(0, 3000);
    }
  }
}
