#pragma once
// What `giz info` says about the CPU: the features cpuid reports, what GIZML_CPU_ISA keeps of
// them, whether AMX tiles really work (a probe in a child process), and the kernel each
// operation runs.
#include <string>

namespace gizml::cpu {

/// One line per fact, each ending in a newline.
std::string cpuReport();

/// Whether an AMX tile loads and stores here: the OS grants the tile state (arch_prctl) and a
/// forked child runs tileloadd/tilestored without a fault (Linux raises SIGILL at the first tile
/// instruction of a process that did not ask for the state). False off Linux x86-64.
bool amxTilesWork();

}  // namespace gizml::cpu
