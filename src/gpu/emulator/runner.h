#pragma once
// The emulator's modules, functions and the block runner (runner.cpp): a launch runs the grid's
// blocks one after another on the calling thread, every CUDA thread of a block a fiber.
#include <memory>
#include <string>
#include <vector>

#define GZ_SHARED(...) __VA_ARGS__
#include "gpu/emulator/abi.inc"
#undef GZ_SHARED

namespace gizhw::gpu::emulator {

struct Module;

struct Function {
  Module* module = nullptr;
  void (*entry)(void**) = nullptr;  // the kernel's trampoline
  std::string name;
  unsigned maxDynamicShared = 48 * 1024;  // raised by cuFuncSetAttribute, as on a GPU
  unsigned maxThreads = 1024;             // __launch_bounds__'s limit, when the kernel gives one
  std::vector<unsigned> argBytes;         // each parameter's size (a captured launch copies them)
};

/// A loaded kernel shared object and the symbols of its prelude.
struct Module {
  void* dl = nullptr;
  GzEmuCtx** ctx = nullptr;
  unsigned char* dynamicShared = nullptr;
  unsigned char* staticShared = nullptr;
  unsigned* staticUsed = nullptr;
  std::vector<std::unique_ptr<Function>> functions;
};

struct LaunchShape {
  unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  unsigned sharedBytes = 0;
  unsigned sharedOptin = 0;  // the device's per-block limit (static + dynamic)
};

/// Runs a launch to its end: empty on success, else what went wrong (naming the kernel, block
/// and thread). Launches are serialized.
std::string run(const Function& f, const LaunchShape& shape, void** params);

}  // namespace gizhw::gpu::emulator
