// Tile::ir prints the program as the compiler sees it: golden text for the guide's kernels.
#include <gizml/tile.h>
#include <gtest/gtest.h>

using namespace gizml;

namespace {

// The guide's product in 128 x 128 blocks with k blocks of 32, its values traced in a fixed order
// (the golden texts number them; a call's arguments are evaluated in no set order).
Tile::Body product(const T::Tensor& a, const T::Tensor& b, int stages) {
  return [=](Tile::Program& p) {
    p.stages(stages);
    const auto i = p.id(0), j = p.id(1);
    const auto A = p.read(a, {128, 32}), B = p.read(b, {32, 128});
    const auto zero = p.index(0);
    const auto count = A.blocks(1);
    const auto acc = p.fold(zero, count, p.zeros({128, 128}),
                            [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
    p.write(T::zeros({a.size(0), b.size(1)}), {128, 128}).put(acc, {i, j});
  };
}

}  // namespace

TEST(TileIr, GuideFirstExample) {
  const auto x = T::tensor({4, 4}, {-2, -1, 0, 1, 2, 3, 4, 5, -3, -4, 6, 7, 8, -9, 1, 0.5});
  const auto w = T::tensor({1, 4}, {1, 2, 3, 4});
  const std::string text = Tile::ir({1}, [&](Tile::Program& p) {
    const auto z = p.index(0);
    const auto a = p.read(x, {4, 4}).at({z, z});
    const auto s = p.read(w, {1, 4}).at({z, z});
    const auto t = a * s;
    p.write(T::zeros({4, 4}), {4, 4}).put((t + 1.0).relu(), {z, z});
  });
  EXPECT_EQ(text,
      "tile program: grid [1], 1 warp (32 threads), 1 stage, shared memory 16 bytes\n"
      "  t0 = read f32[4, 4] strides [4, 1] in blocks [4, 4], fill 0\n"
      "  t1 = read f32[1, 4] strides [4, 1] in blocks [1, 4], fill 0\n"
      "  t2 = write f32[4, 4] strides [4, 1] in blocks [4, 4]\n"
      "  %0 = index 0          : index      uniform, 0..0\n"
      "  %1 = load t0[%0, %0]  : f32[4, 4]  threads 4x1 of 32, each 1x4\n"
      "  %2 = load t1[%0, %0]  : f32[1, 4]  threads 1x1 of 32, each 1x4\n"
      "  %3 = mul %1, %2       : f32[4, 4]  threads 4x1 of 32, each 1x4; %2 broadcast through shared memory\n"
      "  %4 = full 1           : f32[4, 4]  threads 4x1 of 32, each 1x4\n"
      "  %5 = add %3, %4       : f32[4, 4]  threads 4x1 of 32, each 1x4\n"
      "  %6 = relu %5          : f32[4, 4]  threads 4x1 of 32, each 1x4\n"
      "  store t2[%0, %0], %6\n"
      );
}

TEST(TileIr, ProductFoldsTheDotIntoItsAccumulator) {
  const auto a = T::zeros({1000, 333}), b = T::zeros({333, 777});
  const std::string text = Tile::ir({8, 7}, product(a, b, 2));
  EXPECT_EQ(text,
      "tile program: grid [8, 7], 8 warps (256 threads), 2 stages, shared memory 32768 bytes\n"
      "  t0 = read f32[1000, 333] strides [333, 1] in blocks [128, 32], fill 0\n"
      "  t1 = read f32[333, 777] strides [777, 1] in blocks [32, 128], fill 0\n"
      "  t2 = write f32[1000, 777] strides [777, 1] in blocks [128, 128]\n"
      "  %0 = id 0                                : index          uniform, 0..7\n"
      "  %1 = id 1                                : index          uniform, 0..6\n"
      "  %2 = index 0                             : index          uniform, 0..0\n"
      "  %3 = index 11                            : index          uniform, 11..11\n"
      "  %4 = full 0                              : f32[128, 128]  threads 8x32 of 256, each 16x4\n"
      "  fold %5 from %2 count %3, acc %6 = %4 {  : f32[128, 128]  threads 8x32 of 256, each 16x4\n"
      "    %7 = load t0[%0, %5]                   : f32[128, 32]   threads 32x8 of 256, each 4x4\n"
      "    %8 = load t1[%5, %1]                   : f32[32, 128]   threads 8x32 of 256, each 4x4\n"
      "    %10 = dot %7, %8, acc %6               : f32[128, 128]  threads 8x32 of 256, each 16x4; operands in shared memory [128, 32] + [32, 128]\n"
      "  } %11 = yield %10                        : f32[128, 128]  threads 8x32 of 256, each 16x4\n"
      "  store t2[%0, %1], %11\n"
      );
}

TEST(TileIr, TensorCoreProductsShowTheGeneratorsLayouts) {
  // The BF16 product with 3 stages: mma.sync fragments on 8.0, wgmma's on 9.0; the operands go
  // through the pipeline's swizzled shared memory (3 x (8 + 8) KiB) and hold no registers. The
  // zeros keep the blocked layout (a constant, refilled into the fragments at the fold).
  const auto a = T::zeros({1000, 336}, DType::BF16), b = T::zeros({336, 784}, DType::BF16);
  const auto body = product(a, b, 3);
  const std::string head =
      "tile program: grid [8, 7], 8 warps (256 threads), 3 stages, shared memory 49152 bytes\n"
      "  t0 = read bf16[1000, 336] strides [336, 1] in blocks [128, 32], fill 0\n"
      "  t1 = read bf16[336, 784] strides [784, 1] in blocks [32, 128], fill 0\n"
      "  t2 = write f32[1000, 784] strides [784, 1] in blocks [128, 128]\n";
  EXPECT_EQ(Tile::ir({8, 7}, body, 80),
      head +
      "  %0 = id 0                                : index          uniform, 0..7\n"
      "  %1 = id 1                                : index          uniform, 0..6\n"
      "  %2 = index 0                             : index          uniform, 0..0\n"
      "  %3 = index 11                            : index          uniform, 11..11\n"
      "  %4 = full 0                              : f32[128, 128]  threads 8x32 of 256, each 16x4\n"
      "  fold %5 from %2 count %3, acc %6 = %4 {  : f32[128, 128]  mma.sync fragments: warps 2x4, each 4x4 of m16n8 (64 registers a thread)\n"
      "    %7 = load t0[%0, %5]                   : bf16[128, 32]  no registers: the pipeline's cp.async copies into shared memory\n"
      "    %8 = load t1[%5, %1]                   : bf16[32, 128]  no registers: the pipeline's cp.async copies into shared memory\n"
      "    %10 = dot %7, %8, acc %6               : f32[128, 128]  mma.sync fragments: warps 2x4, each 4x4 of m16n8 (64 registers a thread); operands through 3 stages of shared memory [128, 32] (64-byte swizzle) + [32, 128] (128-byte swizzle) 16-bit; ldmatrix\n"
      "  } %11 = yield %10                        : f32[128, 128]  mma.sync fragments: warps 2x4, each 4x4 of m16n8 (64 registers a thread)\n"
      "  store t2[%0, %1], %11\n");
  const std::string hopper = Tile::ir({8, 7}, body, 90);
  EXPECT_EQ(hopper.substr(0, head.size()), head);
  EXPECT_NE(hopper.find("%10 = dot %7, %8, acc %6               : f32[128, 128]  wgmma fragments: 2 warpgroups, each 1 x "
                        "m64n128 (64 registers a thread); operands through 3 stages of shared memory [128, 32] (64-byte "
                        "swizzle) + [32, 128] (128-byte swizzle) 16-bit; wgmma reads them through descriptors\n"),
            std::string::npos)
      << hopper;
}
