// The int8 kernels of every ISA (cpu/quant_panels.h: AVX2, AVX-VNNI, AVX-512 VNNI) give the
// portable kernel's outputs bit for bit (memcmp): every code width 2..8, groups 8..128, output row
// counts that leave partial last panels of 8 and of 16 rows, 1..9 activation rows (every tail of
// the 4-row tile) and 133 (two 64-row chunks), random data with fixed seeds and extreme codes (all
// zero, all at the top code, the activation codes at +-127: what would saturate maddubs's int16
// pairs if the 8-bit codes were not stored minus 128). An ISA this CPU (or GIZML_CPU_ISA) does not
// run is skipped with the reason. Also GIZML_CPU_ISA itself, in a fresh process.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "common/expect_error.h"
#include "cpu/cpu_features.h"
#include "cpu/cpu_info.h"
#include "cpu/elementwise.h"
#include "cpu/isa_param.h"
#include "cpu/quant_panels.h"

using namespace gizml;
using namespace gizml::cpu;

namespace {

// Random stored weights: every byte random (codes, exponents and zero points), or `fill` for
// every code byte.
struct RawWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> scales = std::vector<float>(256);
  QuantWeights w;
};

RawWeights rawWeights(int bits, int64_t group, int64_t rows, int64_t cols, unsigned seed, int fill = -1) {
  RawWeights r;
  std::mt19937 rng(seed);
  const int64_t blockBytes = 2 + group * bits / 8, rowBytes = cols / group * blockBytes;
  r.bytes.resize(static_cast<size_t>(rows * rowBytes));
  for (int64_t i = 0; i < static_cast<int64_t>(r.bytes.size()); ++i) {
    const bool header = i % rowBytes % blockBytes < 2;
    r.bytes[static_cast<size_t>(i)] = static_cast<uint8_t>(header || fill < 0 ? rng() : static_cast<unsigned>(fill));
  }
  for (int e = 0; e < 256; ++e) r.scales[static_cast<size_t>(e)] = exponentScale(0.37f, e);
  r.w = QuantWeights{r.bytes.data(), rows, cols, rowBytes, bits, group, r.scales.data()};
  return r;
}

// Activations with random codes (or all `fill`), random positive scales and their sums.
QuantActs rawActs(int64_t rows, int64_t cols, int64_t group, unsigned seed, int fill = 0) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(-127, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 2.0f);
  QuantActs x;
  x.rows = rows;
  x.cols = cols;
  x.group = group;
  x.codes.resize(static_cast<size_t>(rows * cols));
  for (int8_t& c : x.codes) c = static_cast<int8_t>(fill != 0 ? fill : code(rng));
  for (int64_t b = 0; b < rows * cols / group; ++b) {
    int sum = 0;
    for (int64_t i = 0; i < group; ++i) sum += x.codes[static_cast<size_t>(b * group + i)];
    x.scale.push_back(scale(rng));
    x.sum.push_back(x.scale.back() * static_cast<float>(sum));
  }
  return x;
}

// The ISA's product and the portable one's, as bytes.
void expectSameBits(Isa isa, const QuantWeights& w, const QuantActs& x) {
  const QuantMatrix simd(w, isa), portable(w, Isa::Portable);
  ASSERT_TRUE(simd.packed());
  ASSERT_EQ(simd.isa(), isa);
  std::vector<float> want(static_cast<size_t>(x.rows * w.rows), -7.0f), got(want.size(), -9.0f);
  portable.matmul(x, want.data());
  simd.matmul(x, got.data());
  if (std::memcmp(want.data(), got.data(), want.size() * sizeof(float)) == 0) return;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0)
        << "activation row " << static_cast<int64_t>(i) / w.rows << ", output row " << static_cast<int64_t>(i) % w.rows
        << ": " << got[i] << " != portable " << want[i];
}

using QuantIsa = test::IsaTest;  // each test on one ISA, skipped where it cannot run
using test::isaParamName;

}  // namespace

INSTANTIATE_TEST_SUITE_P(Kernels, QuantIsa, ::testing::Values(Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni), isaParamName);

TEST_P(QuantIsa, EveryBitWidthGroupAndShapeIsThePortableBits) {
  for (int64_t group : {8, 16, 24, 32, 64, 128})
    for (int bits = 2; bits <= 8; ++bits)
      for (int64_t rows : {5, 16, 37}) {  // one partial panel; one of 16; 8-row and 16-row tails
        SCOPED_TRACE(std::to_string(bits) + " bits, group " + std::to_string(group) + ", " + std::to_string(rows) + " rows");
        const auto seed = static_cast<unsigned>(bits * 1000 + group * 10 + rows);
        const RawWeights w = rawWeights(bits, group, rows, group * 3, seed);
        for (int64_t actRows : {1, 4, 7}) expectSameBits(GetParam(), w.w, rawActs(actRows, group * 3, group, seed + static_cast<unsigned>(actRows)));
      }
}

TEST_P(QuantIsa, EveryActivationRowCountIsThePortableBits) {
  for (int bits : {4, 6, 8}) {
    const RawWeights w = rawWeights(bits, 32, 43, 256, static_cast<unsigned>(bits));
    for (int64_t actRows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 133}) {
      SCOPED_TRACE(std::to_string(bits) + " bits, " + std::to_string(actRows) + " activation rows");
      expectSameBits(GetParam(), w.w, rawActs(actRows, 256, 32, static_cast<unsigned>(actRows)));
    }
  }
}

TEST_P(QuantIsa, ExtremeCodesAreThePortableBits) {
  // Codes all 0 or all at the top, against activation codes all +127, all -127 or random, in
  // groups of 128 (the largest integer sums).
  for (int bits = 2; bits <= 8; ++bits)
    for (int fill : {0, 255})
      for (int act : {127, -127, 0}) {
        SCOPED_TRACE(std::to_string(bits) + " bits, code bytes " + std::to_string(fill) + ", activations " + std::to_string(act));
        const RawWeights w = rawWeights(bits, 128, 21, 256, static_cast<unsigned>(bits + fill), fill);
        expectSameBits(GetParam(), w.w, rawActs(3, 256, 128, static_cast<unsigned>(bits), act));
      }
}

TEST_P(QuantIsa, MatricesSharingActivationsGiveTheirOwnProducts) {
  const RawWeights a = rawWeights(4, 32, 19, 64, 1), b = rawWeights(6, 32, 40, 64, 2), c = rawWeights(8, 32, 5, 64, 3);
  const QuantMatrix ma(a.w, GetParam()), mb(b.w, GetParam()), mc(c.w, GetParam());
  const QuantActs x = rawActs(3, 64, 32, 4);
  std::vector<float> ya(3 * 19), yb(3 * 40), yc(3 * 5);
  matmulAll(std::array<const QuantMatrix*, 3>{&ma, &mb, &mc}, x, std::array<float*, 3>{ya.data(), yb.data(), yc.data()});
  for (auto [w, y] : {std::pair{&a.w, &ya}, std::pair{&b.w, &yb}, std::pair{&c.w, &yc}}) {
    std::vector<float> alone(y->size());
    QuantMatrix(*w, Isa::Portable).matmul(x, alone.data());
    EXPECT_EQ(std::memcmp(y->data(), alone.data(), alone.size() * sizeof(float)), 0);
  }
}

TEST(CpuIsa, PanelsFollowTheChosenIsa) {
  EXPECT_EQ(QuantMatrix::panelRowsFor(Isa::Avx512Vnni), 16);
  EXPECT_EQ(QuantMatrix::panelRowsFor(Isa::Avx2), 8);
  const RawWeights w = rawWeights(4, 32, 8, 64, 1);
  const QuantMatrix best(w.w);
  EXPECT_EQ(best.isa(), bestIsa());
  EXPECT_EQ(best.packed(), bestIsa() != Isa::Portable);
  EXPECT_FALSE(QuantMatrix(w.w, Isa::Portable).packed());
  for (Isa isa : {Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni})
    if (!isaSupported(isa, cpuFeatures())) expectError([&] { QuantMatrix m(w.w, isa); }, {"does not run", isaName(isa)});
}

TEST(CpuIsa, GizInfoNamesTheChosenKernels) {
  const std::string report = cpuReport();
  EXPECT_NE(report.find(std::string("int8 panels ") + isaName(bestIsa())), std::string::npos) << report;
  EXPECT_NE(report.find(std::string("f32 (Highway) ") + simdTarget()), std::string::npos) << report;
  // AMX is reported as probed (tiles work or fault), never as merely advertised.
  if (detectedCpuFeatures().amxAdvertised) {
    EXPECT_NE(report.find("(probed)"), std::string::npos) << report;
  }
}

#if defined(__linux__) && defined(__x86_64__)
// The probe's child asks for the tile state: this process (whose signal frames would grow with
// it) never holds it.
TEST(CpuIsa, TheAmxProbeLeavesThisProcessWithoutTheTileState) {
  if (!detectedCpuFeatures().amxAdvertised) GTEST_SKIP() << "this CPU advertises no AMX";
  amxTilesWork();
  constexpr int kArchGetXcompPerm = 0x1022;
  uint64_t permitted = 0;
  ASSERT_EQ(syscall(SYS_arch_prctl, kArchGetXcompPerm, &permitted), 0);
  EXPECT_EQ(permitted & (uint64_t{1} << 18), 0u) << "XTILEDATA was granted to the process itself";
}
#endif

#if defined(__x86_64__)
TEST(CpuIsa, VendorAndFamilyAreTheKernelsOnes) {
  // Against /proc/cpuinfo's "vendor_id" and "cpu family" (the kernel's reading of cpuid), and the
  // codes' prefetch distance that follows from them (quant_panels.h).
  std::ifstream info("/proc/cpuinfo");
  std::string line, vendor;
  unsigned family = 0;
  bool haveFamily = false;
  while (std::getline(info, line) && !(haveFamily && !vendor.empty())) {
    const auto value = [&] { return line.substr(line.find(':') + 2); };
    if (line.rfind("vendor_id", 0) == 0) vendor = value();
    if (line.rfind("cpu family", 0) == 0) family = static_cast<unsigned>(std::stoul(value())), haveFamily = true;
  }
  if (vendor.empty() || !haveFamily) GTEST_SKIP() << "/proc/cpuinfo names no vendor or family here";
  const CpuFeatures& f = detectedCpuFeatures();
  EXPECT_EQ(f.amd, vendor == "AuthenticAMD") << vendor;
  EXPECT_EQ(f.family, family);
  EXPECT_EQ(quant_kernels::codePrefetchBytes(), vendor == "AuthenticAMD" && family >= 0x1A ? 4096 : 2048);
}
#endif

TEST(CpuIsa, CapsDropTheFeaturesAbove) {
  CpuFeatures all;
  all.avx2 = all.fma = all.f16c = all.avxVnni = true;
  all.avx512f = all.avx512bw = all.avx512vl = all.avx512vnni = all.avx512bf16 = all.amxAdvertised = true;
  EXPECT_EQ(bestIsa(all), Isa::Avx512Vnni);
  const CpuFeatures vnni = cappedFeatures(all, "avxvnni");
  EXPECT_EQ(bestIsa(vnni), Isa::AvxVnni);
  EXPECT_FALSE(vnni.avx512f || vnni.avx512bf16 || vnni.amxAdvertised);
  const CpuFeatures avx2 = cappedFeatures(all, "avx2");
  EXPECT_EQ(bestIsa(avx2), Isa::Avx2);
  EXPECT_TRUE(avx2.f16c && avx2.fma);
  EXPECT_FALSE(avx2.avxVnni);
  EXPECT_EQ(bestIsa(cappedFeatures(all, "portable")), Isa::Portable);
  EXPECT_FALSE(cappedFeatures(all, "portable").f16c);
  EXPECT_EQ(bestIsa(cappedFeatures(all, "avx512vnni")), Isa::Avx512Vnni);
  // A Zen 4: AVX-512 VNNI without the VEX-encoded AVX-VNNI.
  CpuFeatures zen4 = all;
  zen4.avxVnni = false;
  EXPECT_EQ(bestIsa(zen4), Isa::Avx512Vnni);
  expectError([&] { cappedFeatures(zen4, "avxvnni"); }, {"GIZML_CPU_ISA=avxvnni", "cannot run", "avx512vnni"});
  expectError([&] { cappedFeatures(avx2, "avx512vnni"); }, {"GIZML_CPU_ISA=avx512vnni", "its best is avx2"});
  expectError([&] { cappedFeatures(all, "avx3"); }, {"GIZML_CPU_ISA=avx3", "portable, avx2, avxvnni, avx512vnni"});
}

// GIZML_CPU_ISA is read once per process: each case runs in a fresh one (gtest's threadsafe
// death-test style re-executes this binary), which exits 0 when the kernels follow the setting.
TEST(CpuIsa, EnvironmentForcesALowerKernel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* outer = std::getenv("GIZML_CPU_ISA");
  const std::string restore = outer != nullptr ? outer : "";
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni}) {
    if (!isaSupported(isa, detectedCpuFeatures())) continue;
    SCOPED_TRACE(isaName(isa));
    setenv("GIZML_CPU_ISA", isaName(isa), 1);
    EXPECT_EXIT(
        {
          const RawWeights w = rawWeights(4, 32, 8, 64, 1);
          // Highway cannot go below the target it was compiled for (a -march=native build
          // compiles only that one; a smaller bit is a better target).
          const std::string hwy = simdTarget();
          const bool hwyCapped = isa == Isa::Avx512Vnni || HWY_STATIC_TARGET < HWY_AVX2 || hwy.find("AVX3") == std::string::npos;
          const bool hwyPortable = isa != Isa::Portable || HWY_STATIC_TARGET <= HWY_AVX2 || hwy.find("AVX") == std::string::npos;
          std::exit(bestIsa() == isa && QuantMatrix(w.w).isa() == isa && hwyCapped && hwyPortable ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
  }
  setenv("GIZML_CPU_ISA", "sse9", 1);
  EXPECT_EXIT(
      {
        try {
          cpuFeatures();
        } catch (const Error& e) {
          std::cerr << e.what();
          std::exit(3);
        }
        std::exit(0);
      },
      ::testing::ExitedWithCode(3), "GIZML_CPU_ISA=sse9: not one of");
  if (outer != nullptr) setenv("GIZML_CPU_ISA", restore.c_str(), 1);
  else unsetenv("GIZML_CPU_ISA");
}
