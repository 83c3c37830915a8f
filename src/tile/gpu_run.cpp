// Tile::run on GPU tensors: the program's CUDA kernel (Tile::cuda's), compiled through the GPU's
// kernel cache and launched on its stream with the operands' device addresses. Written host
// tensors are copied to the GPU first; the trace already checked that every read is on it.
#include <gizml/tile.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <optional>
#include <utility>
#include <vector>

#include "gpu/device.h"
#include "gpu/tensor_map.h"
#include "tensor/gpu/tensor_ops.h"
#include "tile/run.h"

namespace gizml::tile {

namespace {

// The compute capability the generator targets and whether it may use TMA: the GPU's, unless
// GIZML_TILE_ARCH names a lower one (80: mma.sync instead of wgmma on Hopper) or GIZML_TILE_TMA=0,
// so that a path can be ruled in or out on a real GPU (scripts/device-check.sh runs all three).
std::pair<int, bool> generatorTarget(int gpuArch) {
  int arch = gpuArch;
  if (const char* forced = std::getenv("GIZML_TILE_ARCH"); forced && *forced) {
    const int asked = std::atoi(forced);
    check(asked >= 10 && asked <= gpuArch, "GIZML_TILE_ARCH=" + std::string(forced) +
                                               ": give a compute capability as major * 10 + minor, at most the GPU's " +
                                               std::to_string(gpuArch));
    arch = asked;
  }
  const char* tma = std::getenv("GIZML_TILE_TMA");
  return {arch, !(tma && std::string(tma) == "0")};
}

}  // namespace

void runOnGpu(tir::Kernel& k) {
  gpuops::DevicePtr device;
  for (const tir::Operand& o : k.operands)
    if (o.tensor.onGpu()) device = o.tensor.storage()->gpu();
  check(device != nullptr, "Tile::run: no operand on a GPU");
  device->checkOpen();
  const gizhw::gpu::Gpu gpu(device);
  check(gpu.properties().vendor == gizhw::gpu::Vendor::Nvidia,
        "Tile::run: tile programs run on NVIDIA GPUs (the generated kernel is CUDA), not on " + gpu.describe());

  // Written host tensors go to the GPU (one copy per distinct view: two writes of one view land
  // in one tensor).
  std::vector<std::pair<Tensor, Tensor>> copies;
  for (tir::Operand& o : k.operands) {
    if (o.tensor.onGpu()) continue;
    check(o.write, "Tile::run: a host tensor read by a GPU program");  // the trace checks this first
    std::optional<Tensor> copy;
    for (const auto& [host, onGpu] : copies)
      if (host.storage() == o.tensor.storage() && host.offset() == o.tensor.offset() &&
          host.shape() == o.tensor.shape() && host.strides() == o.tensor.strides())
        copy = onGpu;
    if (!copy) {
      copy = o.tensor.on(gpu);
      copies.emplace_back(o.tensor, *copy);
    }
    o.tensor = *copy;
  }

  // Hopper's TMA needs 16-byte aligned tensor addresses; the generator checks the strides.
  const auto [arch, tmaAllowed] = generatorTarget(gpu.properties().major * 10 + gpu.properties().minor);
  bool aligned = true;
  for (const tir::Operand& o : k.operands) aligned = aligned && gpuops::address(o.tensor) % 16 == 0;
  const CudaKernel kernel = generateCuda(k, arch, tmaAllowed && arch >= 90 && aligned && gizhw::gpu::hasTensorMaps(gpu));
  if (kernel.blocks == 0) return;
  check(kernel.blocks <= INT_MAX, "Tile::run: a grid of " + std::to_string(kernel.blocks) +
                                      " points is more than a GPU launch takes");
  // F16/BF16 products run on the tensor cores with no fma fallback in the generated source: a
  // GPU below 8.0 cannot compile them (found by the GPU emulator at GIZML_GPU_EMULATOR_ARCH=75).
  // The helpers' guard macro marks a source that uses them (cudagen::mmaHelpers).
  const bool tensorCores = kernel.source.find("GIZML_TILE_MMA_LIN") != std::string::npos;
  check(!tensorCores || gpu.properties().major >= 8,
        "Tile::run: the program's F16/BF16 products use tensor cores (mma.sync, compute capability 8.0 or later); " +
            gpu.describe() + " is " + std::to_string(gpu.properties().major) + "." +
            std::to_string(gpu.properties().minor));
  const int optin = gpu.properties().sharedPerBlockOptin;
  check(optin <= 0 || kernel.sharedBytes <= optin,
        "Tile::run: the program needs " + std::to_string(kernel.sharedBytes) + " bytes of shared memory, " +
            gpu.describe() + " gives a block at most " + std::to_string(optin) + " (use smaller blocks)");

  std::vector<uint64_t> addresses;
  addresses.reserve(k.operands.size() + kernel.tensorMaps.size());
  for (const tir::Operand& o : k.operands) addresses.push_back(gpuops::address(o.tensor));
  // The tensor maps, 128 bytes each, in device memory (the kernel takes pointers to them); the
  // buffer goes back to the allocator ordered after the launch.
  gizhw::gpu::Buffer maps;
  if (!kernel.tensorMaps.empty()) {
    std::vector<unsigned char> bytes;
    for (const CudaKernel::TensorMap& m : kernel.tensorMaps) {
      const Tensor& t = k.operands[static_cast<size_t>(m.operand)].tensor;
      const auto map = gizhw::gpu::tensorMap2d(gpu, gpuops::address(t), static_cast<uint64_t>(t.shape()[0]),
                                               static_cast<uint64_t>(t.shape()[1]),
                                               static_cast<uint64_t>(t.strides()[0]) * dtypeSize(t.dtype()),
                                               static_cast<uint32_t>(m.boxRows), static_cast<uint32_t>(m.boxCols),
                                               m.swizzleBytes);
      bytes.insert(bytes.end(), map.begin(), map.end());
    }
    maps = gpu.allocate(bytes.size());
    gpu.copyToDevice(maps.address(), bytes.data(), bytes.size(), gpu.stream());
    for (size_t j = 0; j < kernel.tensorMaps.size(); ++j) addresses.push_back(maps.address() + 128 * j);
  }
  std::vector<void*> args;
  for (uint64_t& a : addresses) args.push_back(&a);
  gpu.kernel(kernel.source, kernel.name)
      .launch({static_cast<unsigned>(kernel.blocks)}, {static_cast<unsigned>(kernel.threads)},
              static_cast<size_t>(kernel.sharedBytes), gpu.stream(), args.data());
}

}  // namespace gizml::tile
