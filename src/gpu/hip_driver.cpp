// The AMD HIP runtime, loaded from libamdhip64.so with dlopen, adapted to the driver table's
// shapes. Untested on AMD hardware (README): the attribute numbers are hip_runtime_api.h's.
#include <dlfcn.h>

#include "gpu/driver_api.h"
#include "gpu/dynamic_library.h"

namespace gizhw::gpu {
namespace {

// HIP calls whose shapes differ from the table's, kept here and wrapped below.
const char* (*hipGetErrorNameRaw)(int) = nullptr;
const char* (*hipGetErrorStringRaw)(int) = nullptr;
int (*hipSetDeviceRaw)(int) = nullptr;

int errorName(int error, const char** name) {
  *name = hipGetErrorNameRaw(error);
  return 0;
}
int errorString(int error, const char** text) {
  *text = hipGetErrorStringRaw(error);
  return 0;
}
// HIP needs no context: "retaining" one selects the device for the calling thread.
int retain(Handle* context, int device) {
  *context = reinterpret_cast<Handle>(static_cast<intptr_t>(device) + 1);
  return hipSetDeviceRaw(device);
}
int release(int) { return 0; }
int setCurrent(Handle context) { return hipSetDeviceRaw(static_cast<int>(reinterpret_cast<intptr_t>(context) - 1)); }

}  // namespace

bool loadHipDriver(DriverApi& api, std::string& why) {
  void* dl = openFirst({"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7", "/opt/rocm/lib/libamdhip64.so"},
                       api.library);
  if (!dl) {
    why += "libamdhip64.so not found";
    return false;
  }
  std::string missing;
  bind(dl, api.init, "hipInit", missing);
  bind(dl, api.driverGetVersion, "hipDriverGetVersion", missing);
  bind(dl, api.deviceGetCount, "hipGetDeviceCount", missing);
  bind(dl, api.deviceGet, "hipDeviceGet", missing);
  bind(dl, api.deviceGetName, "hipDeviceGetName", missing);
  bind(dl, api.deviceGetAttribute, "hipDeviceGetAttribute", missing);
  bind(dl, api.deviceTotalMem, "hipDeviceTotalMem", missing);
  bind(dl, hipSetDeviceRaw, "hipSetDevice", missing);
  bind(dl, api.moduleLoadData, "hipModuleLoadData", missing);
  bind(dl, api.moduleUnload, "hipModuleUnload", missing);
  bind(dl, api.moduleGetFunction, "hipModuleGetFunction", missing);
  bind(dl, api.launchKernel, "hipModuleLaunchKernel", missing);
  bind(dl, api.memAlloc, "hipMalloc", missing);
  bind(dl, api.memFree, "hipFree", missing);
  bind(dl, api.memGetInfo, "hipMemGetInfo", missing);
  bind(dl, api.memHostAlloc, "hipHostMalloc", missing);
  bind(dl, api.memFreeHost, "hipHostFree", missing);
  bind(dl, api.memcpyHtoDAsync, "hipMemcpyHtoDAsync", missing);
  bind(dl, api.memcpyDtoHAsync, "hipMemcpyDtoHAsync", missing);
  bind(dl, api.memcpyDtoDAsync, "hipMemcpyDtoDAsync", missing);
  bind(dl, api.memsetD8Async, "hipMemsetD8Async", missing);
  bind(dl, api.streamCreate, "hipStreamCreateWithFlags", missing);
  bind(dl, api.streamDestroy, "hipStreamDestroy", missing);
  bind(dl, api.streamSynchronize, "hipStreamSynchronize", missing);
  bind(dl, api.eventCreate, "hipEventCreateWithFlags", missing);
  bind(dl, api.eventDestroy, "hipEventDestroy", missing);
  bind(dl, api.eventRecord, "hipEventRecord", missing);
  bind(dl, api.eventSynchronize, "hipEventSynchronize", missing);
  bind(dl, api.eventElapsedTime, "hipEventElapsedTime", missing);
  bind(dl, hipGetErrorNameRaw, "hipGetErrorName", missing);
  bind(dl, hipGetErrorStringRaw, "hipGetErrorString", missing);
  if (!missing.empty()) {
    why += api.library + " lacks " + missing;
    dlclose(dl);
    return false;
  }
  bindGraphCalls(dl, api, {"hipStreamBeginCapture", "hipStreamEndCapture", "hipGraphInstantiateWithFlags",
                           "hipGraphLaunch", "hipGraphExecDestroy", "hipGraphDestroy"});
  api.captureThreadLocal = 1;  // hipStreamCaptureModeThreadLocal
  api.primaryCtxRetain = retain;
  api.primaryCtxRelease = release;
  api.ctxSetCurrent = setCurrent;
  api.setDevice = hipSetDeviceRaw;
  api.getErrorName = errorName;
  api.getErrorString = errorString;
  api.funcSetAttribute = nullptr;  // module functions take their shared memory as launched
  api.vendor = Vendor::Amd;
  api.dl = dl;
  api.prefix = "hip";
  // hipDeviceAttribute_t (ROCm 6): ComputeCapabilityMajor 23, Minor 61, MultiprocessorCount 63,
  // L2CacheSize 19, WarpSize 87, SharedMemPerBlockOptin 75.
  api.attrComputeMajor = 23;
  api.attrComputeMinor = 61;
  api.attrMultiprocessors = 63;
  api.attrL2Bytes = 19;
  api.attrWarpSize = 87;
  api.attrSharedOptin = 75;
  api.errorOutOfMemory = 2;  // hipErrorOutOfMemory
  api.streamNonBlocking = 1;  // hipStreamNonBlocking
  api.hostAllocPortable = 1;  // hipHostMallocPortable
  return true;
}

}  // namespace gizhw::gpu
