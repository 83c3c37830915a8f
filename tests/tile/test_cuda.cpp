// Tile::cuda: the generated CUDA C++ for the tests' programs, compiled to PTX for sm_90a and sm_80
// by nvcc when the toolkit is present (to be switched to the NVRTC loader of gizhw::gpu).
#include <gizml/tile.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace gizml;

namespace {

const char* kNvcc = "/usr/local/cuda/bin/nvcc";

std::vector<Tile::CudaKernel> programs() {
  static const auto x = T::zeros({4, 4}), w = T::zeros({1, 4});
  static const auto a = T::zeros({1000, 333}), b = T::zeros({333, 777});
  static const auto h = T::zeros({37, 29}, DType::BF16), r = T::zeros({2, 12}, DType::F16);
  std::vector<Tile::CudaKernel> out;
  out.push_back(Tile::cuda({1}, [&](Tile::Program& p) {  // the guide's first program
    const auto z = p.index(0);
    const auto t = p.read(x, {4, 4}).at({z, z}) * p.read(w, {1, 4}).at({z, z});
    p.write(T::zeros({4, 4}), {4, 4}).put((t + 1.0).relu(), {z, z});
  }));
  out.push_back(Tile::cuda({8, 7}, [&](Tile::Program& p) {  // the guide's product
    const auto i = p.id(0), j = p.id(1);
    const auto A = p.read(a, {128, 32}), B = p.read(b, {32, 128});
    const auto acc = p.fold(p.index(0), A.blocks(1), p.zeros({128, 128}),
                            [&](Tile::Index k, Tile::Tile acc) { return acc + A.at({i, k}).dot(B.at({k, j})); });
    p.write(T::zeros({1000, 777}), {128, 128}).put(acc, {i, j});
  }));
  out.push_back(Tile::cuda({3, 2}, [&](Tile::Program& p) {  // bf16 softmax rows, masks, where, casts
    const auto i = p.id(0), j = p.id(1);
    const auto t = p.read(h, {16, 16}, -1.0).at({i, j}).cast(DType::F32);
    const auto e = (t - t.max(1)).exp();
    const auto s = Tile::where(t > 0.0, e / e.sum(1), t.sigmoid().min(t.k(0.25)));
    p.write(T::zeros({37, 29}, DType::BF16), {16, 16}).put(s.cast(DType::BF16), {i, j});
    p.write(T::zeros({37, 29}, DType::Bool), {16, 16}).put(t.ge(t.k(0.5)), {i, j});
  }));
  out.push_back(Tile::cuda({3}, [&](Tile::Program& p) {  // a fold whose count depends on p.id
    const auto i = p.id(0);
    const auto X = p.read(r, {2, 4});
    const auto s = p.fold(0, i + 1, p.zeros({2, 1}), [&](Tile::Index k, Tile::Tile acc) { return acc + X.at({0, k}).sum(1); });
    p.write(T::zeros({2, 3}, DType::F16), {2, 1}).put(s.cast(DType::F16), {0, i});
  }));
  return out;
}

}  // namespace

TEST(TileCuda, LaunchShapes) {
  const auto k = programs();
  EXPECT_EQ(k[0].threads, 32);
  EXPECT_EQ(k[0].blocks, 1);
  EXPECT_EQ(k[0].sharedBytes, 16);
  EXPECT_EQ(k[1].threads, 256);
  EXPECT_EQ(k[1].blocks, 56);
  EXPECT_EQ(k[1].sharedBytes, (128 * 32 + 32 * 128) * 4);
  for (const auto& kernel : k) {
    EXPECT_NE(kernel.source.find("extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kernel.threads) + ") " + kernel.name),
              std::string::npos);
  }
  EXPECT_NE(k[1].source.find("__syncthreads();"), std::string::npos);
  EXPECT_NE(k[2].source.find("__nv_bfloat16* __restrict__ t1"), std::string::npos);
}

TEST(TileCuda, CompilesToPtx) {
  if (!std::filesystem::exists(kNvcc)) GTEST_SKIP() << "no CUDA toolkit at " << kNvcc;
  const std::filesystem::path dir = std::filesystem::path(GIZML_BUILD_DIR) / "tile_cuda";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "kernels.cu") << [] {
    std::string all;
    for (const auto& k : programs()) all += k.source;
    return all;
  }();
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const std::string command = std::string(kNvcc) + " -arch=" + arch + " -ptx " + (dir / "kernels.cu").string() +
                                " -o " + (dir / (std::string(arch) + ".ptx")).string() + " 2> " +
                                (dir / "nvcc.log").string();
    EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n"
                                               << std::ifstream(dir / "nvcc.log").rdbuf();
  }
}
