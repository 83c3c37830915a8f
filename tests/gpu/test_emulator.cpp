// The host GPU emulator itself (src/gpu/emulator): barriers and warp shuffles, the errors it
// gives instead of hanging or running on (divergent barriers, a lane that exited before a
// shuffle, cp.async copies never waited for, compile errors), out-of-memory, poisoned shared
// memory, and its tensor-core emulation against scalar products. Runs under
// GIZML_GPU_EMULATOR=1 (ctest's emulator_test_gpu); skipped elsewhere.
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/emulator/emulator.h"
#include "gpu/tensor_map.h"
#include "tensor/gpu/codegen.h"

namespace {

namespace gpu = gizhw::gpu;

class Emulator : public ::testing::Test {
 protected:
  void SetUp() override {
    gpu_ = gpu::open();
    if (!gpu_ || !gpu_->properties().emulated)
      GTEST_SKIP() << "the GPU emulator is not on (GIZML_GPU_EMULATOR=1): emulator test skipped";
  }
  gpu::Gpu& g() { return *gpu_; }

  template <class T>
  gpu::Buffer upload(const std::vector<T>& v) {
    gpu::Buffer b = g().allocate(v.size() * sizeof(T));
    g().copyToDevice(b.address(), v.data(), v.size() * sizeof(T), g().stream());
    return b;
  }
  template <class T>
  std::vector<T> download(const gpu::Buffer& b, size_t n) {
    std::vector<T> v(n);
    g().copyToHost(v.data(), b.address(), n * sizeof(T), g().stream());
    g().synchronize();
    return v;
  }
  // The launch's error text (empty when it ran).
  std::string launchError(const std::string& source, const std::string& name, unsigned threads, size_t shared,
                          std::vector<void*> args) {
    try {
      g().kernel(source, name).launch({1}, {threads}, shared, g().stream(), args.data());
      return "";
    } catch (const gizml::Error& e) {
      return e.what();
    }
  }
  std::optional<gpu::Gpu> gpu_;
};

const char* kBasics = R"(
extern "C" __global__ void emu_basics(const float* x, float* out, unsigned* votes) {
  __shared__ float tile[64];
  const unsigned t = threadIdx.x;
  tile[t] = x[t];
  __syncthreads();
  float v = tile[63 - t];  // another thread's write: needs the barrier
  for (int m = 16; m >= 1; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  const float down = __shfl_down_sync(0xffffffffu, x[t], 1);
  const float up = __shfl_up_sync(0xffffffffu, x[t], 2, 16);
  const float from = __shfl_sync(0xffffffffu, x[t], 3, 8);
  out[t] = v;
  out[64 + t] = down;
  out[128 + t] = up;
  out[192 + t] = from;
  const unsigned ballot = __ballot_sync(0xffffffffu, x[t] > 0.0f);
  if ((t & 31) == 0) votes[t / 32] = ballot;
}
)";

TEST_F(Emulator, SyncthreadsAndShuffles) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>((i * 7) % 13) - 6.0f;
  auto bx = upload(x);
  auto bout = g().allocate(256 * sizeof(float));
  auto bvotes = g().allocate(2 * sizeof(unsigned));
  uint64_t ax = bx.address(), aout = bout.address(), avotes = bvotes.address();
  g().kernel(kBasics, "emu_basics").launch({1}, {64}, 0, g().stream(), {&ax, &aout, &avotes});
  const auto out = download<float>(bout, 256);
  const auto votes = download<unsigned>(bvotes, 2);
  for (int t = 0; t < 64; ++t) {
    const int w = t / 32;
    // The butterfly sums the warp's values of tile[63 - t] in a fixed tree; all small integers: exact.
    float sum = 0;
    for (int l = 0; l < 32; ++l) sum += x[63 - (w * 32 + l)];
    EXPECT_EQ(out[t], sum) << t;
    const int lane = t % 32;
    EXPECT_EQ(out[64 + t], lane + 1 < 32 ? x[t + 1] : x[t]) << "down " << t;
    EXPECT_EQ(out[128 + t], lane % 16 >= 2 ? x[t - 2] : x[t]) << "up " << t;
    EXPECT_EQ(out[192 + t], x[t / 8 * 8 + 3]) << "indexed " << t;
  }
  for (int w = 0; w < 2; ++w) {
    unsigned expect = 0;
    for (int l = 0; l < 32; ++l) expect |= (x[w * 32 + l] > 0 ? 1u : 0u) << l;
    EXPECT_EQ(votes[w], expect);
  }
}

TEST_F(Emulator, DivergentBarrierIsAnErrorNotAHang) {
  const std::string source = R"(
extern "C" __global__ void emu_divergent(float* out) {
  if (threadIdx.x < 32) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1.0f;
}
extern "C" __global__ void emu_exited_lane(float* out) {
  if (threadIdx.x == 5) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (float)threadIdx.x, 1);
}
extern "C" __global__ void emu_stuck(float* out) {
  if (threadIdx.x < 16) __syncthreads();  // lanes 16..31 of warp 0 wait in the shuffle for these
  else out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
)";
  auto b = g().allocate(64 * sizeof(float));
  uint64_t a = b.address();
  std::string e = launchError(source, "emu_divergent", 64, 0, {&a});
  EXPECT_NE(e.find("emu_divergent"), std::string::npos) << e;
  EXPECT_NE(e.find("different __syncthreads"), std::string::npos) << e;
  e = launchError(source, "emu_exited_lane", 32, 0, {&a});
  EXPECT_NE(e.find("emu_exited_lane"), std::string::npos) << e;
  EXPECT_NE(e.find("exited"), std::string::npos) << e;
  e = launchError(source, "emu_stuck", 64, 0, {&a});
  EXPECT_NE(e.find("can never finish"), std::string::npos) << e;
  // More threads than the kernel's __launch_bounds__: refused, as a GPU refuses it.
  e = launchError("extern \"C\" __global__ void __launch_bounds__((16 * 2), 1) emu_bounded(float* out) {}",
                  "emu_bounded", 64, 0, {&a});
  EXPECT_NE(e.find("__launch_bounds__ of 32"), std::string::npos) << e;
  e = launchError(source, "emu_stuck", 64, 0, {&a});
  EXPECT_NE(e.find("can never finish"), std::string::npos) << e;
  // The device still works after a failed launch.
  EXPECT_EQ(launchError(kBasics, "emu_basics", 0, 0, {}).find("outside CUDA's limits") != std::string::npos, true);
}

TEST_F(Emulator, KernelsWrittenThroughMacros) {
  // The source is preprocessed before the emulator looks for kernels and __shared__ arrays.
  const std::string source =
      "#define GZ_K(NAME, V) extern \"C\" __global__ void NAME(float* out) { \\\n"
      "  __shared__ float s[32]; s[threadIdx.x] = V; __syncthreads(); out[threadIdx.x] = s[31 - threadIdx.x]; }\n"
      "GZ_K(emu_macro_a, 1.0f)\n"
      "GZ_K(emu_macro_b, (float)threadIdx.x)\n";
  auto b = g().allocate(32 * sizeof(float));
  uint64_t a = b.address();
  g().kernel(source, "emu_macro_b").launch({1}, {32}, 0, g().stream(), {&a});
  const auto out = download<float>(b, 32);
  for (int t = 0; t < 32; ++t) EXPECT_EQ(out[t], static_cast<float>(31 - t));
}

TEST_F(Emulator, EachModuleHasItsOwnSharedMemory) {
  // Two modules with the same template holding a __shared__ array: each must use its own block
  // shared memory (g++ makes a template's static locals process-wide unique objects unless told
  // not to; the second module then used the first one's memory).
  if (g().properties().major < 8) GTEST_SKIP() << "gz_saddr needs 8.0";
  const std::string common = gizml::gpuops::mmaSource() + R"(
template <int N> __device__ unsigned emu_offset() {
  __shared__ float s[N];
  s[threadIdx.x] = 1.0f;
  return gz_saddr(s + threadIdx.x);
}
)";
  auto b = g().allocate(32 * sizeof(unsigned));
  uint64_t a = b.address();
  for (const char* name : {"emu_unique_a", "emu_unique_b"}) {
    const std::string source = common + "extern \"C\" __global__ void " + name +
                               "(unsigned* out) { out[threadIdx.x] = emu_offset<32>(); }\n";
    EXPECT_EQ(launchError(source, name, 32, 0, {&a}), "") << name;
    const auto offsets = download<unsigned>(b, 32);
    for (unsigned t = 1; t < 32; ++t) EXPECT_EQ(offsets[t], offsets[0] + 4 * t) << name;
  }
}

TEST_F(Emulator, SharedMemoryStartsAsNaNInEveryBlock) {
  const std::string source = R"(
extern "C" __global__ void emu_poison(float* out) {
  __shared__ float s[32];
  extern __shared__ float dyn[];
  out[blockIdx.x * 64 + threadIdx.x] = s[threadIdx.x];   // never written in this block
  out[blockIdx.x * 64 + 32 + threadIdx.x] = dyn[threadIdx.x];
  __syncthreads();
  s[threadIdx.x] = 1.0f;
  dyn[threadIdx.x] = 2.0f;
}
)";
  auto b = g().allocate(128 * sizeof(float));
  uint64_t a = b.address();
  g().kernel(source, "emu_poison").launch({2}, {32}, 32 * sizeof(float), g().stream(), {&a});
  for (float v : download<float>(b, 128)) EXPECT_TRUE(std::isnan(v));
}

TEST_F(Emulator, OutOfMemoryAndBadCopiesAreErrors) {
  const uint64_t total = g().properties().memoryBytes;
  try {
    (void)g().allocate(total + 1);
    FAIL() << "no error";
  } catch (const gizml::Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  auto b = g().allocate(1024);
  std::vector<char> host(4096);
  EXPECT_THROW(g().copyToDevice(b.address() + 512, host.data(), 4096, g().stream()), gizml::Error);
  g().copyToDevice(b.address(), host.data(), 1024, g().stream());
}

TEST_F(Emulator, CompileErrorsNameTheCompilerMessage) {
  try {
    (void)g().kernel("extern \"C\" __global__ void emu_bad(float* x) { x[0] = undeclared_thing; }", "emu_bad");
    FAIL() << "no error";
  } catch (const gizml::Error& e) {
    EXPECT_NE(std::string(e.what()).find("undeclared_thing"), std::string::npos) << e.what();
  }
}

// No device needed: runs in every build.
TEST(EmulatorTranslation, SharedDeclarationsAndKernelNames) {
  std::vector<std::string> kernels;
  const std::string out = gpu::emulator::translate(
      "// __shared__ in a comment; stays\n"
      "extern \"C\" __global__ void __launch_bounds__(256) k1(float* x) {\n"
      "  __shared__ __align__(16) unsigned short tile[4][8];\n"
      "  extern __shared__ __align__(16) float smem[];\n"
      "}\n"
      "extern \"C\" __global__ void k2() {}\n"
      "__global__ void notExternC() {}\n",
      kernels);
  EXPECT_EQ(kernels, (std::vector<std::string>{"k1", "k2"}));
  EXPECT_NE(out.find("// __shared__ in a comment; stays"), std::string::npos) << out;
  EXPECT_NE(out.find("typedef unsigned short gz_emu_shared_tile_t[4][8];"), std::string::npos) << out;
  EXPECT_NE(out.find("float* const smem = (float*)gz_emu_dynamic;"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 7);  // lines kept for the compiler's messages
}

// ---- tensor cores ------------------------------------------------------------------------------

std::string mmaKernels() {
  return "typedef unsigned short u16;\n" + gizml::gpuops::mmaSource() + R"(
// A [16][16] and B [16][8] (both row major) through shared memory and ldmatrix, one mma.
extern "C" __global__ void emu_mma16(const u16* a, const u16* b, float* d, int f16) {
#ifdef GIZML_HAVE_MMA
  __shared__ __align__(16) u16 As[16][16];
  __shared__ __align__(16) u16 Bs[16][8];
  const int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) As[i / 16][i % 16] = a[i];
  for (int i = lane; i < 128; i += 32) Bs[i / 8][i % 8] = b[i];
  __syncthreads();
  unsigned ra[4], rb[2];
  const int m = lane / 8, r = lane % 8;
  gz_ldsm_x4(gz_saddr(&As[r + 8 * (m % 2)][8 * (m / 2)]), ra);  // the A registers' order
  gz_ldsm_x2_trans(gz_saddr(&Bs[lane % 16][0]), rb);           // B's k-major rows, transposed
  float acc[4] = {0.5f, -0.25f, 1.0f, 0.0f};
  if (f16) gz_mma_f16(acc, ra, rb);
  else gz_mma_bf16(acc, ra, rb);
  const int g = lane / 4, c = lane % 4;
  for (int e = 0; e < 4; ++e) d[(g + 8 * (e / 2)) * 8 + 2 * c + e % 2] = acc[e];
#endif
}
// 8-bit products: A [16][32], B given as [8][32] (n major), registers read as the PTX ISA lays
// them out (mma.cu.inc's header).
extern "C" __global__ void emu_mma8(const unsigned char* a, const unsigned char* bt, void* d, int e4m3) {
#ifdef GIZML_HAVE_MMA
  const int lane = threadIdx.x, g = lane / 4, c = lane % 4;
  unsigned ra[4], rb[2];
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i % 2), col = (i / 2) * 16 + c * 4;
    ra[i] = 0;
    for (int v = 0; v < 4; ++v) ra[i] |= (unsigned)a[row * 32 + col + v] << (8 * v);
  }
  for (int i = 0; i < 2; ++i) {
    rb[i] = 0;
    for (int v = 0; v < 4; ++v) rb[i] |= (unsigned)bt[g * 32 + i * 16 + c * 4 + v] << (8 * v);
  }
  if (e4m3) {
#ifdef GIZML_HAVE_MMA_E4M3
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    gz_mma_e4m3(acc, ra, rb);
    for (int e = 0; e < 4; ++e) ((float*)d)[(g + 8 * (e / 2)) * 8 + 2 * c + e % 2] = acc[e];
#endif
  } else {
    int acc[4] = {7, 0, -7, 100};
    gz_mma_s8(acc, ra, rb);
    for (int e = 0; e < 4; ++e) ((int*)d)[(g + 8 * (e / 2)) * 8 + 2 * c + e % 2] = acc[e];
  }
#endif
}
// 32 threads copy 128 floats to dynamic shared memory with cp.async; `wait` 0 never waits.
extern "C" __global__ void emu_cp_async(const float* x, float* out, int wait) {
#ifdef GIZML_HAVE_MMA
  extern __shared__ __align__(16) float sh[];
  const int t = threadIdx.x;
  gz_cp_async16(gz_saddr(sh + 4 * t), x + 4 * t);
  gz_cp_async_commit();
  out[t] = sh[4 * t];  // before the wait: the copy has not landed
  if (wait) gz_cp_async_wait<0>();
  __syncthreads();
  for (int i = 0; i < 4; ++i) out[32 + 4 * t + i] = sh[(4 * t + 4 * 7 + i) % 128];
#endif
}
)";
}

float bf16ToFloat(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float f16ToFloat(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -v : v;
}
// E4M3 by the OCP FP8 definition (bias 7, no infinities).
float e4m3ToFloat(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return (b & 0x80) ? -v : v;
}

TEST_F(Emulator, MmaHalvesMatchAScalarProduct) {
  if (g().properties().major < 8) GTEST_SKIP() << "no tensor cores or cp.async below 8.0";
  for (int f16 : {0, 1}) {
    std::vector<uint16_t> a(256), b(128);
    // Values of a few bits (exact in both formats): 1 + i/8 style, signs mixed.
    for (int i = 0; i < 256; ++i) {
      const float v = static_cast<float>((i * 37) % 29 - 14) / 8.0f;
      uint32_t u;
      std::memcpy(&u, &v, 4);
      a[i] = f16 ? 0 : static_cast<uint16_t>(u >> 16);
      if (f16) {  // |v| <= 1.75 with 3 fraction bits: exact in binary16
        const int s = v < 0, q = static_cast<int>(std::fabs(v) * 8);
        a[i] = q == 0 ? 0 : [&] {
          int ex = 0;
          while ((q >> ex) > 1) ++ex;
          const int mant = ((q << 10) >> ex) & 0x3ff;
          return static_cast<uint16_t>((s << 15) | ((ex - 3 + 15) << 10) | mant);
        }();
      }
    }
    for (int i = 0; i < 128; ++i) b[i] = a[(i * 5 + 3) % 256];
    auto ba = upload(a), bb = upload(b);
    auto bd = g().allocate(128 * sizeof(float));
    uint64_t pa = ba.address(), pb = bb.address(), pd = bd.address();
    int flag = f16;
    g().kernel(mmaKernels(), "emu_mma16").launch({1}, {32}, 0, g().stream(), {&pa, &pb, &pd, &flag});
    const auto d = download<float>(bd, 128);
    const float init[4] = {0.5f, -0.25f, 1.0f, 0.0f};
    auto value = [&](uint16_t h) { return f16 ? f16ToFloat(h) : bf16ToFloat(h); };
    for (int row = 0; row < 16; ++row)
      for (int col = 0; col < 8; ++col) {
        float s = init[(row >= 8 ? 2 : 0) + col % 2];
        for (int k = 0; k < 16; ++k) s = std::fma(value(a[row * 16 + k]), value(b[k * 8 + col]), s);
        EXPECT_EQ(d[row * 8 + col], s) << (f16 ? "f16" : "bf16") << " row " << row << " col " << col;
      }
  }
}

TEST_F(Emulator, MmaEightBitMatchesAScalarProduct) {
  if (g().properties().major < 8) GTEST_SKIP() << "no tensor cores or cp.async below 8.0";
  std::vector<uint8_t> a(16 * 32), bt(8 * 32);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>((i * 73 + 11) % 251);
  for (size_t i = 0; i < bt.size(); ++i) bt[i] = static_cast<uint8_t>((i * 29 + 5) % 253);
  auto ba = upload(a), bb = upload(bt);
  auto bd = g().allocate(128 * sizeof(float));
  uint64_t pa = ba.address(), pb = bb.address(), pd = bd.address();
  int e4m3 = 0;
  g().kernel(mmaKernels(), "emu_mma8").launch({1}, {32}, 0, g().stream(), {&pa, &pb, &pd, &e4m3});
  const auto s8 = download<int>(bd, 128);
  const int init[4] = {7, 0, -7, 100};
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      int s = init[(row >= 8 ? 2 : 0) + col % 2];
      for (int k = 0; k < 32; ++k) s += static_cast<int8_t>(a[row * 32 + k]) * static_cast<int8_t>(bt[col * 32 + k]);
      EXPECT_EQ(s8[row * 8 + col], s) << "s8 row " << row << " col " << col;
    }
  if (g().properties().major * 10 + g().properties().minor < 89) return;
  // E4M3: NaN codes (S.1111.111) left out of the inputs.
  for (auto& v : a)
    if ((v & 0x7f) == 0x7f) v = 0x3f;
  for (auto& v : bt)
    if ((v & 0x7f) == 0x7f) v = 0x40;
  auto ca = upload(a), cb = upload(bt);
  pa = ca.address(), pb = cb.address();
  e4m3 = 1;
  g().kernel(mmaKernels(), "emu_mma8").launch({1}, {32}, 0, g().stream(), {&pa, &pb, &pd, &e4m3});
  const auto f = download<float>(bd, 128);
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      float s = 0.0f;
      for (int k = 0; k < 32; ++k) s = std::fma(e4m3ToFloat(a[row * 32 + k]), e4m3ToFloat(bt[col * 32 + k]), s);
      EXPECT_EQ(f[row * 8 + col], s) << "e4m3 row " << row << " col " << col;
    }
}

TEST_F(Emulator, CpAsyncLandsAtTheWaitAndMissingWaitsAreErrors) {
  if (g().properties().major < 8) GTEST_SKIP() << "no tensor cores or cp.async below 8.0";
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i) x[i] = static_cast<float>(i);
  auto bx = upload(x);
  auto bout = g().allocate(160 * sizeof(float));
  uint64_t px = bx.address(), pout = bout.address();
  int wait = 1;
  g().kernel(mmaKernels(), "emu_cp_async").launch({1}, {32}, 128 * sizeof(float), g().stream(), {&px, &pout, &wait});
  const auto out = download<float>(bout, 160);
  for (int t = 0; t < 32; ++t) EXPECT_TRUE(std::isnan(out[t])) << "read before the wait: " << out[t];
  for (int i = 0; i < 128; ++i) EXPECT_EQ(out[32 + i], x[(i + 28) % 128]) << i;
  wait = 0;
  const std::string e = launchError(mmaKernels(), "emu_cp_async", 32, 128 * sizeof(float), {&px, &pout, &wait});
  EXPECT_NE(e.find("never waited for"), std::string::npos) << e;
}

// ---- Hopper's wgmma (GIZML_GPU_EMULATOR_ARCH=90) ------------------------------------------------

// 128 threads scatter A (64 x 32) and B (32 x n) into dynamic shared memory at the byte offsets
// the host computed (offA, offB), then run two k steps of wgmma (the second accumulating) with
// the descriptors geo gives (per step: A's start, LBO, SBO, then B's). `misuse` makes the kernel
// break a rule: 1 no wait, 2 threads 64..127 use another A descriptor, 3 an operand overwritten
// before the wait, 4 a swizzled A starting off its atom, 5 an operand in static shared memory.
std::string wgmmaKernel() {
  std::string s = "typedef unsigned short u16;\n" + gizml::gpuops::mmaSource();
  for (int n : {8, 64, 256})
    for (bool f16 : {false, true}) s += gizml::gpuops::wgmmaSource(n, f16);
  return s + R"(
template <int N>
__device__ void emu_wgmma_step(float* acc, unsigned long long a, unsigned long long b, int scaleD, int f16) {
#ifdef GIZML_HAVE_WGMMA
  if (f16) gz_wgmma<N, true>(acc, a, b, scaleD);
  else gz_wgmma<N, false>(acc, a, b, scaleD);
#endif
}
extern "C" __global__ void emu_wgmma(const u16* a, const u16* b, const unsigned* offA, const unsigned* offB,
                                     const unsigned* geo, int swizzle, int n, int f16, int scaleFirst,
                                     float* before, float* d, int misuse) {
#ifdef GIZML_HAVE_WGMMA
  extern __shared__ __align__(1024) unsigned char sh[];
  __shared__ __align__(1024) u16 fixed[64 * 16];
  const int t = threadIdx.x;
  for (int i = t; i < 64 * 32; i += blockDim.x) *(u16*)(sh + offA[i]) = a[i];
  for (int i = t; i < 32 * n; i += blockDim.x) *(u16*)(sh + offB[i]) = b[i];
  __syncthreads();
  float acc[128];
  for (int i = 0; i < n / 2; ++i) acc[i] = (float)((t + 3 * i) % 5) - 2.0f;
  gz_fence_proxy_async();
  gz_wgmma_fence();
  for (int step = 0; step < 2; ++step) {
    const unsigned* g = geo + 6 * step;
    unsigned startA = g[0];
    if (misuse == 2 && t >= 64) startA += 16;
    if (misuse == 4) startA += 128;
    const unsigned saddrA = misuse == 5 ? gz_saddr(fixed) : gz_saddr(sh + startA);
    const unsigned long long da = gz_wgmma_desc(saddrA, g[1], g[2], swizzle);
    const unsigned long long db = gz_wgmma_desc(gz_saddr(sh + g[3]), g[4], g[5], swizzle);
    const int scaleD = step == 0 ? scaleFirst : 1;
    if (n == 8) emu_wgmma_step<8>(acc, da, db, scaleD, f16);
    else if (n == 64) emu_wgmma_step<64>(acc, da, db, scaleD, f16);
    else emu_wgmma_step<256>(acc, da, db, scaleD, f16);
  }
  gz_wgmma_commit();
  for (int i = 0; i < n / 2; ++i) before[t * 128 + i] = acc[i];  // in flight: the old values
  if (misuse == 3) {
    __syncthreads();
    if (t == 0) *(u16*)(sh + offA[0]) ^= 0x4000;
  }
  if (misuse != 1) gz_wgmma_wait<0>();
  for (int i = 0; i < n / 2; ++i) d[t * 128 + i] = acc[i];
#endif
}
)";
}

// An exact binary16 encoding of a small integer.
uint16_t f16Bits(int v) {
  if (v == 0) return 0;
  const int a = std::abs(v);
  int e = 0;
  while ((a >> e) > 1) ++e;
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | (((a << 10) >> e) & 0x3ff));
}

// The PTX ISA's shared memory layouts ("Shared Memory Matrix Layout", "Matrix Descriptor
// Format"), written here as rows and 16-byte chunks. Swizzle width w = 16 bytes (none), 32, 64
// or 128. A swizzled tile is made of atoms of 8 rows of w bytes on a multiple of 8 w; in row r
// of an atom, the 16-byte chunk c of the row is stored at chunk c ^ (r w / 128) % (w / 16), since
// the hardware XORs address bits 4.. with bits 7.. .
unsigned swizzled(unsigned row, unsigned byteInRow, unsigned w) {
  if (w == 16) return byteInRow;
  const unsigned chunk = byteInRow / 16, phase = (row * w / 128) % (w / 16);
  return (chunk ^ phase) * 16 + byteInRow % 16;
}
struct WgmmaLayout {
  std::vector<uint32_t> offA, offB;  // byte offsets of A[m][k] (64 x 32) and B[k][n] (32 x n)
  uint32_t geo[12];                  // per k step: A start, LBO, SBO, B start, LBO, SBO
};
// K-major A: without swizzling, 8 x 8 core matrices of 128 contiguous bytes (row r at 16 r),
// the 8 row groups side by side (SBO = 128), then the next 8 k at LBO = 1024. Swizzled: rows of w
// bytes holding w / 2 consecutive k, 8-row atoms (SBO = 8 w apart), the next w / 2 k in the next
// column of atoms; a k step of 16 moves the start 32 bytes along the row or to the next column.
// MN-major B: without swizzling, core matrices of 8 k rows x 8 n (row k at 16 k), n chunks side
// by side (SBO = 128), the next 8 k at LBO = n / 8 * 128. Swizzled: rows (one k each) of w bytes
// holding w / 2 consecutive n, 8-row atoms with the next w / 2 n at LBO = 8 w, the next 8 k at
// SBO = (atoms across n) 8 w.
WgmmaLayout wgmmaLayout(int n, unsigned w) {
  WgmmaLayout L;
  L.offA.resize(64 * 32);
  L.offB.resize(32 * n);
  const uint32_t bBase = 64 * 32 * 2 * 2;  // past A, a multiple of 1024
  if (w == 16) {
    for (unsigned m = 0; m < 64; ++m)
      for (unsigned k = 0; k < 32; ++k) L.offA[m * 32 + k] = (k / 8) * 1024 + (m / 8) * 128 + (m % 8) * 16 + (k % 8) * 2;
    const uint32_t lboB = n / 8 * 128;
    for (unsigned k = 0; k < 32; ++k)
      for (unsigned c = 0; c < static_cast<unsigned>(n); ++c)
        L.offB[k * n + c] = bBase + (k / 8) * lboB + (c / 8) * 128 + (k % 8) * 16 + (c % 8) * 2;
    for (int s = 0; s < 2; ++s) {
      const uint32_t g[6] = {s * 2048u, 1024, 128, bBase + 2 * s * lboB, lboB, 128};
      std::copy(g, g + 6, L.geo + 6 * s);
    }
    return L;
  }
  const unsigned perRow = w / 2, atom = 8 * w;
  for (unsigned m = 0; m < 64; ++m)
    for (unsigned k = 0; k < 32; ++k)
      L.offA[m * 32 + k] = (k / perRow) * 8 * atom + (m / 8) * atom + (m % 8) * w + swizzled(m % 8, (k % perRow) * 2, w);
  const unsigned atomsN = (static_cast<unsigned>(n) + perRow - 1) / perRow;
  for (unsigned k = 0; k < 32; ++k)
    for (unsigned c = 0; c < static_cast<unsigned>(n); ++c)
      L.offB[k * n + c] =
          bBase + (k / 8) * atomsN * atom + (c / perRow) * atom + (k % 8) * w + swizzled(k % 8, (c % perRow) * 2, w);
  for (unsigned s = 0; s < 2; ++s) {
    const unsigned k0 = 16 * s;
    const uint32_t g[6] = {(k0 / perRow) * 8 * atom + (k0 % perRow) * 2, 0, atom,
                           bBase + 2 * s * atomsN * atom, atom, atomsN * atom};
    std::copy(g, g + 6, L.geo + 6 * s);
  }
  return L;
}

// Hopper's instructions: skipped below 9.0.
class EmulatorHopper : public Emulator {
 protected:
  void SetUp() override {
    Emulator::SetUp();
    if (IsSkipped()) return;
    if (g().properties().major < 9) GTEST_SKIP() << "wgmma and TMA need 9.0 (GIZML_GPU_EMULATOR_ARCH=90)";
  }
};

class EmulatorWgmma : public EmulatorHopper {
 protected:
  struct Result {
    std::vector<float> before, d;
    std::string error;
  };
  // Runs emu_wgmma; the inputs are small integers, so every product and sum is exact.
  Result run(int n, int swizzle, bool f16, int scaleFirst, int misuse = 0, unsigned threads = 128) {
    static const unsigned kWidth[4] = {16, 128, 64, 32};
    const WgmmaLayout L = wgmmaLayout(n, kWidth[swizzle]);
    std::vector<uint16_t> a(64 * 32), b(32 * n);
    for (int m = 0; m < 64; ++m)
      for (int k = 0; k < 32; ++k) {
        const int v = (m * 7 + k * 3) % 9 - 4;
        a[m * 32 + k] = f16 ? f16Bits(v) : bf16Bits(v);
      }
    for (int k = 0; k < 32; ++k)
      for (int c = 0; c < n; ++c) {
        const int v = (k * 5 + c * 11) % 7 - 3;
        b[k * n + c] = f16 ? f16Bits(v) : bf16Bits(v);
      }
    const uint32_t shared = *std::max_element(L.offB.begin(), L.offB.end()) + 2;
    auto ba = upload(a), bb = upload(b), boa = upload(L.offA), bob = upload(L.offB),
         bg = upload(std::vector<uint32_t>(L.geo, L.geo + 12));
    auto bbefore = g().allocate(128 * 128 * sizeof(float)), bd = g().allocate(128 * 128 * sizeof(float));
    uint64_t pa = ba.address(), pb = bb.address(), poa = boa.address(), pob = bob.address(), pg = bg.address(),
             pbefore = bbefore.address(), pd = bd.address();
    int sw = swizzle, nn = n, half = f16, sc = scaleFirst, mis = misuse;
    Result r;
    r.error = launchError(wgmmaKernel(), "emu_wgmma", threads, shared,
                          {&pa, &pb, &poa, &pob, &pg, &sw, &nn, &half, &sc, &pbefore, &pd, &mis});
    if (r.error.empty()) {
      r.before = download<float>(bbefore, 128 * 128);
      r.d = download<float>(bd, 128 * 128);
    }
    return r;
  }
  static uint16_t bf16Bits(int v) {
    const float f = static_cast<float>(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return static_cast<uint16_t>(u >> 16);  // exact: small integers have 8 significant bits at most
  }
};

TEST_F(EmulatorWgmma, ProductsMatchAScalarProductInEveryLayout) {
  for (bool f16 : {false, true})
    for (int n : {8, 64, 256})
      for (int swizzle : {0, 3, 2, 1})
        for (int scaleFirst : {0, 1}) {
          const Result r = run(n, swizzle, f16, scaleFirst);
          const std::string what = std::string(f16 ? "f16" : "bf16") + " n " + std::to_string(n) + " swizzle " +
                                   std::to_string(swizzle) + " scaleD " + std::to_string(scaleFirst);
          ASSERT_EQ(r.error, "") << what;
          int wrong = 0;
          for (int t = 0; t < 128; ++t)
            for (int i = 0; i < n / 2; ++i) {
              // The m64nNk16 D fragment: warp w holds rows 16 w..16 w + 15; register 4 j + q of
              // lane l is row 16 w + l / 4 + 8 (q / 2), column 8 j + 2 (l % 4) + q % 2.
              const int w = t / 32, l = t % 32, j = i / 4, q = i % 4;
              const int row = 16 * w + l / 4 + 8 * (q / 2), col = 8 * j + 2 * (l % 4) + q % 2;
              const float init = static_cast<float>((t + 3 * i) % 5) - 2.0f;
              float s = scaleFirst ? init : 0.0f;
              for (int k = 0; k < 32; ++k)
                s = std::fma(static_cast<float>((row * 7 + k * 3) % 9 - 4), static_cast<float>((k * 5 + col * 11) % 7 - 3), s);
              EXPECT_EQ(r.before[t * 128 + i], init) << what << ": d before the wait, thread " << t << " reg " << i;
              if (r.d[t * 128 + i] != s && ++wrong <= 5)
                ADD_FAILURE() << what << ": thread " << t << " reg " << i << " (row " << row << ", col " << col
                              << "): " << r.d[t * 128 + i] << ", expected " << s;
            }
          EXPECT_EQ(wrong, 0) << what;
        }
}

TEST_F(EmulatorWgmma, MisuseIsAnError) {
  auto expectError = [&](const std::string& error, const std::string& part, const char* what) {
    EXPECT_NE(error.find(part), std::string::npos) << what << ": " << error;
  };
  expectError(run(64, 1, false, 0, 1).error, "wgmma operations never waited for", "a missing wait");
  expectError(run(64, 1, false, 0, 0, 64).error, "is incomplete", "64 threads");
  expectError(run(64, 1, false, 0, 2).error, "the warpgroup's threads disagree", "a non-uniform descriptor");
  expectError(run(64, 1, false, 0, 3).error, "changed between the wgmma and the wgmma.wait_group",
              "an operand overwritten in flight");
  expectError(run(64, 1, false, 0, 4).error, "not aligned to 1024 bytes", "a swizzle atom off its repeat");
  expectError(run(64, 0, false, 0, 5).error, "not in dynamic shared memory", "a static __shared__ operand");
}

// ---- Hopper's TMA and mbarriers (GIZML_GPU_EMULATOR_ARCH=90) ----------------------------------

// Thread 0 initializes two mbarriers (one arrival each) and, in each of two rounds (phases 0 and
// 1 of both barriers), expects the bytes of that round's loads, issues them and reads the first
// load's destination before any wait (the old contents); every thread waits on both barriers, and
// at the end the dynamic shared memory is copied out. A load is 6 ints: map, c0, c1, shared offset,
// barrier, round. `misuse`: 1 no arrive.expect_tx on barrier 1 in round 0, 2 a destination 16
// bytes off its alignment, 3 barrier 1 expects 16 bytes more than its copies bring, 4 barrier 1
// never initialized.
const char* kTmaKernel = R"(
extern "C" __global__ void emu_tma(const unsigned char* maps, const int* loads, int count, unsigned sharedBytes,
                                   unsigned char* out, unsigned char* early, int misuse) {
#ifdef GIZML_HAVE_TMA
  extern __shared__ __align__(1024) unsigned char sh[];
  __shared__ __align__(8) unsigned long long bars[2];
  const unsigned t = threadIdx.x;
  if (t == 0) {
    for (int b = 0; b < 2 - (misuse == 4); ++b) gz_mbar_init(gz_saddr(&bars[b]), 1);
    gz_fence_mbar_init();
  }
  __syncthreads();
  for (int round = 0; round < 2; ++round) {
    if (t == 0)
      for (int b = 0; b < 2; ++b) {
        unsigned bytes = misuse == 3 && b == 1 ? 16 : 0;
        for (int i = 0; i < count; ++i) {
          const int* l = loads + 6 * i;
          // The box's bytes: boxRows x boxCols 2-byte elements, from the host's table after the maps.
          if (l[4] == b && l[5] == round) bytes += ((const unsigned*)(maps + 512))[l[0]];
        }
        if (!(misuse == 1 && b == 1 && round == 0)) gz_mbar_arrive_expect(gz_saddr(&bars[b]), bytes);
        for (int i = 0; i < count; ++i) {
          const int* l = loads + 6 * i;
          if (l[4] != b || l[5] != round) continue;
          gz_tma_load_2d(gz_saddr(sh + l[3]) + (misuse == 2 ? 16 : 0), maps + 128 * l[0], l[1], l[2], gz_saddr(&bars[b]));
        }
      }
    // In flight: the issuing thread reads the old contents until a wait lands the copies.
    if (round == 0 && t == 0)
      for (int i = 0; i < 128; ++i) early[i] = sh[loads[3] + i];
    for (int b = 0; b < 2; ++b) gz_mbar_wait(gz_saddr(&bars[b]), round);
    // Thread 0 re-arms the barriers only once all threads saw this phase: a parity wait on a
    // barrier two phases ahead would wait for a phase that never comes.
    __syncthreads();
  }
  for (unsigned i = t; i < sharedBytes; i += blockDim.x) out[i] = sh[i];
#endif
}
)";

class EmulatorTma : public EmulatorHopper {};

// The shared memory bytes of a box as cuTensorMapEncodeTiled's swizzle modes lay it out (CUDA
// programming guide, "TMA Swizzle"; PTX ISA "Tensor swizzling modes"): the box's rows of
// boxCols elements one after another from dst; with a swizzle of W bytes, seen as W-byte rows
// of a pattern repeating every 8 W bytes (dst on a multiple of it), the 16-byte chunks of a
// W-byte row are permuted as wgmma's operands are (the `swizzled` above).
void expectBox(std::vector<uint8_t>& image, unsigned dst, const std::vector<uint16_t>& tensor, int rows, int cols,
               int stride, int boxRows, int boxCols, int w, int c0, int c1) {
  for (int r = 0; r < boxRows; ++r)
    for (int c = 0; c < boxCols; ++c) {
      const int row = c1 + r, col = c0 + c;
      const uint16_t v = row >= 0 && row < rows && col >= 0 && col < cols ? tensor[row * stride + col] : 0;
      const unsigned o = static_cast<unsigned>((r * boxCols + c) * 2);
      const unsigned at = w ? o / w * w + swizzled(o / w, o % w, w) : o;
      std::memcpy(&image[dst + at], &v, 2);
    }
}

TEST_F(EmulatorTma, LoadsLandSwizzledWithZerosOutsideAtTheWait) {
  // A 40 x 100 tensor of 2-byte values, rows 104 elements (208 bytes) apart; the 4 padding
  // elements of each row are never read (they are outside the tensor: zeros).
  constexpr int kRows = 40, kCols = 100, kStride = 104;
  std::vector<uint16_t> tensor(kRows * kStride, 0xeeee);
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kCols; ++c) tensor[r * kStride + c] = static_cast<uint16_t>(r * 131 + c * 7 + 1);
  auto bt = upload(tensor);
  struct Map {
    int boxRows, boxCols, swizzle;
  };
  const Map maps[4] = {{8, 24, 0}, {16, 16, 32}, {8, 32, 64}, {16, 64, 128}};
  std::vector<uint8_t> table(512 + 16);
  for (int m = 0; m < 4; ++m) {
    const auto map = gpu::tensorMap2d(g(), bt.address(), kRows, kCols, kStride * 2, maps[m].boxRows, maps[m].boxCols,
                                      maps[m].swizzle);
    std::memcpy(&table[128 * m], map.data(), 128);
    const uint32_t bytes = static_cast<uint32_t>(maps[m].boxRows * maps[m].boxCols * 2);
    std::memcpy(&table[512 + 4 * m], &bytes, 4);
  }
  // Per map: a box inside, one over the bottom right edge, one at negative coordinates, one
  // wholly outside; alternating barriers and rounds; each destination on 1024 bytes.
  std::vector<int> loads;
  unsigned at = 0;
  for (int m = 0; m < 4; ++m) {
    const int br = maps[m].boxRows, bc = maps[m].boxCols;
    const int corners[4][2] = {{8, 4}, {kCols - bc / 2, kRows - br / 2}, {-bc / 2 - 3, -5}, {kCols + 2, 1}};
    for (int k = 0; k < 4; ++k) {
      const int i = static_cast<int>(loads.size() / 6);
      loads.insert(loads.end(), {m, corners[k][0], corners[k][1], static_cast<int>(at), i % 2, i / 2 % 2});
      at += (static_cast<unsigned>(br * bc * 2) + 1023) / 1024 * 1024;
    }
  }
  const unsigned shared = at, count = static_cast<unsigned>(loads.size() / 6);
  std::vector<uint8_t> expected(shared, 0xff);  // the emulator's NaN bytes where nothing landed
  for (unsigned i = 0; i < count; ++i) {
    const int* l = &loads[6 * i];
    const Map& m = maps[l[0]];
    expectBox(expected, static_cast<unsigned>(l[3]), tensor, kRows, kCols, kStride, m.boxRows, m.boxCols, m.swizzle,
              l[1], l[2]);
  }
  auto bmaps = upload(table), bloads = upload(loads);
  auto bout = g().allocate(shared), bearly = g().allocate(128);
  uint64_t pm = bmaps.address(), pl = bloads.address(), po = bout.address(), pe = bearly.address();
  int n = static_cast<int>(count), misuse = 0;
  unsigned sb = shared;
  ASSERT_EQ(launchError(kTmaKernel, "emu_tma", 128, shared, {&pm, &pl, &n, &sb, &po, &pe, &misuse}), "");
  const auto out = download<uint8_t>(bout, shared), early = download<uint8_t>(bearly, 128);
  for (int t = 0; t < 128; ++t) EXPECT_EQ(early[t], 0xff) << "byte " << t << " of the first box, read before the wait";
  int wrong = 0;
  for (unsigned i = 0; i < shared; ++i)
    if (out[i] != expected[i] && ++wrong <= 8)
      ADD_FAILURE() << "shared byte " << i << ": " << int(out[i]) << ", expected " << int(expected[i]);
  EXPECT_EQ(wrong, 0);

  // Misuse fails the launch with the barrier or the call named, instead of hanging.
  auto error = [&](int kind) {
    misuse = kind;
    return launchError(kTmaKernel, "emu_tma", 128, shared, {&pm, &pl, &n, &sb, &po, &pe, &misuse});
  };
  std::string e = error(1);
  EXPECT_NE(e.find("can never complete"), std::string::npos) << e;
  EXPECT_NE(e.find("mbarrier at shared offset"), std::string::npos) << e;
  e = error(2);
  EXPECT_NE(e.find("is not aligned to"), std::string::npos) << e;
  e = error(3);
  EXPECT_NE(e.find("can never complete"), std::string::npos) << e;
  EXPECT_NE(e.find("transaction count 16 bytes"), std::string::npos) << e;
  e = error(4);
  EXPECT_NE(e.find("mbarrier.arrive.expect_tx: no mbarrier was initialized at shared offset"), std::string::npos) << e;
}

// tensorMap2d refuses what cuTensorMapEncodeTiled would, naming the argument; below 9.0 it says
// the GPU has no TMA.
TEST_F(Emulator, TensorMapArgumentsAreChecked) {
  auto b = g().allocate(64 * 256);
  const uint64_t a = b.address();
  auto error = [&](uint64_t address, uint64_t rows, uint64_t cols, uint64_t stride, uint32_t boxRows, uint32_t boxCols,
                   int swizzle) -> std::string {
    try {
      gpu::tensorMap2d(g(), address, rows, cols, stride, boxRows, boxCols, swizzle);
      return "";
    } catch (const gizml::Error& e) {
      return e.what();
    }
  };
  if (g().properties().major < 9) {
    const std::string e = error(a, 64, 128, 256, 8, 64, 128);
    EXPECT_NE(e.find("compute capability 9.0"), std::string::npos) << e;
    return;
  }
  EXPECT_EQ(error(a, 64, 128, 256, 8, 64, 128), "");
  const std::pair<std::string, std::string> cases[] = {
      {error(a + 8, 64, 128, 256, 8, 64, 128), "address"},
      {error(a, 0, 128, 256, 8, 64, 128), "rows"},
      {error(a, 64, 0, 256, 8, 64, 128), "cols"},
      {error(a, 64, 128, 248, 8, 64, 128), "rowStrideBytes"},
      {error(a, 64, 128, 1ull << 40, 8, 64, 128), "rowStrideBytes"},
      {error(a, 64, 128, 256, 0, 64, 128), "boxRows"},
      {error(a, 64, 128, 256, 257, 64, 128), "boxRows"},
      {error(a, 64, 128, 256, 8, 12, 0), "boxCols"},
      {error(a, 64, 128, 256, 8, 64, 64), "wider than the 64-byte swizzle"},
      {error(a, 64, 128, 256, 8, 64, 48), "swizzleBytes"},
  };
  for (const auto& [e, part] : cases) EXPECT_NE(e.find(part), std::string::npos) << part << ": " << e;
}

}  // namespace
