#pragma once
// What this x86-64 CPU can run, asked of cpuid (and of the OS, through XGETBV, for the YMM, ZMM
// and opmask registers) once. The compilers' __builtin_cpu_supports does not know every feature
// in every version (clang 14 lacks "f16c"), so the bits are read here. On other CPUs every answer
// is false.
//
// GIZML_CPU_ISA=portable|avx2|avxvnni|avx512vnni caps what the kernels may use (for tests and
// benchmarks): the features above that level read false, and Highway's kernels (sgemm,
// elementwise) are held to the matching targets. A value the CPU cannot run is an error.
#include <optional>
#include <string_view>

namespace gizml::cpu {

/// The instruction sets the int8 kernels are written for, lowest first.
enum class Isa { Portable, Avx2, AvxVnni, Avx512Vnni };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avxVnni = false;  // the VEX-encoded 256-bit vpdpbusd
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  // cpuid's AMX-TILE and AMX-INT8 with the OS's tile state in XCR0: advertised, not proven (no
  // kernel uses AMX; amxTilesWork in cpu_info.h tries a tile).
  bool amxAdvertised = false;
  // Who made it and its family (cpuid leaf 1's base plus extended family): tuning, not features.
  bool amd = false;
  unsigned family = 0;
};

/// The features of the CPU this runs on, capped by GIZML_CPU_ISA (throws gizml::Error on a value
/// that is not one of the four or that this CPU cannot run).
const CpuFeatures& cpuFeatures();
/// The features as the CPU reports them, before any cap.
const CpuFeatures& detectedCpuFeatures();

/// Whether features f run isa's kernels.
bool isaSupported(Isa isa, const CpuFeatures& f);
/// The highest of the four that f (by default cpuFeatures()) runs: the int8 kernels' choice.
Isa bestIsa(const CpuFeatures& f);
Isa bestIsa();
/// f without the features above the level named `isaName` (GIZML_CPU_ISA's values); throws
/// gizml::Error naming the setting when it is not one of the four or f cannot run it.
CpuFeatures cappedFeatures(CpuFeatures f, std::string_view isaName);
const char* isaName(Isa isa);
std::optional<Isa> parseIsa(std::string_view name);

}  // namespace gizml::cpu
