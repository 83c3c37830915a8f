#pragma once
// Our own declarations of the GPU driver entry points we use, so that no CUDA or ROCm header or
// library is needed to build. Both drivers fill the same table: the CUDA driver API
// (libcuda.so.1) and the HIP runtime (libamdhip64.so) have the same shape for what we call.
// Handles are opaque pointers, device addresses 64-bit integers, results ints (0 = success).
#include <gizhw/gpu.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gizhw::gpu {

using DevicePtr = uint64_t;  // CUdeviceptr / hipDeviceptr_t
using Handle = void*;        // CUcontext, CUmodule, CUfunction, CUstream, CUevent (and HIP's)

struct DriverApi {
  Vendor vendor = Vendor::Nvidia;
  std::string library;  // the file dlopen found
  void* dl = nullptr;
  bool emulator = false;  // the host GPU emulator (src/gpu/emulator): kernels compile with the host compiler
  // The emulator's compiler (set with `emulator`): its identity for the kernel cache key, and the
  // image of a kernel source for the emulated device.
  std::string (*hostCompilerVersion)() = nullptr;
  std::vector<char> (*hostCompile)(const std::string& source, const Properties& properties) = nullptr;

  int (*init)(unsigned flags) = nullptr;
  int (*driverGetVersion)(int* version) = nullptr;
  int (*deviceGetCount)(int* count) = nullptr;
  int (*deviceGet)(int* device, int ordinal) = nullptr;
  int (*deviceGetName)(char* name, int length, int device) = nullptr;
  int (*deviceGetAttribute)(int* value, int attribute, int device) = nullptr;
  int (*deviceTotalMem)(size_t* bytes, int device) = nullptr;
  // CUDA: the device's primary context; HIP: set the device (no contexts needed).
  int (*primaryCtxRetain)(Handle* context, int device) = nullptr;
  int (*primaryCtxRelease)(int device) = nullptr;
  int (*ctxSetCurrent)(Handle context) = nullptr;
  int (*setDevice)(int device) = nullptr;  // HIP only
  int (*moduleLoadData)(Handle* module, const void* image) = nullptr;
  int (*moduleUnload)(Handle module) = nullptr;
  int (*moduleGetFunction)(Handle* function, Handle module, const char* name) = nullptr;
  int (*funcSetAttribute)(Handle function, int attribute, int value) = nullptr;
  int (*launchKernel)(Handle function, unsigned gridX, unsigned gridY, unsigned gridZ, unsigned blockX,
                      unsigned blockY, unsigned blockZ, unsigned sharedBytes, Handle stream, void** params,
                      void** extra) = nullptr;
  int (*memAlloc)(DevicePtr* address, size_t bytes) = nullptr;
  int (*memFree)(DevicePtr address) = nullptr;
  int (*memGetInfo)(size_t* free, size_t* total) = nullptr;
  int (*memHostAlloc)(void** pointer, size_t bytes, unsigned flags) = nullptr;
  int (*memFreeHost)(void* pointer) = nullptr;
  int (*memcpyHtoDAsync)(DevicePtr dst, const void* src, size_t bytes, Handle stream) = nullptr;
  int (*memcpyDtoHAsync)(void* dst, DevicePtr src, size_t bytes, Handle stream) = nullptr;
  int (*memcpyDtoDAsync)(DevicePtr dst, DevicePtr src, size_t bytes, Handle stream) = nullptr;
  int (*memsetD8Async)(DevicePtr dst, unsigned char value, size_t bytes, Handle stream) = nullptr;
  int (*streamCreate)(Handle* stream, unsigned flags) = nullptr;
  int (*streamDestroy)(Handle stream) = nullptr;
  int (*streamSynchronize)(Handle stream) = nullptr;
  int (*eventCreate)(Handle* event, unsigned flags) = nullptr;
  int (*eventDestroy)(Handle event) = nullptr;
  int (*eventRecord)(Handle event, Handle stream) = nullptr;
  int (*eventSynchronize)(Handle event) = nullptr;
  int (*eventElapsedTime)(float* milliseconds, Handle start, Handle end) = nullptr;
  int (*getErrorName)(int error, const char** name) = nullptr;    // CUDA style (HIP adapted)
  int (*getErrorString)(int error, const char** text) = nullptr;
  // cuTensorMapEncodeTiled (CUDA 12+, compute capability 9.0+): fills the 128-byte CUtensorMap a
  // TMA copy reads; the enums (CUtensorMapDataType, ...) are ints. Optional: null when the driver
  // lacks it, and on HIP.
  int (*tensorMapEncodeTiled)(void* tensorMap, int dataType, uint32_t rank, void* globalAddress,
                              const uint64_t* globalDim, const uint64_t* globalStrides, const uint32_t* boxDim,
                              const uint32_t* elementStrides, int interleave, int swizzle, int l2Promotion,
                              int oobFill) = nullptr;

  // Stream capture into graphs (CUDA 11.4+, HIP 5.3+): cuStreamBeginCapture_v2, cuStreamEndCapture,
  // cuGraphInstantiateWithFlags, cuGraphLaunch and their destroy calls; handles are CUgraph and
  // CUgraphExec. Optional, all or none: null when the driver lacks one (work then runs uncaptured).
  int (*streamBeginCapture)(Handle stream, int mode) = nullptr;
  int (*streamEndCapture)(Handle stream, Handle* graph) = nullptr;
  int (*graphInstantiate)(Handle* exec, Handle graph, unsigned long long flags) = nullptr;
  int (*graphLaunch)(Handle exec, Handle stream) = nullptr;
  int (*graphExecDestroy)(Handle exec) = nullptr;
  int (*graphDestroy)(Handle graph) = nullptr;
  // cuFuncGetParamInfo (CUDA 12.4+): the size (and offset) of a kernel's parameter `index`, so
  // that a recorded step can compare a launch's arguments with the recording's. Optional: null
  // without it (and on HIP), when steps are not recorded (StepGraph).
  int (*funcGetParamInfo)(Handle function, size_t index, size_t* offset, size_t* size) = nullptr;

  // The vendor's numbers for what we ask; the defaults are cuda.h's (HIP sets its own).
  int attrComputeMajor = 75, attrComputeMinor = 76, attrMultiprocessors = 16, attrL2Bytes = 38,
      attrWarpSize = 10, attrSharedOptin = 97;
  int funcAttrMaxDynamicShared = 8;
  int errorOutOfMemory = 2;
  unsigned streamNonBlocking = 1, hostAllocPortable = 1;
  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL (hipStreamCaptureModeThreadLocal): an unsafe call (an
  // allocation, a synchronisation) on the capturing thread is an error; other threads are free.
  int captureThreadLocal = 1;
  // CU_STREAM_CAPTURE_MODE_RELAXED: nothing is refused (a StepGraph's allocations may reach the
  // driver while it records; its own checks refuse what a recording cannot hold).
  int captureRelaxed = 2;
  const char* prefix = "cuda";  // how devices are named: cuda:0, hip:0
};

/// Binds the graph calls from `dl` under `names` (begin, end, instantiate, launch, exec destroy,
/// destroy), all or none (dynamic_library.h's lookups).
void bindGraphCalls(void* dl, DriverApi& api, const char* const (&names)[6]);

/// The loaded driver of either vendor (NVIDIA first), or null when neither is found or its init
/// fails. Loaded once; `why` receives what was tried.
const DriverApi* driver(std::string* why = nullptr);

/// Loaders of each vendor's table (cuda_driver.cpp, hip_driver.cpp): false when not found.
bool loadCudaDriver(DriverApi& api, std::string& why);
bool loadHipDriver(DriverApi& api, std::string& why);

/// The host GPU emulator's loader: false (with why) when its configuration is bad. The emulator
/// (src/gpu/emulator) is a target of its own, outside libgizml; linking it installs its loader
/// at static initialisation, and GIZML_GPU_EMULATOR=1 then makes driver() load it.
using DriverLoader = bool (*)(DriverApi& api, std::string& why);
void installEmulator(DriverLoader load);

/// Throws gizml::Error naming the call, the driver's error name and message, unless result is 0.
void checkDriver(const DriverApi& api, int result, const char* call);
/// The driver's "NAME: message" for an error code.
std::string driverErrorText(const DriverApi& api, int result);

}  // namespace gizhw::gpu
