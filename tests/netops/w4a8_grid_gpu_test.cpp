// The GPU kernel of netops::w4a8Grid (src/netops/w4a8_grid_gpu.cpp, kernels/netops_w4a8_grid.cu.inc)
// called directly, against a plain host loop written here: out[r, c] = clamp(rint(levels[code] *
// scales[r, c / group]), -127, 127), code the column's nibble of packed (the even column low), one
// f32 product rounded half to even. Random bytes; scales that make the clamp bite and products
// exactly on .5 (half to even); the uniform levels (code - 8) and an arbitrary codebook. The
// GPU runs skip without a GPU (GIZML_GPU_EMULATOR=1 runs them on the host emulator); the compile
// checks (NVRTC + ptxas for sm_80 and sm_90a, hipRTC for gfx90a and gfx1030) skip where the
// compiler is absent.
#include <gizml/netops.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "common/gpu_checks.h"
#include "netops/kernel_sources.h"
#include "netops/w4a8_grid_gpu.h"

using namespace gizml;
namespace N = gizml::netops;
namespace gpu = gizhw::gpu;

namespace {

using Levels = std::array<float, 16>;

Levels uniformLevels() {
  Levels l{};
  for (int i = 0; i < 16; ++i) l[static_cast<size_t>(i)] = static_cast<float>(i - 8);
  return l;
}

// An arbitrary, unsorted codebook with fractional levels (halves among them) and a zero.
Levels codebook() {
  return {-1.0f, 0.5f, -0.6961928f, 1.5f, 0.0f, -0.2844414f, 0.7229568f, -3.5f,
          0.1609302f, 2.25f, -0.5250730f, 0.33791524f, 7.0f, -0.0910500f, 0.4407098f, -6.5f};
}

// What each byte, scale and level is, as host vectors.
struct Case {
  int64_t rows = 0, in = 0, group = 0;
  std::vector<uint8_t> packed;  // [rows, in / 2]
  std::vector<float> scales;    // [rows, in / group]
  Levels levels{};
};

// Scales of every kind: ordinary ones, ones that push |level scale| past 127 (the clamp), and
// 0.5, 1.5, 2.5 and their negatives, on which odd levels land exactly on .5 (half to even).
float randomScale(std::mt19937& rng) {
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const float pick = u(rng), sign = u(rng) < 0.5f ? -1.0f : 1.0f;
  if (pick < 0.3f) return sign * u(rng) * 20.0f;  // ordinary: |level scale| up to 160
  if (pick < 0.5f) return sign * (17.0f + u(rng) * 100.0f);  // mostly clamped
  if (pick < 0.9f) {
    static const float halves[] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 0.25f, 12.5f};
    return sign * halves[std::uniform_int_distribution<int>(0, 6)(rng)];
  }
  if (pick < 0.95f) return 0.0f;
  return sign * u(rng) * 1e-3f;  // tiny: rounds to 0
}

Case makeCase(int64_t rows, int64_t in, int64_t group, const Levels& levels, uint32_t seed) {
  std::mt19937 rng(seed);
  Case c{rows, in, group, {}, {}, levels};
  c.packed.resize(static_cast<size_t>(rows * in / 2));
  for (auto& b : c.packed) b = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 255)(rng));
  c.scales.resize(static_cast<size_t>(rows * (in / group)));
  for (auto& s : c.scales) s = randomScale(rng);
  return c;
}

// The plain host loop: one f32 product, nearbyint (half to even in the default rounding mode),
// clamp; a NaN product (0 times an infinite scale) gives 0.
std::vector<int8_t> hostGrid(const Case& c) {
  std::vector<int8_t> out(static_cast<size_t>(c.rows * c.in));
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.in; ++col) {
      const unsigned byte = c.packed[static_cast<size_t>(r * (c.in / 2) + col / 2)];
      const unsigned code = (byte >> (4 * (col % 2))) & 0xFu;
      volatile float product = c.levels[code] * c.scales[static_cast<size_t>(r * (c.in / c.group) + col / c.group)];
      const float v = std::nearbyint(static_cast<float>(product));
      out[static_cast<size_t>(r * c.in + col)] =
          std::isnan(v) ? int8_t{0} : static_cast<int8_t>(v < -127.0f ? -127.0f : v > 127.0f ? 127.0f : v);
    }
  return out;
}

T::Tensor hostTensor(const std::vector<uint8_t>& bytes, const T::Shape& shape) {
  T::Tensor t = T::empty(shape, DType::I8);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(t.data<int8_t>()));
  return t;
}
T::Tensor hostTensor(const std::vector<float>& values, const T::Shape& shape) {
  T::Tensor t = T::empty(shape, DType::F32);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

class NetopsW4a8GridGpu : public gizml::test::GpuTest {
 protected:
  // The kernel's grid for c, compared with hostGrid byte for byte.
  void expectHostGrid(const Case& c, const std::string& what) {
    SCOPED_TRACE(what + ": rows " + std::to_string(c.rows) + ", in " + std::to_string(c.in) + ", group " +
                 std::to_string(c.group));
    const auto packed = on(hostTensor(c.packed, {c.rows, c.in / 2}));
    const auto scales = on(hostTensor(c.scales, {c.rows, c.in / c.group}));
    const auto levels = on(hostTensor(std::vector<float>(c.levels.begin(), c.levels.end()), {16}));
    auto out = on(T::zeros({c.rows, c.in}, DType::I8));
    N::w4a8gpu::w4a8Grid(packed, scales, levels, c.group, out);
    const T::Tensor got = out.host();
    ASSERT_EQ(got.shape(), (T::Shape{c.rows, c.in}));
    ASSERT_EQ(got.dtype(), DType::I8);
    const std::vector<int8_t> want = hostGrid(c);
    const int8_t* g = got.data<int8_t>();
    int64_t wrong = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (g[i] != want[i] && wrong++ < 5)
        ADD_FAILURE() << "out[" << i / static_cast<size_t>(c.in) << ", " << i % static_cast<size_t>(c.in)
                      << "] = " << int{g[i]} << ", want " << int{want[i]};
    EXPECT_EQ(wrong, 0) << "of " << want.size() << " values";
  }
};

// How many of c's values are clamped and how many products lie exactly on .5.
std::pair<int64_t, int64_t> clampedAndHalves(const Case& c) {
  int64_t clamped = 0, halves = 0;
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t col = 0; col < c.in; ++col) {
      const unsigned code = (c.packed[static_cast<size_t>(r * (c.in / 2) + col / 2)] >> (4 * (col % 2))) & 0xFu;
      const float p = c.levels[code] * c.scales[static_cast<size_t>(r * (c.in / c.group) + col / c.group)];
      clamped += std::fabs(std::nearbyint(p)) > 127.0f;
      halves += std::fabs(p - std::trunc(p)) == 0.5f;
    }
  return {clamped, halves};
}

}  // namespace

TEST_F(NetopsW4a8GridGpu, MatchesTheHostLoopForUniformLevelsAndACodebook) {
  uint32_t seed = 1;
  int64_t clamped = 0, halves = 0;
  for (const Levels& levels : {uniformLevels(), codebook()})
    for (int64_t group : {16, 32, 64, 128})
      for (int64_t rows : {1, 2, 5, 13, 37})
        for (int64_t in : {int64_t{16}, int64_t{48}, int64_t{128}, int64_t{320}, int64_t{512}}) {
          if (in % group != 0) continue;
          const Case c = makeCase(rows, in, group, levels, seed++);
          const auto [cl, ha] = clampedAndHalves(c);
          clamped += cl;
          halves += ha;
          expectHostGrid(c, levels[0] == -8.0f ? "uniform levels" : "codebook");
          if (HasFailure()) return;
        }
  // The cases did test the clamp and half to even.
  EXPECT_GT(clamped, 1000);
  EXPECT_GT(halves, 1000);
}

// Exact halves by hand: level 1 and 3 times 0.5 and 2.5, and their negatives, round to even.
TEST_F(NetopsW4a8GridGpu, RoundsHalvesToEven) {
  // Row 0: codes 9 (level 1) and 11 (level 3) alternating, scale 0.5: 0.5 -> 0, 1.5 -> 2.
  // Row 1: codes 7 (level -1) and 5 (level -3), scale 2.5: -2.5 -> -2, -7.5 -> -8.
  // Row 2: codes 9 (1) and 15 (7), scale 2.5 then 0.5: 2.5 -> 2, 17.5 -> 18 | 0.5 -> 0, 3.5 -> 4.
  Case c{3, 32, 16, {}, {}, uniformLevels()};
  c.packed.assign(48, 0);
  for (size_t j = 0; j < 16; ++j) {
    c.packed[j] = 0xB9;
    c.packed[16 + j] = 0x57;
    c.packed[32 + j] = 0xF9;
  }
  c.scales = {0.5f, 0.5f, 2.5f, 2.5f, 2.5f, 0.5f};
  expectHostGrid(c, "halves");
  const auto packed = on(hostTensor(c.packed, {3, 16}));
  auto out = on(T::zeros({3, 32}, DType::I8));
  N::w4a8gpu::w4a8Grid(packed, on(hostTensor(c.scales, {3, 2})),
                       on(hostTensor(std::vector<float>(c.levels.begin(), c.levels.end()), {16})), 16, out);
  const T::Tensor got = out.host();
  const int8_t* g = got.data<int8_t>();
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 2);
  EXPECT_EQ(g[32], -2);
  EXPECT_EQ(g[33], -8);
  EXPECT_EQ(g[64], 2);
  EXPECT_EQ(g[65], 18);
  EXPECT_EQ(g[80], 0);
  EXPECT_EQ(g[81], 4);
}

// Clamping at both ends, infinite scales (level 0 times infinity is NaN: 0) and codebook levels
// beyond 127.
TEST_F(NetopsW4a8GridGpu, ClampsAndHandlesInfinities) {
  Levels levels = uniformLevels();
  levels[0] = 300.0f;
  levels[1] = -1000.0f;
  Case c = makeCase(4, 64, 32, levels, 99);
  const float inf = std::numeric_limits<float>::infinity();
  c.scales[0] = inf;
  c.scales[1] = -inf;
  c.scales[2] = 127.0f;
  c.scales[3] = -128.0f;
  expectHostGrid(c, "clamps");
}

// Groups that do not divide the two columns of a byte alike (odd groups: a byte's columns in two
// groups), group 1 and 2, and a grid too small for the rows (the kernel strides).
TEST_F(NetopsW4a8GridGpu, OddGroupsAndManyRows) {
  expectHostGrid(makeCase(7, 48, 3, uniformLevels(), 5), "group 3");
  expectHostGrid(makeCase(5, 30, 5, codebook(), 6), "group 5");
  expectHostGrid(makeCase(6, 16, 1, codebook(), 7), "group 1");
  expectHostGrid(makeCase(9, 64, 2, uniformLevels(), 8), "group 2");
  expectHostGrid(makeCase(300, 512, 64, codebook(), 9), "many rows");  // 76800 bytes: strides on 4 SMs
  expectHostGrid(makeCase(0, 64, 32, codebook(), 10), "no rows");
}

// Operands that are row slices of larger tensors (contiguous, not at the start of their storage).
TEST_F(NetopsW4a8GridGpu, ReadsAndWritesContiguousSlices) {
  const Case big = makeCase(9, 64, 16, codebook(), 11);
  Case c{5, 64, 16, {}, {}, big.levels};
  c.packed.assign(big.packed.begin() + 3 * 32, big.packed.begin() + 8 * 32);
  c.scales.assign(big.scales.begin() + 2 * 4, big.scales.begin() + 7 * 4);
  const auto packed = on(hostTensor(big.packed, {9, 32})).slice(0, 3, 8);
  const auto scales = on(hostTensor(big.scales, {9, 4})).slice(0, 2, 7);
  const auto levels = on(hostTensor(std::vector<float>(c.levels.begin(), c.levels.end()), {16}));
  auto whole = on(T::zeros({8, 64}, DType::I8));
  auto out = whole.slice(0, 1, 6);
  ASSERT_TRUE(packed.isContiguous() && scales.isContiguous() && out.isContiguous());
  N::w4a8gpu::w4a8Grid(packed, scales, levels, 16, out);
  const T::Tensor got = whole.host();
  const std::vector<int8_t> want = hostGrid(c);
  const int8_t* g = got.data<int8_t>();
  for (int64_t i = 0; i < 8 * 64; ++i) {
    const bool inside = i >= 64 && i < 6 * 64;
    ASSERT_EQ(int{g[i]}, inside ? int{want[static_cast<size_t>(i - 64)]} : 0) << "at " << i;
  }
}

TEST_F(NetopsW4a8GridGpu, RejectsBadOperandsWithClearMessages) {
  const auto packed = on(T::zeros({4, 32}, DType::I8)), scales = on(T::ones({4, 4})), levels = on(T::ones({16}));
  const auto out = on(T::zeros({4, 64}, DType::I8));
  using N::w4a8gpu::w4a8Grid;
  EXPECT_NO_THROW(w4a8Grid(packed, scales, levels, 16, out));
  expectError([&] { w4a8Grid(T::zeros({4, 32}, DType::I8), scales, levels, 16, out); },
              {"w4a8Grid", "packed is on cpu", "one GPU"});
  expectError([&] { w4a8Grid(packed, scales, levels, 16, T::zeros({4, 64}, DType::I8)); },
              {"w4a8Grid", "out is on cpu"});
  expectError([&] { w4a8Grid(packed, T::ones({4, 4}), levels, 16, out); }, {"w4a8Grid", "scales is on cpu"});
  expectError([&] { w4a8Grid(packed, scales, T::ones({16}), 16, out); }, {"w4a8Grid", "levels is on cpu"});
  expectError([&] { w4a8Grid(on(T::zeros({4, 32}, DType::U8)), scales, levels, 16, out); },
              {"w4a8Grid", "packed must be i8"});
  expectError([&] { w4a8Grid(packed, on(T::ones({4, 4}, DType::BF16)), levels, 16, out); },
              {"w4a8Grid", "scales must be f32", "bf16"});
  expectError([&] { w4a8Grid(packed, scales, on(T::ones({16}, DType::F16)), 16, out); },
              {"w4a8Grid", "levels must be f32"});
  expectError([&] { w4a8Grid(packed, scales, levels, 16, on(T::zeros({4, 64}))); }, {"w4a8Grid", "out must be i8"});
  expectError([&] { w4a8Grid(on(T::zeros({32, 4}, DType::I8)).transpose(0, 1), scales, levels, 16, out); },
              {"w4a8Grid", "packed must be contiguous"});
  expectError([&] { w4a8Grid(packed, on(T::ones({4, 4})).transpose(0, 1), levels, 16, out); },
              {"w4a8Grid", "scales must be contiguous"});
  expectError([&] { w4a8Grid(packed, scales, levels, 0, out); }, {"w4a8Grid", "group must be positive"});
  expectError([&] { w4a8Grid(packed, scales, levels, 24, out); }, {"w4a8Grid", "group 24 does not divide in = 64"});
  expectError([&] { w4a8Grid(on(T::zeros({128}, DType::I8)), scales, levels, 16, out); },
              {"w4a8Grid", "packed must be [rows, in / 2]"});
  expectError([&] { w4a8Grid(packed, on(T::ones({4, 2})), levels, 16, out); },
              {"w4a8Grid", "scales must be [4, 4]", "got [4, 2]"});
  expectError([&] { w4a8Grid(packed, scales, on(T::ones({8})), 16, out); }, {"w4a8Grid", "levels must be [16]"});
  expectError([&] { w4a8Grid(packed, scales, levels, 16, on(T::zeros({4, 32}, DType::I8))); },
              {"w4a8Grid", "out must be [4, 64]"});
}

// The kernel source compiles for NVIDIA (NVRTC, then ptxas) and AMD (hipRTC); skipped where the
// compiler is absent.
TEST(NetopsW4a8GridGpuCompile, NvrtcAndPtxas) {
  GIZML_SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    gpu::Compiled c;
    try {
      c = gpu::compileCuda(N::netopsW4a8GridKernelSource(), arch, true);
    } catch (const Error& e) {
      ADD_FAILURE() << "w4a8Grid kernel for " << arch << ": " << e.what();
      continue;
    }
    EXPECT_FALSE(c.ptx.empty());
    EXPECT_FALSE(c.cubin.empty());
    // The product is not fused into anything: a plain round-to-nearest multiply, no fma.
    EXPECT_NE(c.ptx.find("mul.rn.f32"), std::string::npos) << arch;
    EXPECT_EQ(c.ptx.find("fma.rn.f32"), std::string::npos) << arch;
    test::assemblePtx(c.ptx, arch, "w4a8Grid kernel");
  }
}

TEST(NetopsW4a8GridGpuCompile, HipRtc) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    try {
      EXPECT_FALSE(gpu::compileHip(N::netopsW4a8GridKernelSource(), arch).empty()) << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << "w4a8Grid kernel for " << arch << ": " << std::string(e.what()).substr(0, 3000);
    }
  }
}
