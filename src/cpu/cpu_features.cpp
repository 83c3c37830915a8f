#include "cpu/cpu_features.h"

#include <gizml/error.h>
#include <hwy/targets.h>

#include <cstdlib>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gizml::cpu {
namespace {

constexpr bool bit(unsigned v, int i) { return (v >> i) & 1; }

CpuFeatures probe() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  f.amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163;  // "AuthenticAMD"
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.family = ((a >> 8) & 0xF) == 0xF ? 0xF + ((a >> 20) & 0xFF) : (a >> 8) & 0xF;
  const bool fma = bit(c, 12), f16c = bit(c, 29);
  if (!bit(c, 27)) return f;  // no OSXSAVE: XGETBV would fault, and AVX state is not saved
  unsigned xcr0 = 0, xcr0High = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(xcr0High) : "c"(0));
  // The OS must save the XMM and YMM registers (XCR0 bits 1 and 2), or AVX instructions fault;
  // for AVX-512 also the opmask and both halves of the ZMM registers (bits 5, 6, 7); for AMX the
  // tile configuration and data (bits 17, 18).
  if ((xcr0 & 0x6) != 0x6) return f;
  const bool zmmState = (xcr0 & 0xE0) == 0xE0, tileState = (xcr0 & 0x60000) == 0x60000;
  f.fma = fma;
  f.f16c = f16c;
  unsigned maxLeaf = 0;
  __get_cpuid(0, &maxLeaf, &b, &c, &d);
  if (maxLeaf < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned subleaves = a;
  f.avx2 = bit(b, 5);
  if (zmmState) {
    f.avx512f = bit(b, 16);
    f.avx512bw = bit(b, 30);
    f.avx512vl = bit(b, 31);
    f.avx512vnni = bit(c, 11);
  }
  f.amxAdvertised = tileState && bit(d, 24) && bit(d, 25);  // AMX-TILE, AMX-INT8
  if (subleaves >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f.avxVnni = bit(a, 4);
    if (zmmState) f.avx512bf16 = bit(a, 5);
  }
#endif
  return f;
}

const char* isaSetting() {
  const char* env = std::getenv("GIZML_CPU_ISA");
  return env != nullptr && *env != '\0' ? env : nullptr;
}

CpuFeatures chosen() {
  const char* env = isaSetting();
  return env == nullptr ? detectedCpuFeatures() : cappedFeatures(detectedCpuFeatures(), env);
}

// Highway picks its best target on its own, at its first call: below AVX-512 its AVX3 targets go,
// and for the portable level everything above the baseline this was compiled for. Done when the
// library loads, before any kernel runs; a bad setting is left to cpuFeatures() to report.
bool capHighway() {
  const char* env = isaSetting();
  const std::optional<Isa> cap = env != nullptr ? parseIsa(env) : std::nullopt;
  if (!cap || !isaSupported(*cap, detectedCpuFeatures())) return false;
  if (*cap == Isa::Portable) hwy::DisableTargets(HWY_STATIC_TARGET - 1);
  else if (*cap < Isa::Avx512Vnni) hwy::DisableTargets(HWY_AVX2 - 1);
  return true;
}
[[maybe_unused]] const bool highwayCapped = capHighway();

}  // namespace

const CpuFeatures& detectedCpuFeatures() {
  static const CpuFeatures features = probe();
  return features;
}

const CpuFeatures& cpuFeatures() {
  static const CpuFeatures features = chosen();
  return features;
}

bool isaSupported(Isa isa, const CpuFeatures& f) {
  const bool avx2 = f.avx2 && f.fma;
  switch (isa) {
    case Isa::Portable: return true;
    case Isa::Avx2: return avx2;
    case Isa::AvxVnni: return avx2 && f.avxVnni;
    case Isa::Avx512Vnni: return avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
  }
  return false;
}

Isa bestIsa(const CpuFeatures& f) {
  for (Isa isa : {Isa::Avx512Vnni, Isa::AvxVnni, Isa::Avx2})
    if (isaSupported(isa, f)) return isa;
  return Isa::Portable;
}

Isa bestIsa() { return bestIsa(cpuFeatures()); }

CpuFeatures cappedFeatures(CpuFeatures f, std::string_view isaName) {
  const std::optional<Isa> cap = parseIsa(isaName);
  const std::string setting = "GIZML_CPU_ISA=" + std::string(isaName);
  check(cap.has_value(), setting + ": not one of portable, avx2, avxvnni, avx512vnni");
  check(isaSupported(*cap, f), setting + ": this CPU cannot run it (its best is " + gizml::cpu::isaName(bestIsa(f)) + ")");
  if (*cap < Isa::Avx512Vnni) f.avx512f = f.avx512bw = f.avx512vl = f.avx512vnni = f.avx512bf16 = f.amxAdvertised = false;
  if (*cap < Isa::AvxVnni) f.avxVnni = false;
  if (*cap < Isa::Avx2) f = CpuFeatures{};
  return f;
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::AvxVnni: return "avxvnni";
    case Isa::Avx512Vnni: return "avx512vnni";
  }
  return "?";
}

std::optional<Isa> parseIsa(std::string_view name) {
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::AvxVnni, Isa::Avx512Vnni})
    if (name == isaName(isa)) return isa;
  return std::nullopt;
}

}  // namespace gizml::cpu
