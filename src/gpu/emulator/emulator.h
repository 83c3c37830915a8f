#pragma once
// The host GPU emulator (GIZML_GPU_EMULATOR=1): a driver table whose "GPU" runs the CUDA kernel
// sources on the host. Kernels are compiled by the host compiler with a prelude of CUDA's
// built-ins (compile.cpp), loaded with dlopen, and run block after block with every CUDA thread
// a fiber (runner.cpp); memory is host memory, streams run work at once (emulator_driver.cpp).
// docs/architecture.md, "The GPU emulator", says what it checks and what it cannot.
#include <string>
#include <vector>

#include "gpu/driver_api.h"

namespace gizhw::gpu::emulator {

/// Fills `api` with the emulator's driver; false (with why) when the configuration is bad.
/// Installed as the runtime's emulator (installEmulator) by linking this target.
bool loadDriver(DriverApi& api, std::string& why);

/// The compiler's identity for the kernel cache key ("emulator g++ (Debian 12.2.0-14) 12.2.0").
std::string compilerVersion();
/// The shared object (bytes) of a kernel source for the emulated device of `properties`: the
/// prelude, the source with its __shared__ declarations rewritten, a trampoline per kernel.
/// A compile error is a gizml::Error with the compiler's first lines.
std::vector<char> compile(const std::string& source, const Properties& properties);

/// The rewritten source (without the prelude), its kernels' names and, when asked, each one's
/// __launch_bounds__ thread limit (an expression; empty when none): exposed for the tests.
std::string translate(const std::string& source, std::vector<std::string>& kernels,
                      std::vector<std::string>* launchBounds = nullptr);

// Sizes the prelude and the runner agree on.
constexpr unsigned kDynamicSharedBytes = 232448;     // the most any architecture opts in to (9.0)
constexpr unsigned kStaticSharedBytes = 1u << 20;    // the arena (a launch may use at most 48 KB)
constexpr unsigned kStaticSharedLimit = 48 * 1024;   // CUDA's limit on static __shared__ memory
constexpr unsigned kDynamicSharedOffset = 1u << 20;  // shared offsets of dynamic memory start here
// Swizzled shared memory (wgmma's descriptors) works on absolute address bits, so both regions
// start on 1024 bytes (the largest swizzle's repeat), as `extern __shared__ __align__(1024)` does
// on a GPU; the static arena starts at offset 0 and the prelude aligns both buffers to 1024.
// A wgmma descriptor holds address bits [4, 18): the dynamic region's base is a multiple of 2^18,
// so those bits are the offset into the dynamic buffer (which is smaller than 2^18 bytes).
static_assert(kDynamicSharedOffset % (1u << 18) == 0 && kDynamicSharedBytes <= (1u << 18) &&
              kStaticSharedBytes <= kDynamicSharedOffset);

}  // namespace gizhw::gpu::emulator
