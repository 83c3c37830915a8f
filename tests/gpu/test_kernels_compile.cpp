// Every kernel source the GPU backend uses compiles with NVRTC for sm_80 and sm_90a, and its PTX
// assembles with ptxas when the toolkit is present: CI has no GPU, but a code-generation error
// still fails it. Skipped (with the reason) where NVRTC is absent.
#include <gizhw/gpu.h>
#include <gizml/tensor.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "common/gpu_checks.h"
#include "llm/ops/gpu/model_ops_gpu.h"
#include "netops/kernel_sources.h"
#include "tensor/gpu/codegen.h"

using namespace gizml;
namespace gpu = gizhw::gpu;

namespace {

const char* kArchs[] = {"sm_80", "sm_90a"};

void compileEverywhere(const std::string& source, const std::string& what) {
  for (const char* arch : kArchs) {
    gpu::Compiled c;
    try {
      c = gpu::compileCuda(source, arch, true);
    } catch (const Error& e) {
      ADD_FAILURE() << what << " for " << arch << ": " << e.what();
      continue;
    }
    EXPECT_FALSE(c.ptx.empty()) << what;
    EXPECT_FALSE(c.cubin.empty()) << what;
    test::assemblePtx(c.ptx, arch, what);
  }
}

// Chains over every dtype, operation family and view kind.
std::vector<std::pair<std::string, T::Lazy>> elementwiseChains() {
  using T::lazy;
  const auto f = T::tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  const auto h = f.cast(DType::F16), bf = f.cast(DType::BF16);
  const auto i8 = f.cast(DType::I8), u8 = f.cast(DType::U8), i32 = f.cast(DType::I32), i64 = f.cast(DType::I64);
  const auto b = f.gt(T::scalar(2.0));
  const auto row = T::tensor({3}, {1, 2, 3});
  return {
      {"copy of a transposed view", lazy(f.transpose(0, 1))},
      {"broadcast row", lazy(f) + lazy(row)},
      {"f16 chain", (lazy(h) * 2.0 + lazy(h)).exp().sigmoid()},
      {"bf16 chain", (lazy(bf) - lazy(bf).relu()).tanh().silu().gelu().geluTanh()},
      {"casts", lazy(f).cast(DType::I8).cast(DType::F16).cast(DType::U8).cast(DType::BF16).cast(DType::I64).cast(DType::Bool)},
      {"integers", (lazy(i8) + lazy(u8)).mul(lazy(i32)).pow(lazy(i64)).mod(lazy(i32)).min(lazy(i64)).max(lazy(i8)).abs().neg().sign().relu()},
      {"integer compare", where(lazy(i64).lt(lazy(i32)), lazy(i8), lazy(u8))},
      {"float compare", where(lazy(f).ge(lazy(h)).ne(lazy(b)), lazy(f), lazy(bf))},
      {"logic", lazy(b).unary(T::UnaryOp::Not).binary(T::BinaryOp::And, lazy(b)).binary(T::BinaryOp::Or, lazy(b))},
      {"float ops", (lazy(f).log().sqrt().rsqrt().sin().cos().floor().ceil().round().abs() / lazy(f)).mod(lazy(f)).pow(2.0)},
      {"minmax and eq", lazy(f).min(lazy(bf)).max(lazy(h)).eq(lazy(f)).le(lazy(b))},
      {"true division of ints", lazy(i32) / lazy(i64)},
      {"scalars", (lazy(f) * 0.5 + 3.0).cast(DType::I32) + 7.0},
      {"slices", lazy(f.slice(1, 2, -4, -1)) * lazy(f.slice(0, 0, 1).expand({2, 3}))},
  };
}

}  // namespace

TEST(KernelsCompile, FixedKernels) {
  GIZML_SKIP_WITHOUT_NVRTC();
  compileEverywhere(gpuops::fixedKernelSource(), "the fixed kernels (reduce, softmax, cumsum, matmul, copies)");
  // The tensor-core path is really there on sm_90a (not the fallback).
  const auto c = gpu::compileCuda(gpuops::fixedKernelSource(), "sm_90a", false);
  EXPECT_NE(c.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), std::string::npos);
  EXPECT_NE(c.ptx.find("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), std::string::npos);
}

// The TMA and mbarrier wrappers (sm_90a only): a kernel using each one assembles, and the
// instructions are really in its PTX.
TEST(KernelsCompile, TmaWrappers) {
  GIZML_SKIP_WITHOUT_NVRTC();
  const std::string source = gpuops::mmaSource() + R"(
extern "C" __global__ void tma_check(const void* map, float* out) {
#ifdef GIZML_HAVE_TMA
  extern __shared__ __align__(1024) unsigned char sh[];
  __shared__ __align__(8) unsigned long long bars[2];
  const unsigned bar = gz_saddr(&bars[0]);
  if (threadIdx.x == 0) {
    gz_mbar_init(bar, 1);
    gz_mbar_init(gz_saddr(&bars[1]), blockDim.x);
    gz_fence_mbar_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    gz_fence_tensormap_acquire(map);
    gz_mbar_arrive_expect(bar, 64 * 128);
    gz_tma_load_2d(gz_saddr(sh), map, (int)blockIdx.x * 64, -3, bar);
  }
  gz_mbar_wait(bar, 0);
  out[threadIdx.x] = (float)sh[threadIdx.x];
#endif
}
)";
  compileEverywhere(source, "the TMA wrappers");
  const auto c = gpu::compileCuda(source, "sm_90a", false);
  for (const char* instruction : {"mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster",
                                  "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
                                  "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
                                  "fence.proxy.tensormap::generic.acquire.sys"})
    EXPECT_NE(c.ptx.find(instruction), std::string::npos) << instruction;
}

TEST(KernelsCompile, NetopsKernels) {
  GIZML_SKIP_WITHOUT_NVRTC();
  compileEverywhere(netops::netopsKernelSource(), "netops' kernels (attention, cross entropy rows)");
}

TEST(KernelsCompile, ElementwiseChains) {
  GIZML_SKIP_WITHOUT_NVRTC();
  for (const auto& [name, chain] : elementwiseChains()) compileEverywhere(gpuops::planElementwise(*chain.node()).source, name);
}

TEST(KernelsCompile, ElementwiseSourceDependsOnPatternNotData) {
  const auto x = T::tensor({4}, {1, 2, 3, 4}), y = T::tensor({4}, {5, 6, 7, 8});
  const auto a = gpuops::planElementwise(*(T::lazy(x) * 2.0 + T::lazy(y)).node());
  const auto b = gpuops::planElementwise(*(T::lazy(y) * 3.0 + T::lazy(x)).node());
  EXPECT_EQ(a.source, b.source);  // other data, other scalar: the same kernel
  const auto c = gpuops::planElementwise(*(T::lazy(x.slice(0, 0, 4, 2)) * 2.0 + T::lazy(y.slice(0, 0, 2))).node());
  EXPECT_NE(a.source, c.source);  // a strided leaf: another pattern
}

TEST(KernelsCompile, NetopsRowsKernels) {
  GIZML_SKIP_WITHOUT_NVRTC();
  compileEverywhere(netops::netopsRowsKernelSource(),
                    "netops rows kernels (argmax, candidates, split sums, norms, SwiGLU, Hadamard)");
}

TEST(KernelsCompile, LanguageModelKernels) {
  GIZML_SKIP_WITHOUT_NVRTC();
  compileEverywhere(llm::ops::gpu::kernelSource(), "the language models' kernels (llm/ops/gpu)");
}

// AMD: the same sources through hipRTC (GIZML_HIP defined) for a CDNA (gfx90a, wave 64) and an
// RDNA (gfx1030, wave 32) GPU, where hipRTC is installed (Debian's ROCm 5: libamdhip64.so.5, whose
// compiler knows neither gfx1100 nor gfx942); never run here.
namespace {

void compileForAmd(const std::string& source, const std::string& what) {
  for (const char* arch : {"gfx90a", "gfx1030"}) {
    try {
      EXPECT_FALSE(gpu::compileHip(source, arch).empty()) << what << " for " << arch;
    } catch (const Error& e) {
      ADD_FAILURE() << what << " for " << arch << ": " << std::string(e.what()).substr(0, 3000);
    }
  }
}

}  // namespace

TEST(KernelsCompileHip, FixedAndNetopsKernels) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  compileForAmd(gpuops::fixedKernelSource(), "the fixed kernels");
  compileForAmd(netops::netopsKernelSource(), "netops' kernels");
  compileForAmd(netops::netopsRowsKernelSource(), "netops rows kernels");
  compileForAmd(llm::ops::gpu::kernelSource(), "the language models' kernels");
}

TEST(KernelsCompileHip, ElementwiseChains) {
  GIZML_SKIP_WITHOUT_HIPRTC();
  for (const auto& [name, chain] : elementwiseChains()) compileForAmd(gpuops::planElementwise(*chain.node()).source, name);
}
