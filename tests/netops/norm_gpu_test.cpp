// netops' norms, ConvRot INT8 rows, groupNorm, affine and argmax on GPU tensors against the host
// functions on the same values (BF16 inputs, so both read the same numbers), and the compile
// checks of their kernel source (src/netops/kernels/netops_norm.cu.inc). The GPU runs skip without
// a GPU (GIZML_GPU_EMULATOR=1 runs them on the host emulator).
//
// Where the bits must agree (the same steps in the same order; expectBits):
//   pixelNormInto, modulatedNorm(Into), gatedNormAddInto: each row's (pixel's) sums in element
//     order by one GPU thread, as the host; SiLU through the shared gz_exp;
//   int8Rows(Into), modulatedInt8RowsInto: the Hadamard stages in the host's order, max |y| (order
//     free), one division and rint: codes and scales bit for bit;
//   affine with F32 compute: the GPU's F32 matmul takes the CPU's fma chains, the bias one add;
//   argmax: comparisons only.
// Tolerances where the orders differ:
//   groupNorm: the GPU adds each slice in f32 (the host in f64), so mean and variance may move by
//     a few f32 ulps: |gpu - host| <= 1e-5 (1 + |host|);
//   affine with BF16 compute: tensor cores add in their own order and round the product to BF16
//     before the F32 bias: |gpu - host| <= 2^-8 |product| + 1e-5 sum_i |x_i w_i| + ulp of the bias add.
#include <gizml/netops.h>
#include <gizml/netops_rows.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "netops/kernel_sources.h"

using namespace gizml;
namespace N = gizml::netops;
namespace gpu = gizhw::gpu;

namespace {

class NetopsNormGpu : public gizml::test::GpuTest {};

// Normal values rounded to BF16 (as BF16, or as their F32 values with asF32).
T::Tensor bf16Values(const T::Shape& shape, uint64_t seed, double scale = 1.0, double mean = 0.0, bool asF32 = false) {
  const auto t = T::normal(T::Key(seed), shape, mean, scale).cast(DType::BF16);
  return asF32 ? t.cast(DType::F32) : t;
}

// The modulation operands of modulatedNorm for x [rows, width]: w, shift and scale of 3 rows,
// and a map cycling through them.
struct Modulation {
  T::Tensor w, shift, scale, map;
};
Modulation modulation(int64_t rows, int64_t width, uint64_t seed) {
  std::vector<double> map(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) map[static_cast<size_t>(r)] = static_cast<double>((r * 2) % 3);
  return {bf16Values({width}, seed, 0.5, 1.0, true), bf16Values({3, width}, seed + 1, 0.3, 0.0, true),
          bf16Values({3, width}, seed + 2, 0.2, 0.0, true), T::tensor({rows}, map)};
}

}  // namespace

TEST_F(NetopsNormGpu, PixelNormHasTheHostsBits) {
  for (DType dt : {DType::BF16, DType::F32})
    for (bool act : {false, true}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + (act ? " act" : ""));
      const auto x = bf16Values({2, 5, 37}, 1, 2.0).cast(dt);  // odd channel and pixel counts
      auto want = T::zeros(x.shape(), dt);
      N::pixelNormInto(x, 1e-6, act, want);
      auto out = on(T::zeros(x.shape(), dt));
      N::pixelNormInto(on(x), 1e-6, act, out);
      test::expectBits(out, want, "pixelNormInto");
      auto inPlace = on(x);  // out may be x
      N::pixelNormInto(inPlace, 1e-6, act, inPlace);
      test::expectBits(inPlace, want, "pixelNormInto in place");
      const auto base = bf16Values({2, 37, 5}, 21, 2.0).cast(dt);  // x a transposed view
      auto wantView = T::zeros({2, 5, 37}, dt), outView = on(T::zeros({2, 5, 37}, dt));
      N::pixelNormInto(base.transpose(1, 2), 1e-6, act, wantView);
      N::pixelNormInto(on(base).transpose(1, 2), 1e-6, act, outView);
      test::expectBits(outView, wantView, "pixelNormInto of a view");
    }
}

TEST_F(NetopsNormGpu, ModulatedNormHasTheHostsBits) {
  // 7 rows: one block of row statistics; 70: three.
  for (int64_t rows : {int64_t{7}, int64_t{70}})
    for (bool centered : {false, true}) {
      SCOPED_TRACE(std::to_string(rows) + (centered ? " rows, centered" : " rows, rms"));
      const int64_t width = 96;
      const auto x = bf16Values({rows, width}, 2, 3.0, 0.5);
      const auto m = modulation(rows, width, 3);
      const auto want = N::modulatedNorm(x, m.w, m.shift, m.scale, m.map, 1e-6, centered);
      const auto got = N::modulatedNorm(on(x), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6, centered);
      EXPECT_EQ(got.dtype(), DType::BF16);  // the spec's BF16 on a GPU: the host's F32 rounded once
      test::expectBits(got, want.cast(DType::BF16), "modulatedNorm");
      auto y = on(T::zeros({rows, width}));
      N::modulatedNormInto(on(x.cast(DType::F32)), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6, y, centered);
      test::expectBits(y, want, "modulatedNormInto F32");
    }
}

TEST_F(NetopsNormGpu, ModulatedNormMakesRowsOfABadMapNaN) {
  const auto x = bf16Values({2, 8}, 4);
  const auto m = modulation(2, 8, 5);
  const auto bad = T::tensor({2}, {1.0, 3.0});  // 3 is past the 3 modulation rows
  const auto y = N::modulatedNorm(on(x), on(m.w), on(m.shift), on(m.scale), on(bad), 1e-6).host().toDoubles();
  for (int64_t c = 0; c < 8; ++c) {
    EXPECT_FALSE(std::isnan(y[c])) << c;
    EXPECT_TRUE(std::isnan(y[8 + c])) << c;
  }
}

TEST_F(NetopsNormGpu, GatedNormAddHasTheHostsBits) {
  const int64_t rows = 5, width = 77;
  const auto base = bf16Values({rows, width}, 6, 1.0, 0.0, true), y = bf16Values({rows, width}, 7, 4.0);
  const auto m = modulation(rows, width, 8);
  auto x = on(base);  // before the host adds into base's values
  auto want = base.contiguous();
  N::gatedNormAddInto(want, y, m.w, m.shift, m.map, 1e-5);
  N::gatedNormAddInto(x, on(y), on(m.w), on(m.shift), on(m.map), 1e-5);
  test::expectBits(x, want, "gatedNormAddInto");
}

TEST_F(NetopsNormGpu, Int8RowsHaveTheHostsCodesAndScales) {
  // 3 groups, and 40 groups: past the 32 a thread keeps, the rest rotated again.
  for (int64_t width : {int64_t{768}, int64_t{40 * 256}})
    for (int64_t bits : {int64_t{8}, int64_t{4}}) {
      SCOPED_TRACE("width " + std::to_string(width) + ", " + std::to_string(bits) + " bits");
      const auto x = bf16Values({5, width}, 9 + width, 2.0);
      const auto want = N::int8Rows(x, bits);
      const auto got = N::int8Rows(on(x), bits);
      ASSERT_EQ(got.size(), 2u);
      const DType codes = bits == 4 ? DType::I4 : DType::I8;  // 4-bit codes are I4 on a GPU
      EXPECT_EQ(got[0].dtype(), codes);
      test::expectBits(got[0], want[0].cast(codes), "int8Rows q");  // the host's F32 codes hold -0
      test::expectBits(got[1], want[1], "int8Rows s");
      // F32 x of full 24-bit mantissas: nearly every addition of the transform rounds, so the
      // scales (max |y| / top) show any change of the order of additions.
      const auto xf = T::normal(T::Key(30 + width), {5, width}, 0.0, 2.0);
      const auto wantF = N::int8Rows(xf, bits);
      auto q = on(T::zeros({5, width})), s = on(T::zeros({5, 1}));  // F32 codes, as the host's
      N::int8RowsInto(on(xf), q, s, bits);
      test::expectBits(q, wantF[0], "int8RowsInto F32 q");
      test::expectBits(s, wantF[1], "int8RowsInto s");
    }
}

TEST_F(NetopsNormGpu, I4CodesHaveTheHostsBytes) {
  // int8RowsInto into an I4 q on the GPU: the host's packed bytes (the even element in the low
  // nibble), the same integers as the host's F32 codes; I4 tensors copy both ways as bytes.
  const int64_t rows = 3, width = 768;
  const auto x = bf16Values({rows, width}, 21, 2.0);
  const auto codes = N::int8Rows(x, 4);
  auto wantQ = T::zeros({rows, width}, DType::I4), wantS = T::zeros({rows, 1});
  N::int8RowsInto(x, wantQ, wantS);
  EXPECT_EQ(wantQ.toDoubles(), codes[0].toDoubles());
  auto q = on(T::zeros({rows, width}, DType::I4)), s = on(T::zeros({rows, 1}));
  N::int8RowsInto(on(x), q, s);
  const auto back = q.host();
  ASSERT_EQ(back.dtype(), DType::I4);
  ASSERT_EQ(back.storage()->bytes(), static_cast<size_t>(rows * width / 2));
  EXPECT_EQ(std::memcmp(back.rawData(), wantQ.rawData(), back.storage()->bytes()), 0);
  test::expectBits(s, wantS, "int8RowsInto s");
  // modulatedInt8RowsInto into I4 likewise.
  const auto m = modulation(rows, width, 22);
  const auto xf = bf16Values({rows, width}, 23, 2.0, 0.25, true);
  auto wantM = T::zeros({rows, width}, DType::I4), wantMS = T::zeros({rows, 1});
  N::modulatedInt8RowsInto(xf, m.w, m.shift, m.scale, m.map, 1e-6, std::nullopt, wantM, wantMS);
  auto qm = on(T::zeros({rows, width}, DType::I4)), sm = on(T::zeros({rows, 1}));
  N::modulatedInt8RowsInto(on(xf), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6, std::nullopt, qm, sm);
  test::expectBits(qm, wantM, "modulatedInt8RowsInto I4 q");
  // An odd count of I4 values goes to the GPU and back as its ceil(n / 2) bytes.
  const auto odd = T::tensor({5}, {-8, 7, 3, -1, 2}, DType::I4);
  EXPECT_EQ(on(odd).host().toInts(), odd.toInts());
  // Elementwise work on GPU I4 tensors is refused, naming the dtype (copy to the host first).
  expectError([&] { (void)q.cast(DType::F32); }, {"on the GPU", "i4", "host()"});
  expectError([&] { (void)q.add(q); }, {"on the GPU", "i4"});
  expectError([&] { N::int8RowsInto(on(x), q, s, 8); }, {"int8RowsInto", "q is I4", "bits is 8"});
}

TEST_F(NetopsNormGpu, ModulatedInt8RowsHaveTheHostsBits) {
  const int64_t rows = 3, width = 512;
  const auto x = bf16Values({rows, width}, 11, 2.0, 0.25, true);
  const auto m = modulation(rows, width, 12);
  for (bool centered : {false, true}) {
    SCOPED_TRACE(centered ? "centered" : "rms");
    auto wantQ = T::zeros({rows, width}, DType::I8), wantS = T::zeros({rows, 1}), wantY = T::zeros({rows, width});
    N::modulatedInt8RowsInto(x, m.w, m.shift, m.scale, m.map, 1e-6, wantY, wantQ, wantS, centered);
    auto q = on(T::zeros({rows, width}, DType::I8)), s = on(T::zeros({rows, 1}));
    auto y = on(T::zeros({rows, width}, DType::BF16));
    N::modulatedInt8RowsInto(on(x), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6, y, q, s, centered);
    test::expectBits(q, wantQ, "modulatedInt8RowsInto q");
    test::expectBits(s, wantS, "modulatedInt8RowsInto s");
    test::expectBits(y, wantY.cast(DType::BF16), "modulatedInt8RowsInto y");
    auto q2 = on(T::zeros({rows, width}, DType::I8)), s2 = on(T::zeros({rows, 1}));  // without y
    N::modulatedInt8RowsInto(on(x), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6, std::nullopt, q2, s2, centered,
                             4);
    auto want4 = T::zeros({rows, width}, DType::I8), wantS4 = T::zeros({rows, 1});
    N::modulatedInt8RowsInto(x, m.w, m.shift, m.scale, m.map, 1e-6, std::nullopt, want4, wantS4, centered, 4);
    test::expectBits(q2, want4, "modulatedInt8RowsInto 4 bits q");
    test::expectBits(s2, wantS4, "modulatedInt8RowsInto 4 bits s");
  }
}

TEST_F(NetopsNormGpu, GroupNormWithinItsTolerance) {
  // Odd sizes; a long group (3 channels of 97 x 113 pixels) spans every slice.
  for (const T::Shape& shape : {T::Shape{6, 5, 7}, T::Shape{6, 97, 113}})
    for (bool act : {false, true}) {
      SCOPED_TRACE(T::shapeText(shape) + (act ? " act" : ""));
      const auto x = bf16Values(shape, 13, 3.0, 1.5, true);
      const auto w = bf16Values({6}, 14, 0.5, 1.0, true), b = bf16Values({6}, 15, 0.5, 0.0, true);
      const auto want = N::groupNorm(x, 2, w, b, 1e-5, act).toDoubles();
      const auto got = N::groupNorm(on(x.cast(DType::BF16)), 2, on(w), on(b), 1e-5, act);
      EXPECT_TRUE(got.onGpu());
      const auto g = got.host().toDoubles();
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << i;
      const auto bf = N::groupNorm(on(x), 2, on(w), on(b), 1e-5, act, DType::BF16);
      EXPECT_EQ(bf.dtype(), DType::BF16);
    }
}

TEST_F(NetopsNormGpu, AffineF32HasTheHostsBitsAndBf16ItsTolerance) {
  const int64_t rows = 13, in = 70, out = 33;
  const auto x = bf16Values({rows, in}, 16), w = bf16Values({out, in}, 17, 0.2), b = bf16Values({out}, 18, 1.0, 0.0, true);
  const auto want = N::affine(x, w, b);
  test::expectBits(N::affine(on(x), on(w), on(b), DType::F32), want, "affine F32");
  const auto got = N::affine(on(x), on(w), on(b), DType::BF16);
  EXPECT_EQ(got.dtype(), DType::F32);
  const auto g = got.host().toDoubles(), h = want.toDoubles(), xv = x.toDoubles(), wv = w.toDoubles(), bv = b.toDoubles();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double absSum = 0;
      for (int64_t i = 0; i < in; ++i) absSum += std::fabs(xv[r * in + i] * wv[o * in + i]);
      const double product = h[r * out + o] - bv[o];
      EXPECT_NEAR(g[r * out + o], h[r * out + o], 0x1p-8 * std::fabs(product) + 1e-5 * absSum + 1e-6 * std::fabs(h[r * out + o]))
          << r << "," << o;
    }
}

TEST_F(NetopsNormGpu, ArgmaxAgreesWithTheHost) {
  auto v = bf16Values({4, 1001}, 19, 1.0, 0.0, true).toDoubles();
  v[10] = v[700] = 9.0;        // a tie: the first wins
  v[1001] = std::nan("");       // a NaN first: passed over
  v[1001 + 999] = 8.0;
  for (int i = 0; i < 1001; ++i) v[2 * 1001 + i] = std::nan("");  // all NaN: 0
  const auto x = T::tensor({4, 1001}, v).cast(DType::BF16);
  const auto want = N::argmax(x);
  EXPECT_EQ(want, (std::vector<int64_t>{10, 999, 0, want[3]}));
  EXPECT_EQ(N::argmax(on(x)), want);
  EXPECT_EQ(N::argmax(on(x.reshape({2, 2, 1001}))), want);
}

TEST_F(NetopsNormGpu, NoRowsQueueNothing) {
  const auto q = N::int8Rows(on(T::zeros({0, 256}, DType::BF16)));
  EXPECT_EQ(q[0].shape(), (T::Shape{0, 256}));
  EXPECT_EQ(q[1].shape(), (T::Shape{0, 1}));
  const auto m = modulation(0, 8, 22);
  EXPECT_EQ(N::modulatedNorm(on(T::zeros({0, 8})), on(m.w), on(m.shift), on(m.scale), on(m.map), 1e-6).shape(),
            (T::Shape{0, 8}));
  auto out = on(T::zeros({0, 3, 4}));
  N::pixelNormInto(out, 1e-6, true, out);
  EXPECT_TRUE(N::argmax(on(T::zeros({0, 5}))).empty());
  EXPECT_EQ(N::groupNorm(on(T::zeros({4, 0})), 2, on(T::ones({4})), on(T::zeros({4})), 1e-5).shape(),
            (T::Shape{4, 0}));
}

TEST_F(NetopsNormGpu, BadInputNamesTheArgument) {
  const auto x = on(bf16Values({2, 256}, 20)), m = on(T::zeros({2})), mod = on(T::zeros({1, 256}));
  const auto w = on(T::ones({256}));
  expectError([&] { N::int8Rows(on(T::ones({2, 300}))); }, {"int8Rows", "300", "256"});
  expectError([&] { N::int8Rows(x, 5); }, {"int8Rows", "bits"});
  expectError([&] { N::int8RowsInto(x, on(T::zeros({2, 256}, DType::I32)), on(T::zeros({2, 1}))); },
              {"int8RowsInto", "q", "I8, I4 or F32"});
  expectError([&] { N::int8RowsInto(x, on(T::zeros({2, 255}, DType::I8)), on(T::zeros({2, 1}))); },
              {"int8RowsInto", "q", "[2, 255]"});
  expectError([&] { N::int8RowsInto(x, on(T::zeros({2, 256}, DType::I8)), T::zeros({2, 1})); },
              {"int8RowsInto", "s is on cpu", "x is on"});
  expectError([&] { N::int8Rows(on(T::zeros({2, 256}, DType::I32))); }, {"int8Rows", "x", "float"});
  expectError([&] { N::modulatedNorm(x, on(T::ones({255})), mod, mod, m, 1e-6); }, {"modulatedNorm", "w"});
  expectError([&] { N::modulatedNorm(x, w, mod, mod, T::zeros({2}), 1e-6); }, {"modulatedNorm", "map is on cpu"});
  expectError([&] { N::modulatedNormInto(x, w, mod, mod, m, 1e-6, on(T::zeros({2, 256}, DType::I8))); },
              {"modulatedNormInto", "y", "BF16 or F32"});
  expectError([&] { N::modulatedNormInto(x, w, mod, mod, m, 1e-6, on(T::zeros({2, 128}))); },
              {"modulatedNormInto", "y", "[2, 128]"});
  expectError([&] { N::gatedNormAddInto(on(T::zeros({2, 256}, DType::BF16)), x, w, mod, m, 1e-6); },
              {"gatedNormAddInto", "x", "F32"});
  expectError([&] { N::gatedNormAddInto(on(T::zeros({2, 256})), x, w, on(T::zeros({1, 8})), m, 1e-6); },
              {"gatedNormAddInto", "gate"});
  expectError([&] { N::pixelNormInto(on(T::ones({1, 2, 8})), 1e-6, false, on(T::zeros({1, 2, 9}))); },
              {"pixelNormInto", "out"});
  expectError([&] { N::pixelNormInto(on(T::ones({1, 2, 8})), 1e-6, false, T::zeros({1, 2, 8})); },
              {"pixelNormInto", "out is on cpu"});
  expectError([&] { N::groupNorm(on(T::ones({4, 3})), 3, on(T::ones({4})), on(T::zeros({4})), 1e-5); },
              {"groupNorm", "groups = 3"});
  expectError([&] { N::groupNorm(on(T::ones({4, 3})), 2, T::ones({4}), on(T::zeros({4})), 1e-5); },
              {"groupNorm", "w is on cpu"});
  expectError([&] { N::affine(on(T::ones({2, 3})), on(T::ones({4, 3})), T::zeros({4})); }, {"affine", "b is on cpu"});
  expectError([&] { N::affine(on(T::ones({2, 3})), on(T::ones({4, 2})), on(T::zeros({4}))); }, {"affine", "w of shape"});
  expectError([&] { N::argmax(on(T::zeros({2, 3}, DType::I32))); }, {"argmax", "x", "not a float"});
}

// The kernel source compiles for NVIDIA (NVRTC, then ptxas) and AMD (hipRTC); skipped where
// the compiler is absent.
TEST(NetopsNormGpuCompile, NvrtcAndPtxas) {
  GIZML_SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    gpu::Compiled c;
    try {
      c = gpu::compileCuda(N::netopsNormKernelSource(), arch, true);
    } catch (const Error& e) {
      ADD_FAILURE() << "netops norm kernels for " << arch << ": " << e.what();
      continue;
    }
    EXPECT_FALSE(c.ptx.empty());
    EXPECT_FALSE(c.cubin.empty());
    test::assemblePtx(c.ptx, arch, "netops norm kernels");
  }
}

TEST(NetopsNormGpuCompile, HipRtc) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    try {
      EXPECT_FALSE(gpu::compileHip(N::netopsNormKernelSource(), arch).empty()) << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << "netops norm kernels for " << arch << ": " << std::string(e.what()).substr(0, 3000);
    }
  }
}
