// The generated CUDA of the tests' tile programs (tests/tile/programs.h), run on the host and
// compared with the CPU executor: a check of the GPU code generator where no GPU is at hand
// (scripts/tile-emulate.sh builds and runs it). The kernel source is compiled by g++ as C++: every
// CUDA thread is a std::thread, __syncthreads a std::barrier, shared memory a buffer filled with
// NaN bytes before each block; ldmatrix, mma.sync and cp.async are emulated per warp from their
// PTX definitions (a cp.async copy lands only at the wait that covers it, so a missing wait
// reads stale data; copies never waited for abort). What it cannot check: the PTX itself (see
// tests/tile/test_cuda.cpp), timing, and whether the fragment layouts written here match the
// hardware (they follow the PTX ISA, as src/gpu/kernels/matmul.cu.inc does).
#include <gizml/tile.h>
#include <dlfcn.h>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include "tile/ir.h"
#include "tile/run.h"
#include "programs.h"
using namespace gizml;
using namespace gizml::tile;

static const char* kPrelude = R"EMU(
#include <cmath>
#include <cstring>
#include <cstdint>
#include <algorithm>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
using std::min; using std::max;
#define __device__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(x)
#define __restrict__ __restrict
#define __align__(x) alignas(x)
struct EmuDim { unsigned x = 0; };
thread_local EmuDim threadIdx, blockIdx;
unsigned char* g_smem = nullptr;
thread_local std::barrier<>* t_block = nullptr;
inline void __syncthreads() { t_block->arrive_and_wait(); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
struct EmuWarp { unsigned addr[32]; unsigned a[32][4]; unsigned b[32][2]; };
thread_local int t_lane = 0;
thread_local EmuWarp* t_wx = nullptr;
thread_local std::barrier<>* t_wbar = nullptr;
struct EmuCopy { void* dst; const void* src; };
thread_local std::vector<std::vector<EmuCopy>> t_groups;
thread_local std::vector<EmuCopy> t_open;
)EMU";

static const char* kMma = R"EMU(
inline unsigned gz_saddr(const void* p) { return (unsigned)((const unsigned char*)p - g_smem); }
inline void gz_ldsm_x4(unsigned a, unsigned* r) {
  t_wx->addr[t_lane] = a; t_wbar->arrive_and_wait();
  for (int m = 0; m < 4; ++m) {
    const uint16_t* p = (const uint16_t*)(g_smem + t_wx->addr[m * 8 + t_lane / 4]) + 2 * (t_lane % 4);
    r[m] = (unsigned)p[0] | ((unsigned)p[1] << 16);
  }
  t_wbar->arrive_and_wait();
}
inline void gz_ldsm_x2_trans(unsigned a, unsigned* r) {
  t_wx->addr[t_lane] = a; t_wbar->arrive_and_wait();
  for (int m = 0; m < 2; ++m) {
    const uint16_t* p0 = (const uint16_t*)(g_smem + t_wx->addr[m * 8 + 2 * (t_lane % 4)]) + t_lane / 4;
    const uint16_t* p1 = (const uint16_t*)(g_smem + t_wx->addr[m * 8 + 2 * (t_lane % 4) + 1]) + t_lane / 4;
    r[m] = (unsigned)*p0 | ((unsigned)*p1 << 16);
  }
  t_wbar->arrive_and_wait();
}
template <int F16>
inline void gz_mma_emu(float* d, const unsigned* a, const unsigned* b) {
  for (int i = 0; i < 4; ++i) t_wx->a[t_lane][i] = a[i];
  for (int i = 0; i < 2; ++i) t_wx->b[t_lane][i] = b[i];
  t_wbar->arrive_and_wait();
  auto val = [](unsigned reg, int hi) { const u16 h = (u16)(hi ? reg >> 16 : reg & 0xffff); return F16 ? gz_h2f(h) : gz_bf2f(h); };
  auto A = [&](int r, int k) { return val(t_wx->a[(r % 8) * 4 + (k % 8) / 2][(r >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2); };
  auto B = [&](int k, int n) { return val(t_wx->b[n * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k % 2); };
  const int g = t_lane / 4, tig = t_lane % 4;
  for (int q = 0; q < 4; ++q) {
    const int row = g + (q >= 2 ? 8 : 0), col = 2 * tig + (q & 1);
    float s = d[q];
    for (int k = 0; k < 16; ++k) s = std::fmaf(A(row, k), B(k, col), s);
    d[q] = s;
  }
  t_wbar->arrive_and_wait();
}
inline void gz_mma_bf16(float* d, const unsigned* a, const unsigned* b) { gz_mma_emu<0>(d, a, b); }
inline void gz_mma_f16(float* d, const unsigned* a, const unsigned* b) { gz_mma_emu<1>(d, a, b); }
inline void gz_cp_async16(unsigned dst, const void* src) { t_open.push_back({g_smem + dst, src}); }
inline void gz_cp_async_commit() { t_groups.push_back(t_open); t_open.clear(); }
template <int N>
inline void gz_cp_async_wait() {
  while ((int)t_groups.size() > N) {
    for (auto& c : t_groups.front()) std::memcpy(c.dst, c.src, 16);
    t_groups.erase(t_groups.begin());
  }
}
)EMU";

// Runs kernel k on its operands' host memory.
void emulate(const tir::Kernel& k) {
  const CudaKernel c = generateCuda(k);
  std::string src = c.source;
  const std::string sh = "extern __shared__ __align__(16) float gz_smem[];";
  if (auto at = src.find(sh); at != std::string::npos) src.replace(at, sh.size(), "float* const gz_smem = (float*)g_smem;");
  if (auto at = src.find("#ifndef GIZML_TILE_MMA_HELPERS"); at != std::string::npos) {
    const std::string lin = src.substr(src.find("__device__ __forceinline__ int gz_mma_lin", at));
    const std::string linFn = lin.substr(0, lin.find("\n}\n") + 3);
    const auto end = src.find("#endif\n", at) + 7;
    src.replace(at, end - at, std::string(kMma) + linFn);
  }
  const auto open = src.find(c.name + "(") + c.name.size() + 1;
  const std::string params = src.substr(open, src.find(") {", open) - open);
  std::string call = c.name + "(";
  size_t i = 0, from = 0;
  while (from < params.size()) {
    size_t comma = params.find(", ", from);
    if (comma == std::string::npos) comma = params.size();
    const std::string p = params.substr(from, comma - from);
    call += (i ? ", " : "") + std::string("(") + p.substr(0, p.find(" __restrict__")) + ")params[" + std::to_string(i) + "]";
    ++i;
    from = comma + 2;
  }
  call += ");";
  src = std::string(kPrelude) + src + R"(
extern "C" void emu_launch(void** params, int blocks, int threads, int smemBytes) {
  std::vector<unsigned char> smem((size_t)std::max(smemBytes, 16) + 64);
  g_smem = (unsigned char*)(((uintptr_t)smem.data() + 63) & ~(uintptr_t)63);
  for (int b = 0; b < blocks; ++b) {
    std::memset(g_smem, 0xff, (size_t)std::max(smemBytes, 16));
    std::barrier<> bar(threads);
    std::vector<std::unique_ptr<std::barrier<>>> wb;
    for (int w = 0; w < (threads + 31) / 32; ++w) wb.push_back(std::make_unique<std::barrier<>>(32));
    std::vector<EmuWarp> wx((threads + 31) / 32);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        threadIdx.x = t; blockIdx.x = b; t_block = &bar; t_lane = t % 32; t_wx = &wx[t / 32]; t_wbar = wb[t / 32].get();
        t_groups.clear(); t_open.clear();
        )" + call + R"(
        if (!t_groups.empty() || !t_open.empty()) std::abort();  // copies never waited for
      });
    for (auto& t : ts) t.join();
  }
}
)";
  static int n = 0;
  const std::string base = "kernel" + std::to_string(n++);
  std::ofstream(base + ".cpp") << src;
  const std::string cmd = "g++ -std=c++20 -O1 -w -shared -fPIC " + base + ".cpp -o " + base + ".so";
  if (std::system(cmd.c_str()) != 0) { std::cerr << "compile failed: " << base << "\n"; std::exit(1); }
  void* h = dlopen(("./" + base + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) { std::cerr << dlerror() << "\n"; std::exit(1); }
  auto launch = (void (*)(void**, int, int, int))dlsym(h, "emu_launch");
  std::vector<void*> ptrs;
  for (const auto& o : k.operands) ptrs.push_back(o.tensor.rawData());
  launch(ptrs.data(), (int)c.blocks, c.threads, (int)c.sharedBytes);
}

int failures = 0;
void check(const char* what, const Tile::Grid& grid, const Tile::Body& body, double tol) {
  const auto cpu = Tile::run(grid, body);
  tir::Kernel k = trace(grid, body);
  emulate(k);
  size_t w = 0;
  for (const auto& o : k.operands) {
    if (!o.write) continue;
    const auto a = o.tensor.toFloats(), b = cpu[w].toFloats();
    double maxErr = 0; size_t bad = 0, firstBad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      const double e = std::abs((double)a[i] - b[i]);
      if (!(e <= tol * (1 + std::abs(b[i])))) { if (!bad) firstBad = i; ++bad; }
      if (e > maxErr || std::isnan(e)) maxErr = e;
    }
    std::printf("%-45s output %zu: max |d| %.3g%s", what, w, maxErr, bad ? "  FAIL" : "  ok");
    if (bad) { std::printf(" (%zu bad, first %zu: %g vs %g)", bad, firstBad, a[firstBad], b[firstBad]); ++failures; }
    std::printf("\n");
    ++w;
  }
}

int main(int argc, char** argv) {
  using namespace tileprog;
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char* n) { return only.empty() || only == n; };
  if (want("guide")) { const auto x = T::tensor({4, 4}, {-2, -1, 0, 1, 2, 3, 4, 5, -3, -4, 6, 7, 8, -9, 1, 0.5}), w = T::tensor({1, 4}, {1, 2, 3, 4});
    check("guide", {1}, guide(x, w), 0); }
  if (want("f32")) { const auto a = T::uniform(T::Key(1), {150, 70}, -1, 1), b = T::uniform(T::Key(2), {70, 90}, -1, 1);
    check("f32 product 150x70x90 (64,32,32)", productGrid(a, b, 64, 32), product(a, b, 64, 32, 32), 0); }
  if (want("bf16")) { const auto a = T::uniform(T::Key(3), {150, 70}, -1, 1, DType::BF16), b = T::uniform(T::Key(4), {70, 90}, -1, 1, DType::BF16);
    for (int s : {1, 3}) check(("bf16 product odd, stages " + std::to_string(s)).c_str(), productGrid(a, b, 64, 32), product(a, b, 64, 32, 32, s), 1e-5); }
  if (want("f16")) { const auto a = T::uniform(T::Key(5), {128, 96}, -1, 1, DType::F16), b = T::uniform(T::Key(6), {96, 64}, -1, 1, DType::F16);
    for (int s : {1, 2, 4}) check(("f16 product aligned, stages " + std::to_string(s)).c_str(), productGrid(a, b, 64, 32), product(a, b, 64, 32, 32, s), 1e-5); }
  if (want("big")) { const auto a = T::uniform(T::Key(7), {200, 64}, -1, 1, DType::BF16), b = T::uniform(T::Key(8), {64, 136}, -1, 1, DType::BF16);
    check("bf16 product 128x128 blocks, 3 stages", productGrid(a, b, 128, 128), product(a, b, 128, 128, 32, 3), 1e-5); }
  if (want("cast")) { const auto c = T::uniform(T::Key(9), {100, 72}, -1, 1), d = T::uniform(T::Key(10), {72, 40}, -1, 1);
    check("product of bf16 casts", productGrid(c, d, 64, 32), product(c, d, 64, 32, 32, 2, DType::BF16), 1e-5); }
  if (want("softmax")) { const auto h = T::normal(T::Key(11), {37, 29}).cast(DType::BF16);
    check("softmax", softmaxGrid(h), softmax(h), 1.0 / 128); }
  if (want("fold")) { const auto x = T::arange(0, 24).reshape({2, 12}).cast(DType::F16); check("fold", {3}, foldSums(x), 0); }
  if (want("every")) { const auto x = T::uniform(T::Key(12), {37, 29}, -4, 4), y = T::uniform(T::Key(13), {37, 29}, -4, 4);
    check("every operation", everyOperationGrid(x), everyOperation(x, y), 1e-5); }
  if (want("broadcast")) { const auto x = T::uniform(T::Key(7), {4, 4}), row = T::uniform(T::Key(8), {1, 4}), col = T::uniform(T::Key(9), {4, 1});
    check("broadcasting", {1}, broadcasting(x, row, col), 0); }
  if (want("reductions")) { const auto x = T::normal(T::Key(10), {16, 40}); check("reductions", {1}, reductions(x), 1e-6); }
  if (want("masks")) { const auto x = T::arange(1, 16).reshape({5, 3}); check("masks", {2, 1}, masks(x), 0); }
  if (want("transposed")) { const auto at = T::uniform(T::Key(3), {19, 45}, -1, 1), b = T::uniform(T::Key(4), {19, 23}, -1, 1);
    const auto a = at.transpose(0, 1); check("transposed product", productGrid(a, b, 16, 8), product(a, b, 16, 8, 5), 0); }
  std::printf("%d failures\n", failures);
  return failures != 0;
}
