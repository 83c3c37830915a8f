#pragma once
// What gizml found of this machine's CPU, as `giz info` prints it.
#include <string>

namespace gizml::cpu {

/// The features cpuid reports, what GIZML_CPU_ISA keeps of them, whether AMX tiles really work
/// (a probe in a child process), and the kernel each operation runs: one line per fact, each
/// ending in a newline.
std::string cpuReport();

/// The name of the instruction set the f32 kernels (Highway's, dispatched at run time) use:
/// "AVX2", "AVX3", ...
const char* simdTarget();

}  // namespace gizml::cpu
