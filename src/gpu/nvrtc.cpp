// Run-time compilation: NVRTC (or hipRTC on AMD) loaded with dlopen. Kernels compile for the
// device's exact architecture (sm_90a on compute capability 9.0), with IEEE division and square
// root and no fused multiply-add contraction, so that the GPU rounds as the CPU does.
#include <dlfcn.h>

#include <mutex>

#include "gpu/device.h"
#include "gpu/dynamic_library.h"

namespace gizhw::gpu {
namespace {

// NVRTC and hipRTC have the same shapes for what we call.
struct RtcApi {
  bool hip = false;
  std::string library;
  int major = 0, minor = 0;
  int (*createProgram)(void** program, const char* source, const char* name, int headers, const char* const* sources,
                       const char* const* names) = nullptr;
  int (*compileProgram)(void* program, int options, const char* const* values) = nullptr;
  int (*getLogSize)(void* program, size_t* bytes) = nullptr;
  int (*getLog)(void* program, char* log) = nullptr;
  int (*getPtxSize)(void* program, size_t* bytes) = nullptr;
  int (*getPtx)(void* program, char* ptx) = nullptr;
  int (*getCubinSize)(void* program, size_t* bytes) = nullptr;
  int (*getCubin)(void* program, char* cubin) = nullptr;
  int (*destroyProgram)(void** program) = nullptr;
  const char* (*getErrorString)(int result) = nullptr;
  int (*version)(int* major, int* minor) = nullptr;
};

bool loadNvrtc(RtcApi& api, std::string& why) {
  void* dl = openFirst({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
                        "/usr/local/cuda/lib64/libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"},
                       api.library);
  if (!dl) {
    why = "NVRTC not found (tried libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so and /usr/local/cuda/lib64): install "
          "the CUDA toolkit's NVRTC to run kernels on NVIDIA GPUs";
    return false;
  }
  std::string missing;
  bind(dl, api.createProgram, "nvrtcCreateProgram", missing);
  bind(dl, api.compileProgram, "nvrtcCompileProgram", missing);
  bind(dl, api.getLogSize, "nvrtcGetProgramLogSize", missing);
  bind(dl, api.getLog, "nvrtcGetProgramLog", missing);
  bind(dl, api.getPtxSize, "nvrtcGetPTXSize", missing);
  bind(dl, api.getPtx, "nvrtcGetPTX", missing);
  bind(dl, api.getCubinSize, "nvrtcGetCUBINSize", missing);
  bind(dl, api.getCubin, "nvrtcGetCUBIN", missing);
  bind(dl, api.destroyProgram, "nvrtcDestroyProgram", missing);
  bind(dl, api.getErrorString, "nvrtcGetErrorString", missing);
  bind(dl, api.version, "nvrtcVersion", missing);
  if (!missing.empty()) {
    why = api.library + " lacks " + missing;
    dlclose(dl);
    return false;
  }
  api.version(&api.major, &api.minor);
  return true;
}

bool loadHiprtc(RtcApi& api, std::string& why) {
  // ROCm 6 and later ship hipRTC as libhiprtc; ROCm 5 (Debian 12's) keeps it in the HIP runtime.
  void* dl = openFirst({"libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.7", "/opt/rocm/lib/libhiprtc.so",
                        "libamdhip64.so.5", "libamdhip64.so"},
                       api.library);
  if (!dl) {
    why = "hipRTC not found (libhiprtc.so, or libamdhip64.so.5 of ROCm 5): install ROCm's hipRTC to run kernels on AMD "
          "GPUs";
    return false;
  }
  std::string missing;
  bind(dl, api.createProgram, "hiprtcCreateProgram", missing);
  bind(dl, api.compileProgram, "hiprtcCompileProgram", missing);
  bind(dl, api.getLogSize, "hiprtcGetProgramLogSize", missing);
  bind(dl, api.getLog, "hiprtcGetProgramLog", missing);
  bind(dl, api.getCubinSize, "hiprtcGetCodeSize", missing);
  bind(dl, api.getCubin, "hiprtcGetCode", missing);
  bind(dl, api.destroyProgram, "hiprtcDestroyProgram", missing);
  bind(dl, api.getErrorString, "hiprtcGetErrorString", missing);
  bind(dl, api.version, "hiprtcVersion", missing);
  if (!missing.empty()) {
    why = api.library + " lacks " + missing;
    dlclose(dl);
    return false;
  }
  api.hip = true;
  api.version(&api.major, &api.minor);
  return true;
}

const RtcApi& rtc(Vendor vendor) {
  static std::mutex m;
  static RtcApi apis[2];
  static bool tried[2] = {false, false};
  static std::string why[2];
  static bool ok[2] = {false, false};
  const int i = vendor == Vendor::Nvidia ? 0 : 1;
  std::lock_guard<std::mutex> lock(m);
  if (!tried[i]) {
    tried[i] = true;
    ok[i] = i == 0 ? loadNvrtc(apis[0], why[0]) : loadHiprtc(apis[1], why[1]);
  }
  if (!ok[i]) throw Error(why[i]);
  return apis[i];
}

// One compilation: PTX and/or machine code. `target` is an NVRTC architecture option value.
Compiled compile(const RtcApi& api, const std::string& source, const std::string& target, bool wantPtx, bool wantCode) {
  void* program = nullptr;
  int r = api.createProgram(&program, source.c_str(), "gizml_kernel.cu", 0, nullptr, nullptr);
  if (r != 0) throw Error(std::string("nvrtcCreateProgram failed: ") + api.getErrorString(r));
  std::vector<std::string> options;
  if (api.hip) {
    options = {"-std=c++17", "-O3", "-ffp-contract=off", "-DGIZML_HIP=1"};
    if (!target.empty()) options.push_back("--offload-arch=" + target);
  } else {
    options = {"--gpu-architecture=" + target, "-std=c++17", "--fmad=false", "--prec-div=true", "--prec-sqrt=true",
               "--ftz=false", "-DGIZML_CUDA=1"};
  }
  std::vector<const char*> values;
  for (const auto& o : options) values.push_back(o.c_str());
  r = api.compileProgram(program, static_cast<int>(values.size()), values.data());
  Compiled out;
  size_t logBytes = 0;
  api.getLogSize(program, &logBytes);
  if (logBytes > 1) {
    out.log.resize(logBytes);
    api.getLog(program, out.log.data());
    out.log.resize(logBytes - 1);
  }
  if (r != 0) {
    api.destroyProgram(&program);
    // The first lines of the source help to find the failing kernel.
    throw Error(std::string(api.hip ? "hipRTC" : "NVRTC") + " failed to compile for " + target + " (" +
                api.getErrorString(r) + "):\n" + out.log + "\n--- source ---\n" + source.substr(0, 4000));
  }
  if (wantPtx && api.getPtx) {
    size_t bytes = 0;
    api.getPtxSize(program, &bytes);
    out.ptx.resize(bytes);
    api.getPtx(program, out.ptx.data());
    if (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }
  if (wantCode) {
    size_t bytes = 0;
    api.getCubinSize(program, &bytes);
    out.cubin.resize(bytes);
    api.getCubin(program, out.cubin.data());
  }
  api.destroyProgram(&program);
  return out;
}

}  // namespace

bool nvrtcAvailable(std::string* version, std::string* why) {
  try {
    const RtcApi& api = rtc(Vendor::Nvidia);
    if (version) *version = std::to_string(api.major) + "." + std::to_string(api.minor);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

Compiled compileCuda(const std::string& source, const std::string& arch, bool wantCubin) {
  const RtcApi& api = rtc(Vendor::Nvidia);
  // PTX comes from a virtual architecture (compute_XY); machine code from the real one.
  std::string virtualArch = arch;
  if (virtualArch.rfind("sm_", 0) == 0) virtualArch = "compute_" + virtualArch.substr(3);
  Compiled out = compile(api, source, virtualArch, true, false);
  if (wantCubin) out.cubin = compile(api, source, arch, false, true).cubin;
  return out;
}

bool hiprtcAvailable(std::string* version, std::string* why) {
  try {
    const RtcApi& api = rtc(Vendor::Amd);
    if (version) *version = std::to_string(api.major) + "." + std::to_string(api.minor);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

std::vector<char> compileHip(const std::string& source, const std::string& arch) {
  return compile(rtc(Vendor::Amd), source, arch, false, true).cubin;
}

std::string compilerVersion(Vendor vendor) {
  const RtcApi& api = rtc(vendor);
  return std::string(api.hip ? "hiprtc " : "nvrtc ") + std::to_string(api.major) + "." + std::to_string(api.minor);
}

std::vector<char> compileForDevice(const std::string& source, const Properties& properties, std::string& version) {
  const RtcApi& api = rtc(properties.vendor);
  version = compilerVersion(properties.vendor);
  if (api.hip) return compile(api, source, "", false, true).cubin;
  return compile(api, source, properties.arch, false, true).cubin;
}

}  // namespace gizhw::gpu
