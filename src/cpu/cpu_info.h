#pragma once
// The CPU facts behind `giz info` (cpuReport, public in <gizml/cpu.h>) and the AMX probe.
#include <gizml/cpu.h>

namespace gizml::cpu {

/// Whether an AMX tile loads and stores here: the OS grants the tile state (arch_prctl) and a
/// forked child runs tileloadd/tilestored without a fault (Linux raises SIGILL at the first tile
/// instruction of a process that did not ask for the state). False off Linux x86-64.
bool amxTilesWork();

}  // namespace gizml::cpu
