// The emulator's driver table: the CUDA driver API's calls (the same numbers: attributes, error
// codes) over host memory. Device addresses are host pointers; streams run work at once (a copy
// or launch is done when the call returns) unless the stream captures, when they are recorded
// into a graph that a graph launch replays in order; events record steady_clock times. It shows
// GIZML_GPU_EMULATOR_DEVICES devices (1 unless set), as many as CUDA_VISIBLE_DEVICES lets it
// where that is set (as the CUDA driver does), each its own context and memory: allocations
// beyond a device's size (8 GiB, or GIZML_GPU_EMULATOR_MEMORY: one size for all, or a comma list
// of one per device) fail with out-of-memory, so the allocator's recovery runs. Every address is
// host memory, so a copy between two devices is a plain copy (CUDA's unified addressing).
#include <dlfcn.h>
#include <elf.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "gpu/emulator/emulator.h"
#include "gpu/emulator/runner.h"

namespace gizhw::gpu::emulator {
namespace {

// CUDA's codes (cuda.h's CUresult).
constexpr int kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2, kInvalidImage = 200, kIllegalState = 401,
              kNotFound = 500, kNotReady = 600, kLaunchFailed = 719, kCaptureUnsupported = 900,
              kCaptureInvalidated = 901, kCaptureWrongThread = 908;

struct Config {
  int major = 8, minor = 9;
  uint64_t memory = 8ull << 30;  // the size a device takes unless GIZML_GPU_EMULATOR_MEMORY names its own
  int sharedOptin = 101376;  // 99 KB (8.9); 8.0: 163 KB, 9.0: 227 KB
};
Config gConfig;

// An emulated device: its place among all the emulator has (before CUDA_VISIBLE_DEVICES), its
// memory size and the bytes allocated on it. The context handle is the device's address.
struct EmulatedDevice {
  int physical = 0;
  uint64_t memory = 0, used = 0;
};
std::vector<EmulatedDevice> gDevices;  // the visible ones, in the order the ordinals number them
// The device of the context current on this thread (cuCtxSetCurrent), the first until one is set.
thread_local EmulatedDevice* tCurrent = nullptr;
EmulatedDevice& current() { return tCurrent ? *tCurrent : gDevices.front(); }

// The detail of the last failure on this thread (getErrorString gives it for that code).
thread_local int tLastCode = 0;
thread_local std::string tLastText;
int fail(int code, std::string text) {
  tLastCode = code;
  tLastText = std::move(text);
  return code;
}

std::mutex gMemoryMutex;
struct Allocation {
  size_t bytes;
  EmulatedDevice* device;
};
std::map<uint64_t, Allocation> gAllocations;  // address -> its allocation
std::map<uintptr_t, size_t> gPinned;           // cuMemHostAlloc's blocks: address -> bytes

// Whether [p, p + bytes) lies in one pinned host block.
bool pinned(const void* p, size_t bytes) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  auto it = gPinned.upper_bound(address);
  if (it == gPinned.begin()) return false;
  --it;
  return address + bytes <= it->first + it->second;
}

// Whether [address, address + bytes) lies in one allocation.
bool inDevice(uint64_t address, size_t bytes) {
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  auto it = gAllocations.upper_bound(address);
  if (it == gAllocations.begin()) return false;
  --it;
  return address >= it->first && address + bytes <= it->first + it->second.bytes;
}

int badRange(const char* call, uint64_t address, size_t bytes) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: [0x%llx, +%zu) is not inside one device allocation", call,
                static_cast<unsigned long long>(address), bytes);
  return fail(kInvalidValue, buf);
}

// ---- stream capture (cuStreamBeginCapture): what a capturing stream is given is recorded ------

// One recorded operation. A launch keeps its arguments' values, as cuLaunchKernel copies them; a
// copy or fill keeps its addresses, so a replay reads the memory as it is then.
struct Node {
  enum class Kind { Launch, ToDevice, ToHost, OnDevice, Fill, Event } kind = Kind::Launch;
  Function* function = nullptr;
  LaunchShape shape;
  std::vector<std::vector<std::max_align_t>> args;
  DevicePtr dst = 0, src = 0;
  void* hostDst = nullptr;
  const void* hostSrc = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
  Handle event = nullptr;
};
struct Graph {
  std::vector<Node> nodes;
};
struct Stream {
  std::unique_ptr<Graph> capture;  // set while capturing
  std::thread::id thread;          // the thread that began the capture
  std::string invalid;             // why the capture was invalidated; empty while it is valid
};
// The captures this thread began in CUDA's global or thread-local mode: an unsafe call on it
// (memory from the driver) fails and invalidates them.
thread_local std::vector<Stream*> tCapturing;

Stream* capturing(Handle stream) {
  auto* s = static_cast<Stream*>(stream);
  return s && s->capture ? s : nullptr;
}
// CUDA fails a call that a capture cannot hold and invalidates the capture; its end then says so.
int invalidate(Stream& s, std::string why) {
  if (s.invalid.empty()) s.invalid = why;
  return fail(kCaptureUnsupported, std::move(why));
}
int unsafeWhileCapturing(const char* call) {
  if (tCapturing.empty()) return kSuccess;
  const std::string why = std::string(call) + " while this thread captures a stream";
  for (Stream* s : tCapturing)
    if (s->invalid.empty()) s->invalid = why;
  return fail(kCaptureUnsupported, why);
}
int record(Stream& s, Node node) {
  if (!s.invalid.empty()) return fail(kCaptureInvalidated, "the stream's capture was invalidated: " + s.invalid);
  s.capture->nodes.push_back(std::move(node));
  return kSuccess;
}

int init(unsigned) { return kSuccess; }
int driverGetVersion(int* v) {
  *v = 12000;  // the CUDA driver API version the emulated calls follow
  return kSuccess;
}
int deviceGetCount(int* c) {
  *c = static_cast<int>(gDevices.size());
  return kSuccess;
}
int deviceGet(int* d, int ordinal) {
  if (ordinal < 0 || ordinal >= static_cast<int>(gDevices.size()))
    return fail(kInvalidValue, "device " + std::to_string(ordinal) + ": the emulator shows " +
                                   std::to_string(gDevices.size()) + " (GIZML_GPU_EMULATOR_DEVICES, CUDA_VISIBLE_DEVICES)");
  *d = ordinal;
  return kSuccess;
}
int deviceGetName(char* name, int length, int) {
  // One name for all, as a machine of one GPU model shows: the kernel cache serves them all.
  std::snprintf(name, static_cast<size_t>(length), "%s", "gizml GPU emulator (host)");
  return kSuccess;
}
int deviceGetAttribute(int* value, int attribute, int) {
  switch (attribute) {
    case 75: *value = gConfig.major; return kSuccess;
    case 76: *value = gConfig.minor; return kSuccess;
    case 16: *value = 4; return kSuccess;                 // multiprocessors
    case 38: *value = 4 << 20; return kSuccess;           // L2 bytes
    case 10: *value = 32; return kSuccess;                // warp size
    case 97: *value = gConfig.sharedOptin; return kSuccess;
    default: return fail(kInvalidValue, "attribute " + std::to_string(attribute) + " is not emulated");
  }
}
int deviceTotalMem(size_t* bytes, int device) {
  *bytes = gDevices[static_cast<size_t>(device)].memory;
  return kSuccess;
}
int primaryCtxRetain(Handle* context, int device) {
  *context = &gDevices[static_cast<size_t>(device)];
  return kSuccess;
}
int primaryCtxRelease(int) { return kSuccess; }
int ctxSetCurrent(Handle context) {
  tCurrent = static_cast<EmulatedDevice*>(context);
  return kSuccess;
}

// The image is the shared object's bytes; its length is where its section headers end.
int moduleLoadData(Handle* module, const void* image) {
  const auto* e = static_cast<const Elf64_Ehdr*>(image);
  if (std::memcmp(e->e_ident, ELFMAG, SELFMAG) != 0 || e->e_ident[EI_CLASS] != ELFCLASS64)
    return fail(kInvalidImage, "not an emulator kernel image (a shared object)");
  const size_t bytes = e->e_shoff + static_cast<size_t>(e->e_shnum) * e->e_shentsize;
  std::string path = (std::filesystem::temp_directory_path() / "gizml-emu-XXXXXX.so").string();
  const int fd = mkstemps(path.data(), 3);
  if (fd < 0) return fail(kInvalidImage, "cannot write a temporary file for the kernel image");
  const bool written = ::write(fd, image, bytes) == static_cast<ssize_t>(bytes);
  ::close(fd);
  void* dl = written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  const std::string why = written ? (dl ? "" : dlerror()) : "cannot write the kernel image";
  std::filesystem::remove(path);  // mapped: the file is no longer needed
  if (!dl) return fail(kInvalidImage, "dlopen of the kernel image failed: " + why);
  auto m = std::make_unique<Module>();
  m->dl = dl;
  m->ctx = static_cast<GzEmuCtx**>(dlsym(dl, "gz_emu_ctx"));
  m->dynamicShared = static_cast<unsigned char*>(dlsym(dl, "gz_emu_dynamic"));
  m->staticShared = static_cast<unsigned char*>(dlsym(dl, "gz_emu_static"));
  m->staticUsed = static_cast<unsigned*>(dlsym(dl, "gz_emu_static_used"));
  if (!m->ctx || !m->dynamicShared || !m->staticShared || !m->staticUsed) {
    dlclose(dl);
    return fail(kInvalidImage, "the kernel image lacks the emulator prelude's symbols");
  }
  *module = m.release();
  return kSuccess;
}
int moduleUnload(Handle module) {
  auto* m = static_cast<Module*>(module);
  dlclose(m->dl);
  delete m;
  return kSuccess;
}
int moduleGetFunction(Handle* function, Handle module, const char* name) {
  auto* m = static_cast<Module*>(module);
  void* entry = dlsym(m->dl, (std::string(name) + "__gz_emu").c_str());
  if (!entry)
    return fail(kNotFound, std::string("no extern \"C\" __global__ kernel named ") + name + " in the module");
  auto f = std::make_unique<Function>();
  f->module = m;
  f->entry = reinterpret_cast<void (*)(void**)>(entry);
  f->name = name;
  if (const auto* bound = static_cast<const unsigned*>(dlsym(m->dl, (std::string(name) + "__gz_emu_bounds").c_str())))
    f->maxThreads = *bound;
  const auto sizes = reinterpret_cast<unsigned (*)(unsigned*)>(dlsym(m->dl, (std::string(name) + "__gz_emu_args").c_str()));
  if (!sizes) return fail(kInvalidImage, std::string("kernel ") + name + " lacks the emulator's argument sizes");
  f->argBytes.resize(sizes(nullptr));
  sizes(f->argBytes.data());
  *function = f.get();
  m->functions.push_back(std::move(f));
  return kSuccess;
}
int funcSetAttribute(Handle function, int attribute, int value) {
  if (attribute != 8) return fail(kInvalidValue, "function attribute " + std::to_string(attribute) + " is not emulated");
  if (value < 0 || value > gConfig.sharedOptin)
    return fail(kInvalidValue, "MAX_DYNAMIC_SHARED_SIZE_BYTES " + std::to_string(value) + " is more than the device's " +
                                   std::to_string(gConfig.sharedOptin));
  static_cast<Function*>(function)->maxDynamicShared = static_cast<unsigned>(value);
  return kSuccess;
}

// cuFuncGetParamInfo: parameter `index`'s size, at an offset packed as CUDA packs them (each
// aligned to its size, at most 8).
int funcGetParamInfo(Handle function, size_t index, size_t* offset, size_t* size) {
  const auto* f = static_cast<const Function*>(function);
  if (index >= f->argBytes.size())
    return fail(kInvalidValue, "cuFuncGetParamInfo: " + f->name + " has " + std::to_string(f->argBytes.size()) +
                                   " parameters, not " + std::to_string(index + 1));
  size_t at = 0;
  for (size_t i = 0;; ++i) {
    const size_t align = std::clamp<size_t>(f->argBytes[i], 1, 8);
    at = (at + align - 1) / align * align;
    if (i == index) break;
    at += f->argBytes[i];
  }
  *offset = at;
  *size = f->argBytes[index];
  return kSuccess;
}

int runLaunch(const Function& f, const LaunchShape& shape, void** params) {
  const std::string error = run(f, shape, params);
  return error.empty() ? kSuccess : fail(kLaunchFailed, error);
}

int launchKernel(Handle function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                 unsigned sharedBytes, Handle stream, void** params, void** extra) {
  auto* f = static_cast<Function*>(function);
  // The limits a GPU enforces at launch.
  const uint64_t threads = static_cast<uint64_t>(bx) * by * bz;
  if (extra) return fail(kInvalidValue, "launch: `extra` parameters are not emulated");
  if (!gx || !gy || !gz || !bx || !by || !bz || threads > 1024 || bz > 64 || gy > 65535 || gz > 65535)
    return fail(kInvalidValue, "launch of " + f->name + ": grid " + std::to_string(gx) + "x" + std::to_string(gy) + "x" +
                                   std::to_string(gz) + ", block " + std::to_string(bx) + "x" + std::to_string(by) +
                                   "x" + std::to_string(bz) + " is outside CUDA's limits");
  if (threads > f->maxThreads)
    return fail(kInvalidValue, "launch of " + f->name + ": a block of " + std::to_string(threads) +
                                   " threads, more than its __launch_bounds__ of " + std::to_string(f->maxThreads));
  if (sharedBytes > f->maxDynamicShared)
    return fail(kInvalidValue, "launch of " + f->name + ": " + std::to_string(sharedBytes) +
                                   " bytes of dynamic shared memory without cuFuncSetAttribute raising the " +
                                   std::to_string(f->maxDynamicShared) + " allowed");
  LaunchShape shape;
  shape.grid[0] = gx, shape.grid[1] = gy, shape.grid[2] = gz;
  shape.block[0] = bx, shape.block[1] = by, shape.block[2] = bz;
  shape.sharedBytes = sharedBytes;
  shape.sharedOptin = static_cast<unsigned>(gConfig.sharedOptin);
  if (Stream* s = capturing(stream)) {
    Node node;
    node.function = f;
    node.shape = shape;
    for (size_t i = 0; i < f->argBytes.size(); ++i) {
      auto& value = node.args.emplace_back((f->argBytes[i] + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t));
      std::memcpy(value.data(), params[i], f->argBytes[i]);
    }
    return record(*s, std::move(node));
  }
  return runLaunch(*f, shape, params);
}

int memAlloc(DevicePtr* address, size_t bytes) {
  if (const int r = unsafeWhileCapturing("cuMemAlloc")) return r;
  if (bytes == 0) return fail(kInvalidValue, "cuMemAlloc of 0 bytes");
  EmulatedDevice& device = current();
  {
    std::lock_guard<std::mutex> lock(gMemoryMutex);
    if (bytes > device.memory - device.used) return kOutOfMemory;
    device.used += bytes;
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!p) {
    std::lock_guard<std::mutex> lock(gMemoryMutex);
    device.used -= bytes;
    return kOutOfMemory;
  }
  std::memset(p, 0xff, bytes);  // NaN bytes: a read of memory never written shows
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  gAllocations[reinterpret_cast<uint64_t>(p)] = {bytes, &device};
  *address = reinterpret_cast<uint64_t>(p);
  return kSuccess;
}
int memFree(DevicePtr address) {
  if (const int r = unsafeWhileCapturing("cuMemFree")) return r;
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  auto it = gAllocations.find(address);
  if (it == gAllocations.end()) return fail(kInvalidValue, "cuMemFree of an address that was not allocated");
  it->second.device->used -= it->second.bytes;
  gAllocations.erase(it);
  std::free(reinterpret_cast<void*>(address));
  return kSuccess;
}
int memGetInfo(size_t* freeBytes, size_t* total) {
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  const EmulatedDevice& device = current();
  *freeBytes = device.memory - device.used;
  *total = device.memory;
  return kSuccess;
}
int memHostAlloc(void** pointer, size_t bytes, unsigned) {
  *pointer = std::malloc(bytes ? bytes : 1);
  if (!*pointer) return kOutOfMemory;
  std::lock_guard<std::mutex> lock(gMemoryMutex);
  gPinned[reinterpret_cast<uintptr_t>(*pointer)] = bytes;
  return kSuccess;
}
int memFreeHost(void* pointer) {
  {
    std::lock_guard<std::mutex> lock(gMemoryMutex);
    gPinned.erase(reinterpret_cast<uintptr_t>(pointer));
  }
  std::free(pointer);
  return kSuccess;
}
// A graph reads host memory when it runs, which CUDA promises for page-locked memory only: the
// emulator refuses a captured copy with other host memory.
int pageable(Stream& s, const char* call) {
  return invalidate(s, std::string(call) + " with host memory that is not pinned (cuMemHostAlloc) while capturing");
}

int memcpyHtoD(DevicePtr dst, const void* src, size_t bytes, Handle stream) {
  if (!inDevice(dst, bytes)) return badRange("cuMemcpyHtoD", dst, bytes);
  if (Stream* s = capturing(stream)) {
    if (!pinned(src, bytes)) return pageable(*s, "cuMemcpyHtoDAsync");
    Node node;
    node.kind = Node::Kind::ToDevice;
    node.dst = dst;
    node.hostSrc = src;
    node.bytes = bytes;
    return record(*s, std::move(node));
  }
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return kSuccess;
}
int memcpyDtoH(void* dst, DevicePtr src, size_t bytes, Handle stream) {
  if (!inDevice(src, bytes)) return badRange("cuMemcpyDtoH", src, bytes);
  if (Stream* s = capturing(stream)) {
    if (!pinned(dst, bytes)) return pageable(*s, "cuMemcpyDtoHAsync");
    Node node;
    node.kind = Node::Kind::ToHost;
    node.hostDst = dst;
    node.src = src;
    node.bytes = bytes;
    return record(*s, std::move(node));
  }
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}
int memcpyDtoD(DevicePtr dst, DevicePtr src, size_t bytes, Handle stream) {
  if (!inDevice(dst, bytes)) return badRange("cuMemcpyDtoD (destination)", dst, bytes);
  if (!inDevice(src, bytes)) return badRange("cuMemcpyDtoD (source)", src, bytes);
  if (Stream* s = capturing(stream)) {
    Node node;
    node.kind = Node::Kind::OnDevice;
    node.dst = dst;
    node.src = src;
    node.bytes = bytes;
    return record(*s, std::move(node));
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return kSuccess;
}
int memsetD8(DevicePtr dst, unsigned char value, size_t bytes, Handle stream) {
  if (!inDevice(dst, bytes)) return badRange("cuMemsetD8", dst, bytes);
  if (Stream* s = capturing(stream)) {
    Node node;
    node.kind = Node::Kind::Fill;
    node.dst = dst;
    node.value = value;
    node.bytes = bytes;
    return record(*s, std::move(node));
  }
  std::memset(reinterpret_cast<void*>(dst), value, bytes);
  return kSuccess;
}
int streamCreate(Handle* stream, unsigned) {
  *stream = new Stream;
  return kSuccess;
}
int streamDestroy(Handle stream) {
  auto* s = static_cast<Stream*>(stream);
  tCapturing.erase(std::remove(tCapturing.begin(), tCapturing.end(), s), tCapturing.end());
  delete s;
  return kSuccess;
}
int streamSynchronize(Handle stream) {
  // Work ran at its call; a capturing stream cannot be waited for.
  if (Stream* s = capturing(stream)) return invalidate(*s, "cuStreamSynchronize of a capturing stream");
  return kSuccess;
}

struct Event {
  bool recorded = false;
  std::chrono::steady_clock::time_point at;
};
int eventCreate(Handle* event, unsigned) {
  *event = new Event;
  return kSuccess;
}
int eventDestroy(Handle event) {
  delete static_cast<Event*>(event);
  return kSuccess;
}
int eventRecord(Handle event, Handle stream) {
  if (Stream* s = capturing(stream)) {
    Node node;
    node.kind = Node::Kind::Event;
    node.event = event;
    return record(*s, std::move(node));
  }
  auto* e = static_cast<Event*>(event);
  e->recorded = true;
  e->at = std::chrono::steady_clock::now();
  return kSuccess;
}
int eventSynchronize(Handle) { return kSuccess; }
int eventElapsedTime(float* ms, Handle start, Handle end) {
  const auto *a = static_cast<Event*>(start), *b = static_cast<Event*>(end);
  if (!a->recorded || !b->recorded) return fail(kNotReady, "an event was never recorded");
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return kSuccess;
}

int streamBeginCapture(Handle stream, int mode) {
  auto* s = static_cast<Stream*>(stream);
  if (!s) return fail(kCaptureUnsupported, "cuStreamBeginCapture of the legacy default stream");
  if (mode < 0 || mode > 2) return fail(kInvalidValue, "capture mode " + std::to_string(mode) + " is not a CUstreamCaptureMode");
  if (s->capture) return fail(kIllegalState, "cuStreamBeginCapture of a stream that is already capturing");
  s->capture = std::make_unique<Graph>();
  s->thread = std::this_thread::get_id();
  s->invalid.clear();
  if (mode != 2) tCapturing.push_back(s);  // CU_STREAM_CAPTURE_MODE_RELAXED (2) forbids nothing
  return kSuccess;
}
int streamEndCapture(Handle stream, Handle* graph) {
  *graph = nullptr;
  Stream* s = capturing(stream);
  if (!s) return fail(kIllegalState, "cuStreamEndCapture of a stream that is not capturing");
  if (s->thread != std::this_thread::get_id())
    return fail(kCaptureWrongThread, "cuStreamEndCapture on another thread than the capture's");
  tCapturing.erase(std::remove(tCapturing.begin(), tCapturing.end(), s), tCapturing.end());
  std::unique_ptr<Graph> captured = std::move(s->capture);
  if (!s->invalid.empty()) return fail(kCaptureInvalidated, "the capture was invalidated: " + s->invalid);
  *graph = captured.release();
  return kSuccess;
}
int graphInstantiate(Handle* exec, Handle graph, unsigned long long flags) {
  if (flags != 0) return fail(kInvalidValue, "graph instantiation flags are not emulated");
  *exec = new Graph(*static_cast<Graph*>(graph));
  return kSuccess;
}
int graphDestroy(Handle graph) {
  delete static_cast<Graph*>(graph);
  return kSuccess;
}
// A replayed node checks its memory again: what it recorded may have been freed since.
int replay(const Node& n) {
  switch (n.kind) {
    case Node::Kind::Launch: {
      std::vector<void*> params;
      for (const auto& value : n.args) params.push_back(const_cast<std::max_align_t*>(value.data()));
      return runLaunch(*n.function, n.shape, params.data());
    }
    case Node::Kind::ToDevice: return memcpyHtoD(n.dst, n.hostSrc, n.bytes, nullptr);
    case Node::Kind::ToHost: return memcpyDtoH(n.hostDst, n.src, n.bytes, nullptr);
    case Node::Kind::OnDevice: return memcpyDtoD(n.dst, n.src, n.bytes, nullptr);
    case Node::Kind::Fill: return memsetD8(n.dst, n.value, n.bytes, nullptr);
    case Node::Kind::Event: return eventRecord(n.event, nullptr);
  }
  return kSuccess;
}
int graphLaunch(Handle exec, Handle stream) {
  const auto* g = static_cast<const Graph*>(exec);
  if (Stream* s = capturing(stream)) {
    for (const Node& n : g->nodes)
      if (const int r = record(*s, n)) return r;
    return kSuccess;
  }
  for (const Node& n : g->nodes)
    if (const int r = replay(n)) return r;
  return kSuccess;
}

// cuTensorMapEncodeTiled: checks what the driver documents for the case emulated (2-D tiles,
// no interleave, element strides 1, zero fill out of range) and stores the parameters in the
// emulator's own format (abi.inc's GzEmuTensorMap), which the kernels' gz_tma_load_2d reads.
int tensorMapEncodeTiled(void* tensorMap, int dataType, uint32_t rank, void* globalAddress, const uint64_t* globalDim,
                         const uint64_t* globalStrides, const uint32_t* boxDim, const uint32_t* elementStrides,
                         int interleave, int swizzle, int l2Promotion, int oobFill) {
  auto bad = [](const std::string& why) { return fail(kInvalidValue, "cuTensorMapEncodeTiled: " + why); };
  if (gConfig.major < 9) return bad("tensor maps need compute capability 9.0");
  // CUtensorMapDataType's element sizes: UINT8, UINT16, UINT32, INT32, UINT64, INT64, FLOAT16,
  // FLOAT32, FLOAT64, BFLOAT16, FLOAT32_FTZ, TFLOAT32, TFLOAT32_FTZ.
  static const unsigned kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  if (dataType < 0 || dataType >= 13) return bad("data type " + std::to_string(dataType) + " is not emulated");
  if (rank != 2) return bad("rank " + std::to_string(rank) + ": the emulator's tensor maps are 2-D");
  if (reinterpret_cast<uintptr_t>(tensorMap) % 64) return bad("the tensor map is not 64-byte aligned");
  const uint64_t address = reinterpret_cast<uintptr_t>(globalAddress), e = kBytes[dataType];
  if (address % 16) return bad("globalAddress is not 16-byte aligned");
  for (int i = 0; i < 2; ++i) {
    if (globalDim[i] == 0 || globalDim[i] > (1ull << 32)) return bad("globalDim is outside [1, 2^32]");
    if (boxDim[i] == 0 || boxDim[i] > 256) return bad("boxDim is outside [1, 256]");
    if (elementStrides[i] != 1) return bad("element strides other than 1 are not emulated");
  }
  if (globalStrides[0] % 16 || globalStrides[0] >= (1ull << 40)) return bad("globalStrides[0] is not a multiple of 16 below 2^40");
  if (boxDim[0] * e % 16) return bad("boxDim[0] times the element size is not a multiple of 16 bytes");
  if (interleave != 0) return bad("interleaved layouts are not emulated");
  if (swizzle < 0 || swizzle > 3) return bad("swizzle " + std::to_string(swizzle) + " is not a CUtensorMapSwizzle");
  const unsigned swizzleBytes = swizzle == 0 ? 0 : 16u << swizzle;  // 32, 64, 128
  if (swizzleBytes && boxDim[0] * e > swizzleBytes) return bad("the box's inner dimension is wider than the swizzle");
  if (l2Promotion < 0 || l2Promotion > 3) return bad("l2Promotion is not a CUtensorMapL2promotion");
  if (oobFill != 0) return bad("only CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE (zeros) is emulated");
  if (!inDevice(address, (globalDim[1] - 1) * globalStrides[0] + globalDim[0] * e))
    return bad("the tensor is not inside one device allocation");
  GzEmuTensorMap m{};
  m.magic = GzEmuTensorMap::kMagic;
  m.address = address;
  m.rows = globalDim[1];
  m.cols = globalDim[0];
  m.rowStride = globalStrides[0];
  m.boxRows = boxDim[1];
  m.boxCols = boxDim[0];
  m.elementBytes = static_cast<unsigned>(e);
  m.swizzleBytes = swizzleBytes;
  static_assert(sizeof m <= 128, "a CUtensorMap is 128 bytes");
  std::memset(tensorMap, 0, 128);
  std::memcpy(tensorMap, &m, sizeof m);
  return kSuccess;
}

int getErrorName(int error, const char** name) {
  switch (error) {
    case kSuccess: *name = "CUDA_SUCCESS"; break;
    case kInvalidValue: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case kOutOfMemory: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case kInvalidImage: *name = "CUDA_ERROR_INVALID_IMAGE"; break;
    case kIllegalState: *name = "CUDA_ERROR_ILLEGAL_STATE"; break;
    case kCaptureUnsupported: *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case kCaptureInvalidated: *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case kCaptureWrongThread: *name = "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"; break;
    case kNotFound: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case kNotReady: *name = "CUDA_ERROR_NOT_READY"; break;
    case kLaunchFailed: *name = "CUDA_ERROR_LAUNCH_FAILED"; break;
    default: *name = "CUDA_ERROR_UNKNOWN";
  }
  return kSuccess;
}
int getErrorString(int error, const char** text) {
  if (error == tLastCode && !tLastText.empty()) {
    *text = tLastText.c_str();
    return kSuccess;
  }
  switch (error) {
    case kSuccess: *text = "no error"; break;
    case kInvalidValue: *text = "invalid argument"; break;
    case kOutOfMemory: *text = "out of memory (the emulated device's memory size)"; break;
    case kInvalidImage: *text = "device kernel image is invalid"; break;
    case kIllegalState: *text = "the operation is not valid in the current state"; break;
    case kCaptureUnsupported: *text = "operation not permitted when stream is capturing"; break;
    case kCaptureInvalidated: *text = "operation failed due to a previous error during capture"; break;
    case kCaptureWrongThread: *text = "attempt to terminate a thread-local capture sequence from another thread"; break;
    case kNotFound: *text = "named symbol not found"; break;
    case kNotReady: *text = "device not ready"; break;
    case kLaunchFailed: *text = "unspecified launch failure"; break;
    default: *text = "unknown error";
  }
  return kSuccess;
}

// "8G", "512M", "1000000": bytes.
bool parseBytes(const char* text, uint64_t& out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || v <= 0) return false;
  double scale = 1;
  if (*end == 'K' || *end == 'k') scale = 1024.0, ++end;
  else if (*end == 'M' || *end == 'm') scale = 1024.0 * 1024, ++end;
  else if (*end == 'G' || *end == 'g') scale = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'i' || *end == 'B') ++end;
  if (*end == 'B') ++end;
  if (*end) return false;
  out = static_cast<uint64_t>(v * scale);
  return true;
}

}  // namespace

bool loadDriver(DriverApi& api, std::string& why) {
  if (const char* arch = std::getenv("GIZML_GPU_EMULATOR_ARCH"); arch && *arch) {
    const std::string a = arch;
    // 75 (Turing: no GIZML_HAVE_MMA) runs the kernels' plain paths, as AMD and older GPUs do.
    if (a == "75") gConfig = {7, 5, gConfig.memory, 65536};
    else if (a == "80") gConfig = {8, 0, gConfig.memory, 166912};
    else if (a == "89") gConfig = {8, 9, gConfig.memory, 101376};
    else if (a == "90") gConfig = {9, 0, gConfig.memory, 232448};
    else {
      why = "GIZML_GPU_EMULATOR_ARCH=" + a + ": the emulator knows 75, 80, 89 and 90";
      return false;
    }
  }
  int count = 1;
  if (const char* devices = std::getenv("GIZML_GPU_EMULATOR_DEVICES"); devices && *devices) {
    char* end = nullptr;
    const long n = std::strtol(devices, &end, 10);
    if (*end || n < 1 || n > 16) {
      why = std::string("GIZML_GPU_EMULATOR_DEVICES=") + devices + ": not a count of devices from 1 to 16";
      return false;
    }
    count = static_cast<int>(n);
  }
  std::vector<uint64_t> sizes(static_cast<size_t>(count), gConfig.memory);
  if (const char* memory = std::getenv("GIZML_GPU_EMULATOR_MEMORY"); memory && *memory) {
    std::vector<std::string> parts;
    for (std::string_view rest = memory;;) {
      const size_t comma = rest.find(',');
      parts.emplace_back(rest.substr(0, comma));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    const bool each = parts.size() == 1 || parts.size() == sizes.size();
    for (size_t i = 0; each && i < sizes.size(); ++i)
      if (!parseBytes(parts[parts.size() == 1 ? 0 : i].c_str(), sizes[i])) {
        why = std::string("GIZML_GPU_EMULATOR_MEMORY=") + memory + ": '" + parts[parts.size() == 1 ? 0 : i] +
              "' is not a size (bytes, or with K, M or G)";
        return false;
      }
    if (!each) {
      why = std::string("GIZML_GPU_EMULATOR_MEMORY=") + memory + ": one size, or one per device (" +
            std::to_string(count) + ")";
      return false;
    }
  }
  // CUDA_VISIBLE_DEVICES as the CUDA driver reads it: the devices listed, in that order; the
  // list ends at the first entry that is no device's index (or repeats one); set but empty: none.
  std::vector<int> visible;
  if (const char* list = std::getenv("CUDA_VISIBLE_DEVICES")) {
    for (std::string_view rest = list; !rest.empty();) {
      const size_t comma = rest.find(',');
      const std::string entry(rest.substr(0, comma));
      char* end = nullptr;
      const long index = std::strtol(entry.c_str(), &end, 10);
      if (entry.empty() || *end || index < 0 || index >= count ||
          std::find(visible.begin(), visible.end(), index) != visible.end())
        break;
      visible.push_back(static_cast<int>(index));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  } else {
    for (int i = 0; i < count; ++i) visible.push_back(i);
  }
  gDevices.clear();
  for (int physical : visible) gDevices.push_back({physical, sizes[static_cast<size_t>(physical)], 0});
  api.vendor = Vendor::Nvidia;
  api.library = "gizml GPU emulator";
  api.dl = nullptr;
  api.emulator = true;
  api.hostCompilerVersion = compilerVersion;
  api.hostCompile = compile;
  api.prefix = "cuda";  // an NVIDIA device as far as naming goes: cuda:0
  api.init = init;
  api.driverGetVersion = driverGetVersion;
  api.deviceGetCount = deviceGetCount;
  api.deviceGet = deviceGet;
  api.deviceGetName = deviceGetName;
  api.deviceGetAttribute = deviceGetAttribute;
  api.deviceTotalMem = deviceTotalMem;
  api.primaryCtxRetain = primaryCtxRetain;
  api.primaryCtxRelease = primaryCtxRelease;
  api.ctxSetCurrent = ctxSetCurrent;
  api.moduleLoadData = moduleLoadData;
  api.moduleUnload = moduleUnload;
  api.moduleGetFunction = moduleGetFunction;
  api.funcSetAttribute = funcSetAttribute;
  api.launchKernel = launchKernel;
  api.memAlloc = memAlloc;
  api.memFree = memFree;
  api.memGetInfo = memGetInfo;
  api.memHostAlloc = memHostAlloc;
  api.memFreeHost = memFreeHost;
  api.memcpyHtoDAsync = memcpyHtoD;
  api.memcpyDtoHAsync = memcpyDtoH;
  api.memcpyDtoDAsync = memcpyDtoD;
  api.memsetD8Async = memsetD8;
  api.streamCreate = streamCreate;
  api.streamDestroy = streamDestroy;
  api.streamSynchronize = streamSynchronize;
  api.eventCreate = eventCreate;
  api.eventDestroy = eventDestroy;
  api.eventRecord = eventRecord;
  api.eventSynchronize = eventSynchronize;
  api.eventElapsedTime = eventElapsedTime;
  api.getErrorName = getErrorName;
  api.getErrorString = getErrorString;
  api.tensorMapEncodeTiled = tensorMapEncodeTiled;
  api.streamBeginCapture = streamBeginCapture;
  api.streamEndCapture = streamEndCapture;
  api.graphInstantiate = graphInstantiate;
  api.graphLaunch = graphLaunch;
  api.graphExecDestroy = graphDestroy;
  api.graphDestroy = graphDestroy;
  // GIZML_GPU_EMULATOR_PARAM_INFO=0: no cuFuncGetParamInfo, as HIP's runtime has none (a step is
  // recorded with the launchers' argument sizes).
  const char* paramInfo = std::getenv("GIZML_GPU_EMULATOR_PARAM_INFO");
  api.funcGetParamInfo = paramInfo && std::string(paramInfo) == "0" ? nullptr : funcGetParamInfo;
  // The attribute and flag numbers are CUDA's (DriverApi's defaults); the error code is ours.
  api.errorOutOfMemory = kOutOfMemory;
  return true;
}

namespace {

// A program that links the emulator gets it when GIZML_GPU_EMULATOR asks (docs/architecture.md).
[[maybe_unused]] const bool gInstalled = (installEmulator(loadDriver), true);

}  // namespace

}  // namespace gizhw::gpu::emulator
