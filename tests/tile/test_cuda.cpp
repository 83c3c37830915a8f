// Tile::cuda: the generated CUDA C++ of the tests' programs (tests/tile/programs.h: those of the
// CPU tests, and products on the tensor cores with and without stages), compiled by gizhw's NVRTC
// loader to PTX for sm_80 and sm_90a and assembled by ptxas (by NVRTC when the toolkit has no
// ptxas), with checks of the PTX; skipped, with the reason, where NVRTC is absent. CI has no GPU:
// tests/tile/test_gpu_run.cpp runs the same programs on one.
#include <gizhw/gpu.h>
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include "common/gpu_checks.h"
#include "programs.h"

using namespace gizml;
namespace gpu = gizhw::gpu;

namespace {

struct Program {
  const char* what;
  Tile::CudaKernel kernel;
  // The tensor-core instruction its PTX must hold, mma.sync or wgmma (none: must hold no mma).
  const char* mma = nullptr;
  // A p.stages pipeline: its PTX waits for cp.async groups, and (`copies`) copies 16 bytes with
  // cp.async where rows are aligned (odd row strides take plain loads: no cp.async.cg).
  bool pipeline = false, copies = false;
  bool hopper = false;  // generated for 9.0 (Tile::cuda's arch 90): compiled for sm_90a only
  bool tma = false;     // its pipeline loads through tensor maps (and mbarriers), not cp.async
};

std::vector<Program> programs() {
  static const auto x = T::zeros({4, 4}), w = T::zeros({1, 4});
  static const auto a = T::zeros({1000, 333}), b = T::zeros({333, 777});
  static const auto a16 = T::zeros({1000, 333}, DType::BF16), b16 = T::zeros({333, 777}, DType::BF16);
  static const auto ah = T::zeros({512, 256}, DType::F16), bh = T::zeros({256, 384}, DType::F16);
  static const auto c = T::zeros({200, 136}), d = T::zeros({136, 96});
  static const auto h = T::zeros({37, 29}, DType::BF16), r = T::zeros({2, 12}, DType::F16);
  static const auto x37 = T::zeros({37, 29}), row = T::zeros({1, 4}), col = T::zeros({4, 1}), x16 = T::zeros({16, 40});
  static const auto x53 = T::zeros({5, 3}), view = T::zeros({4, 4}).slice(0, 1, 4).slice(1, 1, 3);
  static const auto at = T::zeros({19, 45}).transpose(0, 1), bt = T::zeros({19, 23});
  const char* bf16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
  const char* f16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
  const char* wgBf16 = "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16";
  const char* wgF16 = "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16";
  using tileprog::product;
  using tileprog::productGrid;
  return {
      {"the guide's first program", Tile::cuda({1}, tileprog::guide(x, w))},
      {"the guide's product, f32", Tile::cuda(productGrid(a, b, 128, 128), product(a, b, 128, 128, 32))},
      {"bf16 softmax rows, masks, where, casts", Tile::cuda(tileprog::softmaxGrid(h), tileprog::softmax(h))},
      {"a fold whose count depends on p.id", Tile::cuda({3}, tileprog::foldSums(r))},
      {"the product, bf16", Tile::cuda(productGrid(a16, b16, 128, 128), product(a16, b16, 128, 128, 32)), bf16},
      {"the product, bf16, 3 stages", Tile::cuda(productGrid(a16, b16, 128, 128), product(a16, b16, 128, 128, 32, 3)),
       bf16, true, false},
      {"the product, f16 64 x 64 blocks, 2 stages", Tile::cuda(productGrid(ah, bh, 64, 64), product(ah, bh, 64, 64, 32, 2)),
       f16, true, true},
      {"f32 tensors cast to bf16 tiles for the product",
       Tile::cuda(productGrid(c, d, 64, 32), product(c, d, 64, 32, 32, 2, DType::BF16)), bf16},
      // For Hopper: warpgroup products where the shape suits them (whole warpgroups), else mma.sync.
      {"the product, bf16, on 9.0", Tile::cuda(productGrid(a16, b16, 128, 128), product(a16, b16, 128, 128, 32), 90),
       wgBf16, false, false, true},
      {"the product, bf16, 3 stages, on 9.0",
       Tile::cuda(productGrid(a16, b16, 128, 128), product(a16, b16, 128, 128, 32, 3), 90), wgBf16, true, false, true},
      {"the product, f16 64 x 64 blocks, 2 stages, on 9.0",
       Tile::cuda(productGrid(ah, bh, 64, 64), product(ah, bh, 64, 64, 32, 2), 90), wgF16, true, true, true},
      // Hopper's TMA where the rows are 16-byte multiples (512 x 256 x 384); the odd shapes keep cp.async.
      {"the product, f16 64 x 64 blocks, 2 stages, TMA, on 9.0",
       Tile::cuda(productGrid(ah, bh, 64, 64), product(ah, bh, 64, 64, 32, 2), 90, true), wgF16, true, false, true, true},
      {"the product, bf16, 3 stages, TMA asked for rows that do not allow it, on 9.0",
       Tile::cuda(productGrid(a16, b16, 128, 64), product(a16, b16, 128, 64, 32, 3), 90, true),
       "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", true, false, true},
      {"a product of one warp on 9.0 (mma.sync)",
       Tile::cuda(productGrid(c, d, 32, 32), product(c, d, 32, 32, 32, 2, DType::BF16), 90), bf16, false, false, true},
      // The other programs of the CPU tests (tests/tile/test_cpu.cpp).
      {"every unary and binary operation", Tile::cuda(tileprog::everyOperationGrid(x37), tileprog::everyOperation(x37, x37))},
      {"broadcasting rows and columns", Tile::cuda({1}, tileprog::broadcasting(x, row, col))},
      {"reductions along each axis", Tile::cuda({1}, tileprog::reductions(x16))},
      {"masks: a fill outside the tensor", Tile::cuda({2, 1}, tileprog::masks(x53))},
      {"a write into a view", Tile::cuda({1}, tileprog::fillView(view))},
      {"the product of a transposed view in 16 x 8 blocks, k blocks of 5",
       Tile::cuda(productGrid(at, bt, 16, 8), product(at, bt, 16, 8, 5))},
      {"an empty grid", Tile::cuda({0}, tileprog::emptyGrid())},
  };
}

// The PTX of one kernel: from its .entry to the next.
std::string entryOf(const std::string& ptx, const std::string& name) {
  const size_t at = ptx.find(".entry " + name + "(");
  if (at == std::string::npos) return "";
  const size_t end = ptx.find(".entry ", at + 1);
  return ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

TEST(TileCuda, LaunchShapes) {
  const auto k = programs();
  EXPECT_EQ(k[0].kernel.threads, 32);
  EXPECT_EQ(k[0].kernel.blocks, 1);
  EXPECT_EQ(k[0].kernel.sharedBytes, 16);
  EXPECT_EQ(k[1].kernel.threads, 256);
  EXPECT_EQ(k[1].kernel.blocks, 56);
  EXPECT_EQ(k[1].kernel.sharedBytes, (128 * 32 + 32 * 128) * 4);
  for (const auto& p : k) {
    EXPECT_NE(p.kernel.source.find("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(p.kernel.threads) +
                                   ") " + p.kernel.name),
              std::string::npos)
        << p.what;
  }
  EXPECT_NE(k[1].kernel.source.find("__syncthreads();"), std::string::npos);
  EXPECT_NE(k[2].kernel.source.find("u16* __restrict__ t1"), std::string::npos);
  // The bf16 product: swizzled operands (128 x 32 + 32 x 128 halves, no padding) for the tensor
  // cores; the accumulator stays in the fragments' registers and is stored from them.
  EXPECT_EQ(k[4].kernel.sharedBytes, (128 * 32 + 32 * 128) * 2);
  // Three stages of those, and nothing else.
  EXPECT_EQ(k[5].kernel.sharedBytes, 3 * (128 * 32 + 32 * 128) * 2);
  EXPECT_NE(k[5].kernel.source.find("3-stage cp.async pipeline"), std::string::npos);
}

TEST(TileCuda, CompilesForSm80AndSm90a) {
  GIZML_SKIP_WITHOUT_NVRTC();
  const auto k = programs();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const bool hopper = std::string(arch) == "sm_90a";
    std::string all;
    for (const auto& p : k)
      if (hopper || !p.hopper) all += p.kernel.source;
    gpu::Compiled c;
    // Machine code from ptxas when the toolkit has it, else from NVRTC (which runs the same
    // assembler inside: doing both only doubles the time).
    const bool ptxas = test::havePtxas();
    try {
      c = gpu::compileCuda(all, arch, !ptxas);
    } catch (const Error& e) {
      ADD_FAILURE() << arch << ": " << e.what();
      continue;
    }
    if (ptxas) test::assemblePtx(c.ptx, arch, "the tile kernels");
    else EXPECT_FALSE(c.cubin.empty()) << arch;
    for (const auto& p : k) {
      if (p.hopper && !hopper) continue;
      const std::string entry = entryOf(c.ptx, p.kernel.name);
      ASSERT_FALSE(entry.empty()) << arch << ": no entry " << p.kernel.name << " for " << p.what;
      if (p.mma && std::string(p.mma).starts_with("wgmma")) {
        // The products waited for before their results are read; operands stored by threads (not
        // by TMA, which writes through the async proxy itself) fenced for wgmma's async reads.
        for (const char* needed : {p.mma, "wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned",
                                   "wgmma.wait_group.sync.aligned 0"})
          EXPECT_NE(entry.find(needed), std::string::npos) << arch << ": " << p.what << " has no " << needed;
        EXPECT_EQ(entry.find("fence.proxy.async.shared::cta") != std::string::npos, !p.tma) << arch << ": " << p.what;
        EXPECT_EQ(entry.find("mma.sync"), std::string::npos) << arch << ": " << p.what;
      } else if (p.mma) {
        EXPECT_NE(entry.find(p.mma), std::string::npos) << arch << ": " << p.what << " has no " << p.mma;
        EXPECT_NE(entry.find("ldmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos) << arch << ": " << p.what;
        EXPECT_NE(entry.find("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16"), std::string::npos) << arch << ": " << p.what;
      } else {
        EXPECT_EQ(entry.find("mma.sync"), std::string::npos) << arch << ": " << p.what;
      }
      EXPECT_EQ(entry.find("cp.async.wait_group") != std::string::npos, p.pipeline && !p.tma) << arch << ": " << p.what;
      EXPECT_EQ(p.kernel.tensorMaps.size(), p.tma ? 2u : 0u) << p.what;
      for (const char* tma : {"cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "mbarrier.arrive.expect_tx",
                              "fence.proxy.tensormap::generic.acquire"})
        EXPECT_EQ(entry.find(tma) != std::string::npos, p.tma) << arch << ": " << p.what << ": " << tma;
      if (p.what == k[1].what || p.what == k[4].what) {
        // Aligned rows move as vectors: the f32 product's 4-wide loads, both products' stores
        // (4-wide from the blocked layout, column pairs from the mma fragments).
        if (p.what == k[1].what) {
          EXPECT_TRUE(entry.find("ld.global.nc.v4") != std::string::npos || entry.find("ld.global.v4") != std::string::npos)
              << arch << ": " << p.what;
        }
        EXPECT_NE(entry.find("st.global.v"), std::string::npos) << arch << ": " << p.what;
      }
      EXPECT_EQ(entry.find("cp.async.cg.shared.global") != std::string::npos, p.copies) << arch << ": " << p.what;
    }
  }
}
