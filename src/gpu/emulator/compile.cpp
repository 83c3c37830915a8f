// The emulator's "compiler": a CUDA kernel source becomes a host shared object. The source is
// kept as written except for its __shared__ declarations (static ones become references into a
// per-module arena the runner poisons before each block, dynamic ones pointers to the module's
// dynamic buffer) and gains, per extern "C" __global__ kernel, a trampoline NAME__gz_emu(void**)
// that calls the kernel with the driver's parameter array, and NAME__gz_emu_args giving its
// parameters' sizes (for launches captured into graphs).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "gpu/device.h"
#include "gpu/emulator/emulator.h"

namespace gizhw::gpu::emulator {
namespace {

#define GZ_SHARED(...) #__VA_ARGS__
const char* const kAbi =
#include "gpu/emulator/abi.inc"
    ;
#undef GZ_SHARED
const char* const kPrelude[] = {
#include "gpu/emulator/prelude.inc"
};
const char* const kMma =
#include "gpu/emulator/mma.inc"
    ;

std::string compilerCommand() {
  const char* cxx = std::getenv("GIZML_GPU_EMULATOR_CXX");
  return cxx && *cxx ? cxx : "g++";
}

// How a kernel's shared object is compiled: IEEE single operations as a GPU's (no contraction,
// no fast math); -O2 (an emulated language model test ran 9 % faster than at -O1, for the same
// compile time); fmaf, which the kernels call for every fused multiply-add, one instruction where
// the host has it rather than a call into libm (the same fused result; the calls were 7 % of that
// test's time). The flags are part of the cache key (compilerVersion).
std::string compileFlags() {
  std::string flags = "-std=c++20 -O2 -ffp-contract=off -fno-fast-math -fno-strict-aliasing -w -shared -fPIC -fno-gnu-unique";
#if defined(__x86_64__)
  if (__builtin_cpu_supports("fma")) flags += " -mfma";
#endif
  return flags;
}

// Runs a shell command; its exit status and the output (stdout and stderr).
int run(const std::string& command, std::string& output) {
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string firstLines(const std::string& text, int lines) {
  size_t at = 0;
  for (int i = 0; i < lines && at != std::string::npos; ++i) at = text.find('\n', at == 0 ? 0 : at + 1);
  return at == std::string::npos ? text : text.substr(0, at) + "\n...";
}

// The source with comments, string and character literals blanked (same length, newlines kept),
// so that searches see only code.
std::string codeOnly(const std::string& s) {
  std::string out = s;
  size_t i = 0;
  auto blank = [&](size_t from, size_t to) {
    for (size_t k = from; k < to && k < out.size(); ++k)
      if (out[k] != '\n') out[k] = ' ';
  };
  while (i < s.size()) {
    if (s.compare(i, 2, "//") == 0) {
      const size_t end = s.find('\n', i);
      blank(i, end == std::string::npos ? s.size() : end);
      i = end == std::string::npos ? s.size() : end;
    } else if (s.compare(i, 2, "/*") == 0) {
      const size_t end = s.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? s.size() : end + 2;
      blank(i, stop);
      i = stop;
    } else if (s[i] == '"' || s[i] == '\'') {
      const char q = s[i];
      size_t k = i + 1;
      while (k < s.size() && s[k] != q && s[k] != '\n') k += s[k] == '\\' ? 2 : 1;
      blank(i, k + 1);
      i = k + 1;
    } else {
      ++i;
    }
  }
  return out;
}

bool identChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Whether `word` stands at `at` as a whole identifier.
bool wordAt(const std::string& code, size_t at, const std::string& word) {
  return code.compare(at, word.size(), word) == 0 && (at == 0 || !identChar(code[at - 1])) &&
         (at + word.size() >= code.size() || !identChar(code[at + word.size()]));
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\n\\");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n\\") - a + 1);
}

// One __shared__ declaration (the text after __shared__, up to the ';'): its replacement.
std::string rewriteShared(const std::string& declaration, bool dynamic) {
  std::string d = declaration;
  int align = 1;
  for (size_t at; (at = d.find("__align__")) != std::string::npos;) {
    const size_t open = d.find('(', at), close = d.find(')', at);
    if (open == std::string::npos || close == std::string::npos) break;
    align = std::max(align, std::atoi(d.substr(open + 1, close - open - 1).c_str()));
    d.erase(at, close + 1 - at);
  }
  d = trim(d);
  const size_t bracket = d.find('[');
  // Array bounds may hold any constant expression; the rest is a type and one name.
  if (d.substr(0, bracket).find_first_of(",=(") != std::string::npos || d.find('=') != std::string::npos)
    throw Error("GPU emulator: unsupported __shared__ declaration (one variable, no initializer): __shared__ " +
                declaration);
  const std::string head = trim(d.substr(0, bracket));
  const std::string dims = bracket == std::string::npos ? "" : d.substr(bracket);
  size_t nameStart = head.size();
  while (nameStart > 0 && identChar(head[nameStart - 1])) --nameStart;
  const std::string name = head.substr(nameStart), type = trim(head.substr(0, nameStart));
  if (name.empty() || type.empty())
    throw Error("GPU emulator: cannot read the __shared__ declaration: __shared__ " + declaration);
  if (dynamic) return type + "* const " + name + " = (" + type + "*)gz_emu_dynamic;";
  const std::string t = "gz_emu_shared_" + name + "_t";
  return "typedef " + type + " " + t + dims + "; static " + t + "& " + name + " = *(" + t +
         "*)gz_emu_static_shared(sizeof(" + t + "), " + std::to_string(align) + " > alignof(" + t + ") ? " +
         std::to_string(align) + " : alignof(" + t + "));";
}

}  // namespace

std::string translate(const std::string& source, std::vector<std::string>& kernels,
                      std::vector<std::string>* launchBounds) {
  const std::string code = codeOnly(source);
  std::string out;
  out.reserve(source.size() + 4096);
  size_t copied = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    if (wordAt(code, i, "__global__")) {
      // extern "C" __global__ void [__launch_bounds__(...)] NAME(
      size_t back = i;
      while (back > 0 && std::isspace(static_cast<unsigned char>(source[back - 1]))) --back;
      const bool externC = back >= 3 && source.compare(back - 3, 3, "\"C\"") == 0;
      size_t k = i + 10;
      std::string launchBound;  // __launch_bounds__'s first argument: the most threads a block may have
      auto skipSpace = [&] { while (k < code.size() && std::isspace(static_cast<unsigned char>(code[k]))) ++k; };
      for (int guard = 0; guard < 4; ++guard) {
        skipSpace();
        if (wordAt(code, k, "void")) {
          k += 4;
        } else if (wordAt(code, k, "__launch_bounds__")) {
          size_t open = code.find('(', k), at = open, argEnd = std::string::npos;
          for (int depth = 0; at < code.size(); ++at) {
            if (code[at] == '(') ++depth;
            if (code[at] == ',' && depth == 1 && argEnd == std::string::npos) argEnd = at;
            if (code[at] == ')' && --depth == 0) break;
          }
          if (open != std::string::npos && at < code.size())
            launchBound = source.substr(open + 1, std::min(argEnd, at) - open - 1);
          k = at < code.size() ? at + 1 : code.size();
        }
      }
      skipSpace();
      size_t e = k;
      while (e < code.size() && identChar(code[e])) ++e;
      size_t paren = e;
      while (paren < code.size() && std::isspace(static_cast<unsigned char>(code[paren]))) ++paren;
      if (externC && e > k && paren < code.size() && code[paren] == '(') {
        kernels.push_back(source.substr(k, e - k));
        if (launchBounds) launchBounds->push_back(launchBound);
      }
      continue;
    }
    if (!wordAt(code, i, "__shared__")) continue;
    size_t start = i;
    bool dynamic = false;
    size_t back = i;
    while (back > 0 && std::isspace(static_cast<unsigned char>(code[back - 1]))) --back;
    for (const char* word : {"extern", "static"}) {
      const size_t n = std::strlen(word);
      if (back >= n && wordAt(code, back - n, word)) {
        dynamic = dynamic || word[0] == 'e';
        start = back - n;
      }
    }
    const size_t end = code.find(';', i);
    if (end == std::string::npos) throw Error("GPU emulator: a __shared__ declaration without ';'");
    out.append(source, copied, start - copied);
    // Keep the line count: the compiler's messages name the kernel source's lines.
    const std::string text = source.substr(i + 10, end - i - 10);
    out += rewriteShared(text, dynamic);
    out.append(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), '\n');
    copied = end + 1;
    i = end;
  }
  out.append(source, copied, std::string::npos);
  return out;
}

std::string compilerVersion() {
  static std::once_flag once;
  static std::string version;
  std::call_once(once, [] {
    std::string output;
    const int status = run(compilerCommand() + " --version", output);
    // The prelude's text is part of the key: an image built against another prelude (another
    // GzEmuCtx layout) must never be loaded from the cache. kFormat counts changes to what the
    // compile step generates around the source (the rewrites, trampolines, bound symbols).
    constexpr int kFormat = 4;
    const std::string prelude = std::string(kPrelude[0]) + kAbi + kPrelude[1] + kMma;
    version = "emulator " + compilerCommand() + " " + (status == 0 ? output.substr(0, output.find('\n')) : "unknown") +
              " format " + std::to_string(kFormat) + " flags " + compileFlags() + " prelude " + hashText(prelude);
  });
  return version;
}

std::vector<char> compile(const std::string& source, const Properties& properties) {
  const int arch = properties.major * 10 + properties.minor;
  std::ostringstream defines;
  defines << "#define GZ_EMU_ARCH " << arch << "\n"
          << "#define GZ_EMU_DYNAMIC_BYTES " << kDynamicSharedBytes << "\n"
          << "#define GZ_EMU_STATIC_BYTES " << kStaticSharedBytes << "\n"
          << "#define GZ_EMU_DYNAMIC_OFFSET " << kDynamicSharedOffset << "u\n";
  // What mma.inc defines, known to the kernel source's own #if tests when it is preprocessed.
  std::string macros = defines.str() + "#define GIZML_MMA_HELPERS 1\n";
  if (arch >= 80) macros += "#define GIZML_HAVE_MMA 1\n";
  if (arch >= 89) macros += "#define GIZML_HAVE_MMA_E4M3 1\n";
  if (arch >= 90) macros += "#define GIZML_HAVE_WGMMA 1\n#define GIZML_HAVE_TMA 1\n";  // emulated 9.0 is sm_90a

  static std::atomic<unsigned> counter{0};  // one folder per compilation, threads included
  std::error_code ec;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gizml-emu-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + "-" +
                    std::to_string(std::rand()));
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("GPU emulator: cannot create " + dir.string() + ": " + ec.message());
  struct Cleanup {
    std::filesystem::path dir;
    ~Cleanup() {
      std::error_code e;
      std::filesystem::remove_all(dir, e);
    }
  } cleanup{dir};
  // The kernel source is preprocessed first (its own macros expanded, #if tests decided), so that
  // kernels and __shared__ declarations written through macros are found; line markers keep
  // the compiler's messages and __syncthreads' lines on the source's lines.
  const auto raw = dir / "kernel.cu", pre = dir / "kernel.ii";
  std::ofstream(raw) << macros << "#line 1 \"kernel.cu\"\n" << source << "\n";
  std::string output;
  if (run(compilerCommand() + " -E -x c++ -std=c++20 -DGIZML_CUDA=1 -DGIZML_EMU=1 -o " + pre.string() + " " +
              raw.string(),
          output) != 0)
    throw Error("GPU emulator: " + compilerCommand() + " failed to preprocess the kernel source:\n" +
                firstLines(output, 30));
  std::ifstream preIn(pre);
  const std::string expanded((std::istreambuf_iterator<char>(preIn)), std::istreambuf_iterator<char>());
  std::vector<std::string> kernels, bounds;
  const std::string body = translate(expanded, kernels, &bounds);
  std::ostringstream text;
  text << defines.str() << kPrelude[0] << kAbi << kPrelude[1] << kMma << body << "\n";
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string& k = kernels[i];
    text << "extern \"C\" void " << k << "__gz_emu(void** p) { gz_emu_call(" << k << ", p); }\n";
    text << "extern \"C\" unsigned " << k << "__gz_emu_args(unsigned* s) { return gz_emu_arg_sizes(" << k << ", s); }\n";
    // The launch checks a block against the kernel's __launch_bounds__, as a GPU does.
    if (!bounds[i].empty())
      text << "extern \"C\" const unsigned " << k << "__gz_emu_bounds = (unsigned)(" << bounds[i] << ");\n";
  }
  const auto cpp = dir / "kernel.cpp", so = dir / "kernel.so";
  std::ofstream(cpp) << text.str();
  // -fno-gnu-unique: a template's or inline function's static locals (the __shared__ references)
  // are otherwise STB_GNU_UNIQUE, bound to the first module that defines them in the whole process
  // even under RTLD_LOCAL: a second module holding the same kernel template then used the first
  // one's shared memory, unmapped once that module was unloaded (a crash the tests found).
  const std::string command = compilerCommand() + " " + compileFlags() + " -DGIZML_CUDA=1 -DGIZML_EMU=1 -o " +
                              so.string() + " " + cpp.string();
  output.clear();
  if (run(command, output) != 0)
    throw Error("GPU emulator: " + compilerCommand() + " failed to compile the kernel source:\n" +
                firstLines(output, 30));
  std::ifstream in(so, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (image.empty()) throw Error("GPU emulator: the compiler wrote no shared object (" + so.string() + ")");
  return image;
}

}  // namespace gizhw::gpu::emulator
