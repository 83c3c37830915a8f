#pragma once
// gizhw::gpu: GPUs found at run time. The driver (libcuda.so.1 for NVIDIA, libamdhip64.so for
// AMD) and the run-time compiler (NVRTC / hipRTC) are loaded with dlopen on first use; nothing of
// the GPU stack is linked, so the same binary runs on machines without a GPU (open() then gives
// none). Spec: Step 2; map: docs/architecture.md ("GPU").
#include <gizml/error.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gizhw::gpu {

using gizml::Error;

enum class Vendor : uint8_t { Nvidia, Amd };

/// What the driver says about a device.
struct Properties {
  Vendor vendor = Vendor::Nvidia;
  int ordinal = 0;
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability (AMD: the gfx major/minor the runtime reports)
  int multiprocessors = 0;
  uint64_t memoryBytes = 0;
  uint64_t l2Bytes = 0;
  int warpSize = 32;
  int sharedPerBlockOptin = 0;  // bytes of shared memory one block may use after opting in
  int driverVersion = 0;        // 13000 for CUDA 13.0
  /// The compiler target: "sm_90a" on compute capability 9.0, else "sm_XY"; empty on AMD (hipRTC
  /// compiles for the current device).
  std::string arch;
  /// The host GPU emulator (GIZML_GPU_EMULATOR=1): kernels run on the CPU, thousands of times
  /// slower than a GPU, so tests may take smaller shapes there.
  bool emulated = false;
};

class Device;  // the shared state behind a Gpu (src/gpu/device.h)

/// A queue of work on one GPU; work on one stream runs in order.
class Stream {
 public:
  Stream() = default;
  void synchronize() const;
  void* handle() const { return handle_.get(); }

 private:
  friend class Gpu;
  friend class Device;
  std::shared_ptr<Device> device_;  // empty for the device's own stream (no cycle)
  Device* raw_ = nullptr;
  std::shared_ptr<void> handle_;
};

/// A marker in a stream: record it, wait for it, time between two of them.
class Event {
 public:
  Event() = default;
  void record(const Stream& stream) const;
  void synchronize() const;
  /// Milliseconds from `start` (recorded earlier) to this event; both must have completed.
  float millisecondsSince(const Event& start) const;

 private:
  friend class Gpu;
  std::shared_ptr<Device> device_;
  std::shared_ptr<void> handle_;
};

/// Page-locked host memory, for fast asynchronous copies.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  void* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }

 private:
  friend class Gpu;
  std::shared_ptr<void> data_;
  size_t bytes_ = 0;
};

/// A block of device memory from the GPU's caching allocator; it goes back to the cache (ordered
/// after the work already queued on the GPU's stream) when the last copy of it is dropped.
class Buffer {
 public:
  Buffer() = default;
  uint64_t address() const;
  size_t bytes() const;
  explicit operator bool() const { return block_ != nullptr; }

 private:
  friend class Gpu;
  struct Block;
  std::shared_ptr<Block> block_;
};

/// Three dimensions of a launch grid or block.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// A compiled kernel, ready to launch.
class Kernel {
 public:
  Kernel() = default;
  /// Launches with `args` pointing to each parameter's value, in order.
  void launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, std::initializer_list<void*> args) const;
  void launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, void** args) const;
  /// The same, with each argument's bytes: a step being recorded (StepGraph) keeps the launch with
  /// them where the driver cannot say a kernel's parameter sizes (HIP has no cuFuncGetParamInfo).
  void launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, void** args,
              std::span<const size_t> argSizes) const;
  const std::string& name() const { return name_; }

 private:
  friend class Gpu;
  Kernel(std::shared_ptr<Device> device, void* function, std::string name)
      : device_(std::move(device)), function_(function), name_(std::move(name)) {}
  std::shared_ptr<Device> device_;
  void* function_ = nullptr;
  std::string name_;
};

/// Work recorded once from a stream (Gpu::capture) and replayed with one call: a CUDA graph
/// (HIP's on AMD). It keeps the kernels' arguments as they were at the capture, so the buffers
/// its work reads and writes must keep their addresses while it lives; their contents are read
/// when it runs, so values written into them between launches are what a replay sees.
class Graph {
 public:
  Graph() = default;
  /// Queues the recorded work on `stream`, in the order it was recorded.
  void launch(const Stream& stream) const;
  explicit operator bool() const { return exec_ != nullptr; }

 private:
  friend class Gpu;
  std::shared_ptr<Device> device_;
  std::shared_ptr<void> exec_;
};

/// Allocator counters (bytes and calls), for tests and benchmarks.
struct AllocatorStats {
  uint64_t bytesInUse = 0;     // handed out and not yet returned
  uint64_t bytesCached = 0;    // returned, kept for reuse
  uint64_t driverAllocations = 0;
  uint64_t reuses = 0;         // allocations served from the cache
  uint64_t cacheFlushes = 0;   // out-of-memory retries that emptied the cache
  uint64_t pinnedBytes = 0;    // host memory of allocatePinned's buffers alive now
};

/// What a device was asked to do since it opened: kernel launches and copies (and the bytes
/// between host and device), for tests that count a step's work.
struct Activity {
  uint64_t launches = 0, copiesToDevice = 0, copiesToHost = 0, copiesOnDevice = 0;
  uint64_t bytesToDevice = 0, bytesToHost = 0;
  uint64_t pinnedBytesToDevice = 0;  // of bytesToDevice, those copied from a PinnedBuffer
  uint64_t graphLaunches = 0;        // recordings launched (a replayed step's kernels count here, once)
};

/// A handle to one open GPU; copies share it. Tensors placed on it keep it alive, but after
/// close() every use of them is an Error.
class Gpu {
 public:
  explicit Gpu(std::shared_ptr<Device> device);

  const Properties& properties() const;
  /// "cuda:0 (NVIDIA H200)": how errors name the device.
  std::string describe() const;

  /// The stream that tensor operations on this GPU use.
  const Stream& stream() const;
  Stream newStream() const;
  Event newEvent() const;
  void synchronize() const;

  /// Device memory from the caching allocator (ordered on stream()). Out of memory: the cache is
  /// freed and the allocation retried once, then an Error says how much was asked and is in use.
  Buffer allocate(size_t bytes) const;
  PinnedBuffer allocatePinned(size_t bytes) const;
  AllocatorStats allocatorStats() const;
  Activity activity() const;
  /// Bytes that allocations can still get: the driver's free memory and the allocator's cache.
  uint64_t freeBytes() const;
  /// Frees the cached blocks (after the queued work completes).
  void releaseCache() const;

  // Asynchronous copies on `stream` (host memory should be pinned for them to overlap).
  void copyToDevice(uint64_t dst, const void* src, size_t bytes, const Stream& stream) const;
  /// From [offset, offset + bytes) of a pinned buffer (an Error outside it): counted in
  /// Activity::pinnedBytesToDevice.
  void copyToDevice(uint64_t dst, const PinnedBuffer& src, size_t offset, size_t bytes, const Stream& stream) const;
  void copyToHost(void* dst, uint64_t src, size_t bytes, const Stream& stream) const;
  void copyOnDevice(uint64_t dst, uint64_t src, size_t bytes, const Stream& stream) const;
  void fill(uint64_t dst, uint8_t value, size_t bytes, const Stream& stream) const;

  /// Compiles CUDA C++ (NVRTC, or hipRTC on AMD) for this device, through the on-disk cache, and
  /// gives the kernel `name` (an extern "C" __global__ function of the source).
  Kernel kernel(const std::string& source, const std::string& name) const;
  /// kernel() of a source that lives and stays the same as long as the process (a function's
  /// static string): after its first call on a device it is found by the source's address and
  /// the name alone, where kernel() reads the whole source at each call to find it (tens of
  /// microseconds for the language models' 30 KB, at every launch).
  Kernel staticKernel(const std::string& source, const std::string& name) const;

  /// Whether the driver records graphs (CUDA 11.4+, HIP, the emulator); without, capture() is an
  /// Error and callers run their work directly.
  bool canCapture() const;
  /// Runs `work`, recording what it queues on `stream` instead of running it, and returns the
  /// recording. A call that cannot be recorded (synchronizing the stream, memory from the
  /// driver, a copy with host memory that is not pinned) is an Error inside `work`, as on CUDA;
  /// any exception from `work` ends the capture, keeps nothing and propagates.
  Graph capture(const Stream& stream, const std::function<void()>& work) const;

  /// Waits for the queued work, frees the device's memory and unloads its kernels; tensors on it
  /// then give an Error when used. Closing twice does nothing.
  void close();
  bool closed() const;

  const std::shared_ptr<Device>& device() const { return device_; }
  bool operator==(const Gpu& o) const { return device_ == o.device_; }

 private:
  Buffer allocateDirectly(size_t bytes) const;
  std::shared_ptr<Device> device_;
};

/// A step of GPU work that a program runs again and again with new inputs (a language model's
/// decode step of one batch size), recorded once as a Graph and replayed. `run` takes the step as
/// host code that queues its work on the GPU's stream(). The first run queues it as it is; the
/// second records it and launches the recording; later runs go through the host code again but
/// queue nothing: each launch, copy, fill and allocation is checked against the recording's (the
/// same kernel, grid and argument bytes, the same addresses, which the recording's allocations
/// keep for as long as it lives), the bytes copied from host memory are written where the
/// recording reads them, and the recording is launched once. Where a run's work differs from the
/// recording (another grid or argument, a buffer that moved), what matched is queued as it was,
/// the rest of the run goes on directly, and the next run records anew. A step that reads device
/// memory back or waits for the GPU is never recorded: the try at recording it launches what it
/// recorded up to there and goes on directly, and later runs are direct. Nor are steps recorded
/// on drivers without graphs or a kernel's parameter sizes (HIP so far). Memory a recorded step
/// allocates is the recording's, handed out again at each replay: what the step gives back
/// (its outputs) is overwritten by the next run, so nothing it allocates may be kept past that.
/// While one thread records, another thread's work on the same GPU waits for it to end.
class StepGraph {
 public:
  enum class Ran { Directly, Recorded, Replayed };
  explicit StepGraph(Gpu gpu);
  ~StepGraph();
  StepGraph(StepGraph&&) noexcept;
  StepGraph& operator=(StepGraph&&) noexcept;
  Ran run(const std::function<void()>& step);
  /// False once a step could not be recorded (every later run is direct).
  bool recordable() const;

  struct State;

 private:
  std::unique_ptr<State> state_;
};

/// The GPU with this ordinal, or none when there is no driver, no device, or the device cannot be
/// opened. Never an error. The same ordinal opened twice gives the same device.
std::optional<Gpu> open(int ordinal = 0);
/// Devices the driver reports (0 without a driver).
int deviceCount();

/// Run-time compilation without a device, for CI and tools: CUDA C++ to PTX or to machine code
/// (cubin) for `arch` ("sm_80", "sm_90a"), through NVRTC loaded with dlopen.
struct Compiled {
  std::string ptx;
  std::vector<char> cubin;
  std::string log;
};
/// Whether NVRTC was found (and its version, "13.0"); `why` says where it was looked for if not.
bool nvrtcAvailable(std::string* version = nullptr, std::string* why = nullptr);
/// Compiles source; an Error carries the compiler's log when it fails, or says NVRTC is missing.
Compiled compileCuda(const std::string& source, const std::string& arch, bool wantCubin);
/// The same for AMD: whether hipRTC was found, and a code object of source for `arch` ("gfx90a",
/// "gfx1100"), compiled as the AMD backend compiles (GIZML_HIP defined).
bool hiprtcAvailable(std::string* version = nullptr, std::string* why = nullptr);
std::vector<char> compileHip(const std::string& source, const std::string& arch);
/// The directory of the on-disk kernel cache ($XDG_CACHE_HOME/gizml/kernels, or
/// ~/.cache/gizml/kernels).
std::string kernelCacheDirectory();

// ---- Kernel tunings (docs/tile.md, "Tuning"): Tile::tune measures a kernel's configurations the
// first time each shape runs and keeps the fastest; these keep the kept ones for the next run.

/// Writes every kept configuration to folder/tunings.txt (the folder is made if missing),
/// through a temporary file renamed into place, so a reader sees a whole file or the old one.
void saveTunings(const std::string& folder);
/// Adds the configurations of folder/tunings.txt to the kept ones (an entry replaces one with
/// the same name and key) and returns how many it read; 0 when there is no such file. A
/// damaged file is a gizml::Error naming the file and line, and adds nothing.
size_t loadTunings(const std::string& folder);
/// Forgets every kept configuration.
void clearTunings();
/// How many tunings this process has measured (a kernel's configurations timed for one shape).
uint64_t tuningsMeasured();
/// Where Engine::warm keeps the tunings: next to the kernel cache ($XDG_CACHE_HOME/gizml/tunings).
std::string tuningsDirectory();

}  // namespace gizhw::gpu
