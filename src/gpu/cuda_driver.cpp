// The NVIDIA driver API, loaded from libcuda.so.1 with dlopen. The versioned names (_v2) are the
// ones cuda.h maps the plain names to.
#include "gpu/driver_api.h"
#include "gpu/dynamic_library.h"

namespace gizhw::gpu {

bool loadCudaDriver(DriverApi& api, std::string& why) {
  void* dl = openFirst({"libcuda.so.1", "libcuda.so"}, api.library);
  if (!dl) {
    why += "libcuda.so.1 not found";
    return false;
  }
  std::string missing;
  bind(dl, api.init, "cuInit", missing);
  bind(dl, api.driverGetVersion, "cuDriverGetVersion", missing);
  bind(dl, api.deviceGetCount, "cuDeviceGetCount", missing);
  bind(dl, api.deviceGet, "cuDeviceGet", missing);
  bind(dl, api.deviceGetName, "cuDeviceGetName", missing);
  bind(dl, api.deviceGetAttribute, "cuDeviceGetAttribute", missing);
  bind(dl, api.deviceTotalMem, "cuDeviceTotalMem_v2", missing);
  bind(dl, api.primaryCtxRetain, "cuDevicePrimaryCtxRetain", missing);
  bind(dl, api.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", missing);
  bind(dl, api.ctxSetCurrent, "cuCtxSetCurrent", missing);
  bind(dl, api.moduleLoadData, "cuModuleLoadData", missing);
  bind(dl, api.moduleUnload, "cuModuleUnload", missing);
  bind(dl, api.moduleGetFunction, "cuModuleGetFunction", missing);
  bind(dl, api.funcSetAttribute, "cuFuncSetAttribute", missing);
  bind(dl, api.launchKernel, "cuLaunchKernel", missing);
  bind(dl, api.memAlloc, "cuMemAlloc_v2", missing);
  bind(dl, api.memFree, "cuMemFree_v2", missing);
  bind(dl, api.memGetInfo, "cuMemGetInfo_v2", missing);
  bind(dl, api.memHostAlloc, "cuMemHostAlloc", missing);
  bind(dl, api.memFreeHost, "cuMemFreeHost", missing);
  bind(dl, api.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", missing);
  bind(dl, api.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", missing);
  bind(dl, api.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", missing);
  bind(dl, api.memsetD8Async, "cuMemsetD8Async", missing);
  bind(dl, api.streamCreate, "cuStreamCreate", missing);
  bind(dl, api.streamDestroy, "cuStreamDestroy_v2", missing);
  bind(dl, api.streamSynchronize, "cuStreamSynchronize", missing);
  bind(dl, api.eventCreate, "cuEventCreate", missing);
  bind(dl, api.eventDestroy, "cuEventDestroy_v2", missing);
  bind(dl, api.eventRecord, "cuEventRecord", missing);
  bind(dl, api.eventSynchronize, "cuEventSynchronize", missing);
  bind(dl, api.eventElapsedTime, "cuEventElapsedTime", missing);
  bind(dl, api.getErrorName, "cuGetErrorName", missing);
  bind(dl, api.getErrorString, "cuGetErrorString", missing);
  if (!missing.empty()) {
    why += std::string(api.library) + " lacks " + missing;
    dlclose(dl);
    return false;
  }
  // Optional: drivers before CUDA 12 have no tensor maps (tensorMap2d then says so), before 11.4
  // no graph instantiation with flags (steps then run uncaptured).
  api.tensorMapEncodeTiled = reinterpret_cast<decltype(api.tensorMapEncodeTiled)>(dlsym(dl, "cuTensorMapEncodeTiled"));
  api.funcGetParamInfo = reinterpret_cast<decltype(api.funcGetParamInfo)>(dlsym(dl, "cuFuncGetParamInfo"));
  bindGraphCalls(dl, api, {"cuStreamBeginCapture_v2", "cuStreamEndCapture", "cuGraphInstantiateWithFlags",
                           "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy"});
  api.vendor = Vendor::Nvidia;
  api.dl = dl;
  api.prefix = "cuda";
  // cuda.h's numbers (CU_DEVICE_ATTRIBUTE_*, CU_FUNC_ATTRIBUTE_*, CUDA_ERROR_OUT_OF_MEMORY) are
  // DriverApi's defaults.
  return true;
}

}  // namespace gizhw::gpu
