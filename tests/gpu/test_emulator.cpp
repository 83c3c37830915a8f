// The host GPU emulator itself (src/gpu/emulator): barriers and warp shuffles, the errors it
// gives instead of hanging or running on (divergent barriers, a lane that exited before a
// shuffle, cp.async copies never waited for, compile errors), out-of-memory, poisoned shared
// memory, and its tensor-core emulation against scalar products. Runs under
// GIZML_GPU_EMULATOR=1 (ctest's emulator_test_gpu); skipped elsewhere.
#include <gizhw/gpu.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/codegen.h"
#include "gpu/emulator/emulator.h"

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
  const std::string common = gpu::mmaSource() + R"(
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
  return "typedef unsigned short u16;\n" + gpu::mmaSource() + R"(
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

}  // namespace
