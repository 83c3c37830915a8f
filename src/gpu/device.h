#pragma once
// The state behind a gizhw::gpu::Gpu: the driver table, the context, the default stream, the
// caching allocator and the loaded kernels.
#include <gizhw/gpu.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "gpu/driver_api.h"

namespace gizhw::gpu {

class Device;

/// Device memory by size class: a freed block goes to its class's free list and serves the next
/// allocation of that class on the same stream (so reuse is ordered after the work that used
/// it). On out-of-memory the free lists are returned to the driver and the allocation retried.
class Allocator {
 public:
  explicit Allocator(Device& device) : device_(device) {}
  /// The bytes a request is rounded up to: 512-byte steps below 1 MiB, then 8 steps per power
  /// of two (at most 12.5% waste).
  static size_t sizeClass(size_t bytes);
  DevicePtr allocate(size_t classBytes);
  void release(DevicePtr address, size_t classBytes);
  /// Frees the cached blocks (waiting for the stream first).
  void flush();
  /// Frees everything, in use or cached (closing the device).
  void freeAll();
  AllocatorStats stats() const;

 private:
  void flushLocked();
  Device& device_;
  mutable std::mutex mutex_;
  std::map<size_t, std::vector<DevicePtr>> free_;
  std::unordered_map<DevicePtr, size_t> inUse_;
  AllocatorStats stats_;
};

class Device {
 public:
  Device(const DriverApi& api, int ordinal);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  /// Makes the context current on this thread; an Error after close().
  void activate() const;
  void checkOpen() const;
  bool closed() const { return closed_.load(std::memory_order_acquire); }
  void close();
  std::string describe() const;
  void check(int result, const char* call) const { checkDriver(api, result, call); }

  /// A kernel from source, compiled (or read from the disk cache) and loaded once.
  Handle function(const std::string& source, const std::string& name);
  /// The same for a source that lives as long as the process, found again by its address.
  Handle staticFunction(const std::string& source, const std::string& name);
  /// The sizes of a loaded kernel's parameters; none when the driver cannot say
  /// (cuFuncGetParamInfo missing).
  std::optional<std::vector<size_t>> parameterSizes(Handle function);

  const DriverApi& api;
  Properties properties;
  int handle = 0;
  Handle context = nullptr;
  Stream stream;  // the default stream (its device_ is left empty: no cycle)
  Allocator allocator{*this};
  std::atomic<uint64_t> launches{0}, copiesToDevice{0}, copiesToHost{0}, copiesOnDevice{0};  // Gpu::activity
  std::atomic<uint64_t> bytesToDevice{0}, bytesToHost{0}, pinnedBytesToDevice{0};
  std::atomic<uint64_t> pinnedBytes{0};  // Gpu::allocatorStats
  std::atomic<uint64_t> graphLaunches{0};
  // Held while a StepGraph records on this device, by `recorder`: another thread's work waits
  // (step_graph.cpp).
  std::mutex recordingMutex;
  std::atomic<std::thread::id> recorder{};

 private:
  std::atomic<bool> closed_{false};
  std::mutex mutex_;
  std::unordered_map<std::string, Handle> functions_;
  std::unordered_map<Handle, std::optional<std::vector<size_t>>> parameterSizes_;
  std::map<std::pair<const std::string*, std::string>, Handle> staticFunctions_;
  std::vector<Handle> modules_;
};

/// A 128-bit FNV-1a-style hash of text, as 32 hex digits (kernel cache keys).
std::string hashText(const std::string& text);
uint64_t checksum64(const void* data, size_t bytes);

/// The disk cache of compiled kernels (kernel_cache.cpp): none when absent or damaged.
bool cacheLoad(const std::string& key, std::vector<char>& image);
void cacheStore(const std::string& key, const std::vector<char>& image);

/// Compiles for a device: cubin for NVIDIA (arch), a code object for AMD (hipRTC).
std::vector<char> compileForDevice(const std::string& source, const Properties& properties, std::string& compilerVersion);
/// The compiler's version text ("nvrtc 13.0"), loading it when needed; an Error when absent.
std::string compilerVersion(Vendor vendor);

}  // namespace gizhw::gpu
