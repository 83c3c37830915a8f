#pragma once
// dlopen and dlsym for the libraries found at run time (the CUDA driver, HIP, NVRTC, hipRTC):
// nothing of theirs is linked at build time, so the same binary runs without them.
#include <dlfcn.h>

#include <initializer_list>
#include <string>

namespace gizhw::gpu {

/// The first of `names` that dlopen loads (its name in `found`), or nullptr.
inline void* openFirst(std::initializer_list<const char*> names, std::string& found) {
  for (const char* name : names) {
    if (void* dl = dlopen(name, RTLD_NOW | RTLD_LOCAL)) {
      found = name;
      return dl;
    }
  }
  return nullptr;
}

/// slot = the symbol `name` of dl; a missing one is appended to `missing` (", "-separated).
template <class F>
bool bind(void* dl, F& slot, const char* name, std::string& missing) {
  slot = reinterpret_cast<F>(dlsym(dl, name));
  if (!slot) missing += std::string(missing.empty() ? "" : ", ") + name;
  return slot != nullptr;
}

}  // namespace gizhw::gpu
