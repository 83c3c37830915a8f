#include "gpu/tensor_map.h"

#include <cstdio>

#include "gpu/device.h"

namespace gizhw::gpu {

bool hasTensorMaps(const Gpu& gpu) {
  const Device& device = *gpu.device();
  return device.properties.vendor == Vendor::Nvidia && device.properties.major >= 9 && device.api.tensorMapEncodeTiled;
}

std::array<unsigned char, 128> tensorMap2d(const Gpu& gpu, uint64_t address, uint64_t rows, uint64_t cols,
                                           uint64_t rowStrideBytes, uint32_t boxRows, uint32_t boxCols,
                                           int swizzleBytes) {
  const Device& device = *gpu.device();
  const Properties& p = device.properties;
  auto bad = [&](const std::string& why) { return Error("tensorMap2d on " + gpu.describe() + ": " + why); };
  if (p.vendor != Vendor::Nvidia || p.major < 9)
    throw bad("TMA needs an NVIDIA GPU of compute capability 9.0 or more, not " + std::to_string(p.major) + "." +
              std::to_string(p.minor));
  if (!device.api.tensorMapEncodeTiled) throw bad("the driver has no cuTensorMapEncodeTiled (CUDA 12 or later)");
  // What cuTensorMapEncodeTiled's documentation requires of these arguments.
  constexpr uint64_t kElement = 2;
  if (address % 16) {
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(address));
    throw bad(std::string("address ") + hex + " is not 16-byte aligned");
  }
  if (rows == 0 || rows > (1ull << 32)) throw bad("rows " + std::to_string(rows) + " is outside [1, 2^32]");
  if (cols == 0 || cols > (1ull << 32)) throw bad("cols " + std::to_string(cols) + " is outside [1, 2^32]");
  if (rowStrideBytes % 16 || rowStrideBytes >= (1ull << 40))
    throw bad("rowStrideBytes " + std::to_string(rowStrideBytes) + " is not a multiple of 16 below 2^40");
  if (boxRows == 0 || boxRows > 256) throw bad("boxRows " + std::to_string(boxRows) + " is outside [1, 256]");
  if (boxCols == 0 || boxCols > 256) throw bad("boxCols " + std::to_string(boxCols) + " is outside [1, 256]");
  if (boxCols * kElement % 16)
    throw bad("boxCols " + std::to_string(boxCols) + ": a box row of " + std::to_string(boxCols * kElement) +
              " bytes is not a multiple of 16");
  // CUtensorMapSwizzle: NONE, 32B, 64B, 128B.
  int swizzle;
  switch (swizzleBytes) {
    case 0: swizzle = 0; break;
    case 32: swizzle = 1; break;
    case 64: swizzle = 2; break;
    case 128: swizzle = 3; break;
    default: throw bad("swizzleBytes " + std::to_string(swizzleBytes) + " is not 0, 32, 64 or 128");
  }
  if (swizzle && boxCols * kElement > static_cast<uint64_t>(swizzleBytes))
    throw bad("boxCols " + std::to_string(boxCols) + ": a box row of " + std::to_string(boxCols * kElement) +
              " bytes is wider than the " + std::to_string(swizzleBytes) + "-byte swizzle");
  const uint64_t dims[2] = {cols, rows}, strides[1] = {rowStrideBytes};
  const uint32_t box[2] = {boxCols, boxRows}, elementStrides[2] = {1, 1};
  alignas(64) std::array<unsigned char, 128> map{};
  constexpr int kUint16 = 1, kInterleaveNone = 0, kL2Promotion128 = 2, kOobFillZeros = 0;
  device.activate();
  device.check(device.api.tensorMapEncodeTiled(map.data(), kUint16, 2, reinterpret_cast<void*>(address), dims, strides,
                                               box, elementStrides, kInterleaveNone, swizzle, kL2Promotion128,
                                               kOobFillZeros),
               "cuTensorMapEncodeTiled");
  return map;
}

}  // namespace gizhw::gpu
