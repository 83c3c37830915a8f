// The caching allocator: blocks by size class, reused on the device's stream; out-of-memory
// empties the cache and retries once before a clear Error.
#include <bit>

#include "gpu/device.h"
#include "gpu/step_graph.h"

namespace gizhw::gpu {

size_t Allocator::sizeClass(size_t bytes) {
  constexpr size_t kSmall = size_t{1} << 20;
  if (bytes <= kSmall) return std::max<size_t>(512, (bytes + 511) / 512 * 512);
  const int log = 63 - std::countl_zero(static_cast<uint64_t>(bytes));
  const size_t step = size_t{1} << (log - 3);
  return (bytes + step - 1) / step * step;
}

DevicePtr Allocator::allocate(size_t classBytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = free_.find(classBytes); it != free_.end() && !it->second.empty()) {
    const DevicePtr p = it->second.back();
    it->second.pop_back();
    stats_.bytesCached -= classBytes;
    stats_.bytesInUse += classBytes;
    ++stats_.reuses;
    inUse_[p] = classBytes;
    return p;
  }
  const DriverApi& api = device_.api;
  DevicePtr p = 0;
  int r = api.memAlloc(&p, classBytes);
  if (r == api.errorOutOfMemory && stats_.bytesCached > 0) {
    flushLocked();
    ++stats_.cacheFlushes;
    r = api.memAlloc(&p, classBytes);
  }
  if (r != 0) {
    size_t freeBytes = 0, total = 0;
    if (api.memGetInfo) api.memGetInfo(&freeBytes, &total);
    throw Error("GPU " + device_.describe() + " is out of memory: allocating " + std::to_string(classBytes) +
                " bytes failed (" + driverErrorText(api, r) + "); " + std::to_string(stats_.bytesInUse) +
                " bytes are held by live tensors and buffers, " + std::to_string(freeBytes) + " of " +
                std::to_string(total) + " are free");
  }
  ++stats_.driverAllocations;
  stats_.bytesInUse += classBytes;
  inUse_[p] = classBytes;
  return p;
}

void Allocator::release(DevicePtr address, size_t classBytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (inUse_.erase(address) == 0) return;  // freed by freeAll()
  stats_.bytesInUse -= classBytes;
  stats_.bytesCached += classBytes;
  free_[classBytes].push_back(address);
}

void Allocator::flushLocked() {
  // Work still queued may use a block that went back to the cache: wait for it first (a step
  // being recorded cannot hold the wait: it is not recorded, StepGraph).
  if (StepSession* step = stepSession(device_, device_.stream.handle())) step->readsBack("waits for the GPU");
  device_.api.streamSynchronize(device_.stream.handle());
  for (auto& [size, blocks] : free_)
    for (DevicePtr p : blocks) device_.api.memFree(p);
  free_.clear();
  stats_.bytesCached = 0;
}

void Allocator::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  flushLocked();
}

void Allocator::freeAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  flushLocked();
  for (auto& [p, size] : inUse_) device_.api.memFree(p);
  inUse_.clear();
  stats_.bytesInUse = 0;
}

AllocatorStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace gizhw::gpu
