// Opening GPUs, and the Gpu handle's streams, events, copies, memory and kernels.
#include "gpu/device.h"
#include "gpu/step_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "gpu/dynamic_library.h"

namespace gizhw::gpu {
namespace {

// The emulator's loader when this program links the emulator (installEmulator, from its static
// initialiser); null otherwise.
DriverLoader gEmulatorLoader = nullptr;

/// Whether GIZML_GPU_EMULATOR asks for the emulator (set and not "0").
bool emulatorRequested() {
  const char* v = std::getenv("GIZML_GPU_EMULATOR");
  return v && *v && std::strcmp(v, "0") != 0;
}

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::map<int, std::weak_ptr<Device>>& registry() {
  static std::map<int, std::weak_ptr<Device>> r;
  return r;
}

/// Whether GIZML_DEBUG (a comma-separated list) names `topic`.
bool debugTopic(std::string_view topic) {
  const char* env = std::getenv("GIZML_DEBUG");
  std::string_view rest = env ? env : "";
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    if (rest.substr(0, comma) == topic) return true;
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

/// GIZML_DEBUG=kernels: each kernel source on stderr the first time this process loads it (from
/// the compiler or the disk cache), under a line naming the kernel asked for and the target.
void printKernelSource(const std::string& source, const std::string& name, const Properties& properties,
                       bool compiled) {
  static const bool enabled = debugTopic("kernels");
  if (!enabled) return;
  static std::mutex mutex;
  static std::set<std::string> printed;  // each module source once, not once per kernel in it
  std::lock_guard<std::mutex> lock(mutex);
  if (!printed.insert(source).second) return;
  std::fprintf(stderr, "==== gizml kernel %s for %s (%s), %s ====\n%s\n==== end of kernel %s ====\n", name.c_str(),
               properties.arch.c_str(), properties.name.c_str(), compiled ? "compiled" : "from the kernel cache",
               source.c_str(), name.c_str());
}

}  // namespace

// ---- the driver ------------------------------------------------------------------------------

const DriverApi* driver(std::string* why) {
  static std::string reason;
  static const DriverApi* loaded = [] () -> const DriverApi* {
    static DriverApi api;
    std::string tried;
    // GIZML_GPU_EMULATOR=1: the host emulator instead of any real driver (src/gpu/emulator).
    if (emulatorRequested()) {
      if (!gEmulatorLoader) tried = "GIZML_GPU_EMULATOR is set, but this program was built without the emulator";
      else if (gEmulatorLoader(api, tried) && api.init(0) == 0) return &api;
      reason = "GPU emulator: " + tried;
      return nullptr;
    }
    if (loadCudaDriver(api, tried) || (tried += "; ", loadHipDriver(api, tried))) {
      const int r = api.init(0);
      if (r == 0) return &api;
      reason = api.library + ": init failed (" + driverErrorText(api, r) + ")";
      return nullptr;
    }
    reason = tried;
    return nullptr;
  }();
  if (why) *why = reason;
  return loaded;
}

void installEmulator(DriverLoader load) { gEmulatorLoader = load; }

void bindGraphCalls(void* dl, DriverApi& api, const char* const (&names)[6]) {
  std::string missing;
  bind(dl, api.streamBeginCapture, names[0], missing);
  bind(dl, api.streamEndCapture, names[1], missing);
  bind(dl, api.graphInstantiate, names[2], missing);
  bind(dl, api.graphLaunch, names[3], missing);
  bind(dl, api.graphExecDestroy, names[4], missing);
  bind(dl, api.graphDestroy, names[5], missing);
  if (missing.empty()) return;
  api.streamBeginCapture = nullptr;
  api.streamEndCapture = nullptr;
  api.graphInstantiate = nullptr;
  api.graphLaunch = nullptr;
  api.graphExecDestroy = nullptr;
  api.graphDestroy = nullptr;
}

std::string driverErrorText(const DriverApi& api, int result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.getErrorName) api.getErrorName(result, &name);
  if (api.getErrorString) api.getErrorString(result, &text);
  return std::string(name ? name : ("error " + std::to_string(result)).c_str()) + ": " + (text ? text : "unknown error");
}

void checkDriver(const DriverApi& api, int result, const char* call) {
  if (result != 0) throw Error(std::string(call) + " failed: " + driverErrorText(api, result));
}

// ---- Device ----------------------------------------------------------------------------------

Device::Device(const DriverApi& driverApi, int ordinal) : api(driverApi) {
  check(api.deviceGet(&handle, ordinal), "cuDeviceGet");
  check(api.primaryCtxRetain(&context, handle), "cuDevicePrimaryCtxRetain");
  check(api.ctxSetCurrent(context), "cuCtxSetCurrent");
  Properties& p = properties;
  p.vendor = api.vendor;
  p.ordinal = ordinal;
  p.emulated = api.emulator;
  char name[256] = {};
  check(api.deviceGetName(name, sizeof name - 1, handle), "cuDeviceGetName");
  p.name = name;
  auto attribute = [&](int code, const char* what) {
    int v = 0;
    checkDriver(api, api.deviceGetAttribute(&v, code, handle), what);
    return v;
  };
  p.major = attribute(api.attrComputeMajor, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)");
  p.minor = attribute(api.attrComputeMinor, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
  p.multiprocessors = attribute(api.attrMultiprocessors, "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
  p.l2Bytes = static_cast<uint64_t>(attribute(api.attrL2Bytes, "cuDeviceGetAttribute(L2_CACHE_SIZE)"));
  p.warpSize = attribute(api.attrWarpSize, "cuDeviceGetAttribute(WARP_SIZE)");
  p.sharedPerBlockOptin = attribute(api.attrSharedOptin, "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)");
  size_t total = 0;
  check(api.deviceTotalMem(&total, handle), "cuDeviceTotalMem");
  p.memoryBytes = total;
  check(api.driverGetVersion(&p.driverVersion), "cuDriverGetVersion");
  if (api.vendor == Vendor::Nvidia)
    p.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor) + (p.major == 9 && p.minor == 0 ? "a" : "");
  Handle s = nullptr;
  check(api.streamCreate(&s, api.streamNonBlocking), "cuStreamCreate");
  stream.raw_ = this;
  stream.handle_ = std::shared_ptr<void>(s, [](void*) {});  // destroyed by close()
}

Device::~Device() {
  try {
    close();
  } catch (...) {
    // A failing driver at exit: nothing more to free.
  }
}

void Device::checkOpen() const {
  if (closed()) throw Error("GPU " + describe() + " was closed: its tensors, buffers and kernels cannot be used");
}

void Device::activate() const {
  checkOpen();
  thread_local Handle current = nullptr;
  thread_local const Device* currentDevice = nullptr;
  if (current != context || currentDevice != this) {
    check(api.ctxSetCurrent(context), "cuCtxSetCurrent");
    current = context;
    currentDevice = this;
  }
}

std::string Device::describe() const {
  return std::string(api.prefix) + ":" + std::to_string(properties.ordinal) + " (" + properties.name + ")";
}

void Device::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed()) return;
  api.ctxSetCurrent(context);
  api.streamSynchronize(stream.handle());
  allocator.freeAll();
  for (Handle m : modules_) api.moduleUnload(m);
  modules_.clear();
  functions_.clear();
  api.streamDestroy(stream.handle());
  closed_.store(true, std::memory_order_release);
  api.primaryCtxRelease(handle);
}

Handle Device::function(const std::string& source, const std::string& name) {
  activate();
  const std::string memoryKey = name + "\n" + source;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = functions_.find(memoryKey); it != functions_.end()) return it->second;
  }
  const std::string version = api.emulator ? api.hostCompilerVersion() : compilerVersion(properties.vendor);
  const std::string key = hashText(source + "\n" + properties.arch + "\n" + properties.name + "\n" + version +
                                   "\ndriver " + std::to_string(properties.driverVersion));
  std::vector<char> image;
  const bool cached = cacheLoad(key, image);
  printKernelSource(source, name, properties, !cached);
  if (!cached) {
    std::string used;
    image = api.emulator ? api.hostCompile(source, properties) : compileForDevice(source, properties, used);
    cacheStore(key, image);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = functions_.find(memoryKey); it != functions_.end()) return it->second;
  Handle module = nullptr;
  check(api.moduleLoadData(&module, image.data()), "cuModuleLoadData");
  modules_.push_back(module);
  Handle f = nullptr;
  const int r = api.moduleGetFunction(&f, module, name.c_str());
  if (r != 0) throw Error("cuModuleGetFunction(" + name + ") failed: " + driverErrorText(api, r));
  functions_[memoryKey] = f;
  // Its parameters' sizes, asked once: the driver says when an index is past the last.
  if (api.funcGetParamInfo) {
    std::vector<size_t> sizes;
    size_t offset = 0, size = 0;
    while (api.funcGetParamInfo(f, sizes.size(), &offset, &size) == 0) sizes.push_back(size);
    parameterSizes_[f] = std::move(sizes);
  }
  return f;
}

Handle Device::staticFunction(const std::string& source, const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = staticFunctions_.find({&source, name}); it != staticFunctions_.end()) return it->second;
  }
  const Handle f = function(source, name);
  std::lock_guard<std::mutex> lock(mutex_);
  staticFunctions_[{&source, name}] = f;
  return f;
}

std::optional<std::vector<size_t>> Device::parameterSizes(Handle function) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = parameterSizes_.find(function);
  return it == parameterSizes_.end() ? std::nullopt : it->second;
}

// ---- the public handles ------------------------------------------------------------------------

void Stream::synchronize() const {
  if (!raw_) throw Error("synchronize: an empty stream");
  if (StepSession* step = stepSession(*raw_, handle())) step->readsBack("waits for the GPU");
  raw_->activate();
  raw_->check(raw_->api.streamSynchronize(handle()), "cuStreamSynchronize");
}

void Event::record(const Stream& stream) const {
  device_->activate();
  device_->check(device_->api.eventRecord(handle_.get(), stream.handle()), "cuEventRecord");
}
void Event::synchronize() const {
  if (StepSession* step = stepSession(*device_, device_->stream.handle())) step->readsBack("waits for the GPU");
  device_->activate();
  device_->check(device_->api.eventSynchronize(handle_.get()), "cuEventSynchronize");
}
float Event::millisecondsSince(const Event& start) const {
  device_->activate();
  float ms = 0;
  device_->check(device_->api.eventElapsedTime(&ms, start.handle_.get(), handle_.get()), "cuEventElapsedTime");
  return ms;
}

struct Buffer::Block {
  std::shared_ptr<Device> device;
  DevicePtr address = 0;
  size_t bytes = 0, classBytes = 0;
  ~Block() {
    if (!device->closed()) device->allocator.release(address, classBytes);
  }
};
uint64_t Buffer::address() const { return block_ ? block_->address : 0; }
size_t Buffer::bytes() const { return block_ ? block_->bytes : 0; }

void Kernel::launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, std::initializer_list<void*> args) const {
  std::vector<void*> params(args);
  launch(grid, block, sharedBytes, stream, params.data());
}

void Kernel::launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, void** args) const {
  launch(grid, block, sharedBytes, stream, args, {});
}

void Kernel::launch(Dim3 grid, Dim3 block, size_t sharedBytes, const Stream& stream, void** args,
                    std::span<const size_t> argSizes) const {
  if (!device_) throw Error("launch: an empty kernel");
  if (StepSession* step = stepSession(*device_, stream.handle()))
    if (step->launch(function_, grid, block, sharedBytes, args, argSizes)) return;
  device_->activate();
  const DriverApi& api = device_->api;
  if (sharedBytes > 48 * 1024 && api.funcSetAttribute)
    device_->check(api.funcSetAttribute(function_, api.funcAttrMaxDynamicShared, static_cast<int>(sharedBytes)),
                   "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  device_->launches.fetch_add(1, std::memory_order_relaxed);
  const int r = api.launchKernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                 static_cast<unsigned>(sharedBytes), stream.handle(), args, nullptr);
  if (r != 0)
    throw Error("cuLaunchKernel(" + name_ + ", grid " + std::to_string(grid.x) + "x" + std::to_string(grid.y) + "x" +
                std::to_string(grid.z) + ", block " + std::to_string(block.x) + ") failed: " + driverErrorText(api, r));
}

Gpu::Gpu(std::shared_ptr<Device> device) : device_(std::move(device)) {
  if (!device_) throw Error("Gpu: no device");
}

const Properties& Gpu::properties() const { return device_->properties; }
std::string Gpu::describe() const { return device_->describe(); }
const Stream& Gpu::stream() const { return device_->stream; }
bool Gpu::closed() const { return device_->closed(); }
void Gpu::close() { device_->close(); }

Stream Gpu::newStream() const {
  device_->activate();
  Handle s = nullptr;
  device_->check(device_->api.streamCreate(&s, device_->api.streamNonBlocking), "cuStreamCreate");
  Stream stream;
  stream.device_ = device_;
  stream.raw_ = device_.get();
  std::shared_ptr<Device> owner = device_;
  stream.handle_ = std::shared_ptr<void>(s, [owner](void* h) {
    if (!owner->closed()) owner->api.streamDestroy(h);
  });
  return stream;
}

Event Gpu::newEvent() const {
  device_->activate();
  Handle e = nullptr;
  device_->check(device_->api.eventCreate(&e, 0), "cuEventCreate");
  Event event;
  event.device_ = device_;
  std::shared_ptr<Device> owner = device_;
  event.handle_ = std::shared_ptr<void>(e, [owner](void* h) {
    if (!owner->closed()) owner->api.eventDestroy(h);
  });
  return event;
}

void Gpu::synchronize() const { device_->stream.synchronize(); }

Buffer Gpu::allocate(size_t bytes) const {
  if (StepSession* step = stepSession(*device_, device_->stream.handle()))
    return step->allocate(bytes, [&] { return allocateDirectly(bytes); });
  return allocateDirectly(bytes);
}

Buffer Gpu::allocateDirectly(size_t bytes) const {
  device_->activate();
  auto block = std::make_shared<Buffer::Block>();
  block->device = device_;
  block->bytes = bytes;
  block->classBytes = Allocator::sizeClass(bytes);
  block->address = device_->allocator.allocate(block->classBytes);
  Buffer b;
  b.block_ = std::move(block);
  return b;
}

PinnedBuffer Gpu::allocatePinned(size_t bytes) const {
  device_->activate();
  void* p = nullptr;
  device_->check(device_->api.memHostAlloc(&p, std::max<size_t>(bytes, 1), device_->api.hostAllocPortable), "cuMemHostAlloc");
  PinnedBuffer b;
  std::shared_ptr<Device> owner = device_;
  owner->pinnedBytes.fetch_add(bytes, std::memory_order_relaxed);
  b.data_ = std::shared_ptr<void>(p, [owner, bytes](void* h) {
    owner->pinnedBytes.fetch_sub(bytes, std::memory_order_relaxed);
    if (!owner->closed()) owner->api.memFreeHost(h);
  });
  b.bytes_ = bytes;
  return b;
}

AllocatorStats Gpu::allocatorStats() const {
  AllocatorStats stats = device_->allocator.stats();
  stats.pinnedBytes = device_->pinnedBytes.load(std::memory_order_relaxed);
  return stats;
}
Activity Gpu::activity() const {
  const auto get = [](const std::atomic<uint64_t>& n) { return n.load(std::memory_order_relaxed); };
  return {get(device_->launches),       get(device_->copiesToDevice), get(device_->copiesToHost),
          get(device_->copiesOnDevice), get(device_->bytesToDevice),  get(device_->bytesToHost),
          get(device_->pinnedBytesToDevice), get(device_->graphLaunches)};
}
uint64_t Gpu::freeBytes() const {
  device_->activate();
  size_t free = 0, total = 0;
  if (device_->api.memGetInfo) device_->api.memGetInfo(&free, &total);
  return free + device_->allocator.stats().bytesCached;
}
void Gpu::releaseCache() const {
  device_->activate();
  device_->allocator.flush();
}

void Gpu::copyToDevice(uint64_t dst, const void* src, size_t bytes, const Stream& stream) const {
  if (!bytes) return;
  if (StepSession* step = stepSession(*device_, stream.handle()))
    if (step->copyToDevice(dst, src, bytes)) return;
  device_->activate();
  device_->copiesToDevice.fetch_add(1, std::memory_order_relaxed);
  device_->bytesToDevice.fetch_add(bytes, std::memory_order_relaxed);
  device_->check(device_->api.memcpyHtoDAsync(dst, src, bytes, stream.handle()), "cuMemcpyHtoDAsync");
}
void Gpu::copyToDevice(uint64_t dst, const PinnedBuffer& src, size_t offset, size_t bytes, const Stream& stream) const {
  if (offset > src.bytes() || bytes > src.bytes() - offset)
    throw Error("copyToDevice: bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                ") lie outside the pinned buffer of " + std::to_string(src.bytes()));
  copyToDevice(dst, static_cast<const uint8_t*>(src.data()) + offset, bytes, stream);
  device_->pinnedBytesToDevice.fetch_add(bytes, std::memory_order_relaxed);
}
void Gpu::copyToHost(void* dst, uint64_t src, size_t bytes, const Stream& stream) const {
  if (!bytes) return;
  if (StepSession* step = stepSession(*device_, stream.handle())) step->readsBack("reads device memory back");
  device_->activate();
  device_->copiesToHost.fetch_add(1, std::memory_order_relaxed);
  device_->bytesToHost.fetch_add(bytes, std::memory_order_relaxed);
  device_->check(device_->api.memcpyDtoHAsync(dst, src, bytes, stream.handle()), "cuMemcpyDtoHAsync");
}
void Gpu::copyOnDevice(uint64_t dst, uint64_t src, size_t bytes, const Stream& stream) const {
  if (!bytes) return;
  if (StepSession* step = stepSession(*device_, stream.handle()))
    if (step->copyOnDevice(dst, src, bytes)) return;
  device_->activate();
  device_->copiesOnDevice.fetch_add(1, std::memory_order_relaxed);
  device_->check(device_->api.memcpyDtoDAsync(dst, src, bytes, stream.handle()), "cuMemcpyDtoDAsync");
}
void Gpu::fill(uint64_t dst, uint8_t value, size_t bytes, const Stream& stream) const {
  if (!bytes) return;
  if (StepSession* step = stepSession(*device_, stream.handle()))
    if (step->fill(dst, value, bytes)) return;
  device_->activate();
  device_->check(device_->api.memsetD8Async(dst, value, bytes, stream.handle()), "cuMemsetD8Async");
}

Kernel Gpu::kernel(const std::string& source, const std::string& name) const {
  return Kernel(device_, device_->function(source, name), name);
}
Kernel Gpu::staticKernel(const std::string& source, const std::string& name) const {
  return Kernel(device_, device_->staticFunction(source, name), name);
}

int deviceCount() {
  const DriverApi* api = driver();
  if (!api) return 0;
  int count = 0;
  return api->deviceGetCount(&count) == 0 ? count : 0;
}

std::optional<Gpu> open(int ordinal) {
  const DriverApi* api = driver();
  if (!api || ordinal < 0 || ordinal >= deviceCount()) return std::nullopt;
  std::lock_guard<std::mutex> lock(registryMutex());
  if (auto existing = registry()[ordinal].lock(); existing && !existing->closed()) return Gpu(existing);
  try {
    auto device = std::make_shared<Device>(*api, ordinal);
    registry()[ordinal] = device;
    return Gpu(device);
  } catch (const Error&) {
    return std::nullopt;  // a device that cannot be opened counts as none
  }
}

}  // namespace gizhw::gpu
