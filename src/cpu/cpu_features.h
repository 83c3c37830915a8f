#pragma once
// What this x86-64 CPU can run, asked of cpuid (and of the OS, for the AVX registers) once. The
// compilers' __builtin_cpu_supports does not know every feature in every version (clang 14 lacks
// "f16c"), so the bits are read here. On other CPUs every answer is false.
namespace gizml::cpu {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
};

/// The features of the CPU this runs on.
const CpuFeatures& cpuFeatures();

}  // namespace gizml::cpu
