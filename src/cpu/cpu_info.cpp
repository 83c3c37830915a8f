#include "cpu/cpu_info.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cpu/cpu_features.h"
#include "cpu/elementwise.h"
#include "cpu/float_panels.h"
#include "cpu/quant_dot.h"
#include "cpu/quant_panels.h"

#if defined(__linux__) && defined(__x86_64__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#define GIZML_AMX_PROBE 1
#endif

namespace gizml::cpu {
namespace {

std::string featureList(const CpuFeatures& f) {
  std::string s;
  const auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.avxVnni, "avx-vnni");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512vnni, "avx512-vnni");
  add(f.avx512bf16, "avx512-bf16");
  return s.empty() ? "none of avx2 fma f16c avx-vnni avx512*" : s;
}

#if GIZML_AMX_PROBE
// One 16 x 64-byte tile through tile register 0 and back; exits 0 when the bytes come back.
[[noreturn]] __attribute__((target("amx-tile"))) void tileRoundTrip() {
  alignas(64) unsigned char config[64] = {};
  config[0] = 1;    // palette 1
  config[16] = 64;  // tile 0: 64 bytes a row (colsb, 16-bit little-endian)
  config[48] = 16;  // tile 0: 16 rows
  alignas(64) unsigned char in[16 * 64], out[16 * 64] = {};
  for (int i = 0; i < 16 * 64; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
  _tile_loadconfig(config);
  _tile_loadd(0, in, 64);
  _tile_stored(0, out, 64);
  _tile_release();
  _exit(std::memcmp(in, out, sizeof in) == 0 ? 0 : 2);
}
#endif

}  // namespace

bool amxTilesWork() {
#if GIZML_AMX_PROBE
  if (!detectedCpuFeatures().amxAdvertised) return false;
  // The child asks Linux for the tile state, so that this process's signal frames do not grow
  // with it; it runs only a system call and the tile instructions (safe after fork() in a process
  // with threads: no lock, no allocation).
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  const pid_t child = fork();
  if (child < 0) return false;
  if (child == 0) {
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) _exit(3);
    tileRoundTrip();
  }
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  return waited == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
#else
  return false;
#endif
}

std::string cpuReport() {
  const CpuFeatures& detected = detectedCpuFeatures();
  std::string s = "cpu features: " + featureList(detected) + "\n";
  if (const char* cap = std::getenv("GIZML_CPU_ISA"); cap != nullptr && *cap != '\0')
    s += std::string("GIZML_CPU_ISA=") + cap + " keeps: " + featureList(cpuFeatures()) + "\n";
  s += "amx: ";
  if (!detected.amxAdvertised) s += "not advertised";
  else s += amxTilesWork() ? "tiles work (probed), unused" : "advertised, but its tiles fault or the OS refuses them (probed), unused";
  const Isa isa = bestIsa();
  s += std::string("\nkernels: int8 panels ") + isaName(isa);
  if (isa != Isa::Portable) s += " (" + std::to_string(QuantMatrix::panelRowsFor(isa)) + "-row panels)";
  s += std::string(", activation quantization ") + quantizeActsKernel() + ", 16-bit panels " + floatPanelsKernel() +
       ", f32 (Highway) " + simdTarget() + "\n";
  return s;
}

}  // namespace gizml::cpu
