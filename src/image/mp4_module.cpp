// image::writeMp4 and mp4Contents through the MP4 module (mp4_module.h), loaded once, at the
// first call.
#if GIZML_HAVE_FFMPEG
#include "image/mp4_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "image/video.h"

namespace gizml::image {
namespace {

struct Module {
  Mp4Write* write = nullptr;
  Mp4Contents* contents = nullptr;
  std::string failure;  // why it could not be loaded
};

// Where the module is looked for: beside the library or program that holds this code and beside
// the running program (an install, or giz in its build folder), then in the build folder it was
// built in (the tests and benchmarks, which run from folders below it).
std::vector<std::filesystem::path> places() {
  std::vector<std::filesystem::path> folders;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&places), &info) != 0 && info.dli_fname != nullptr && *info.dli_fname != '\0')
    folders.push_back(std::filesystem::path(info.dli_fname).parent_path());
  std::error_code error;
  if (const auto program = std::filesystem::read_symlink("/proc/self/exe", error); !error)
    folders.push_back(program.parent_path());
  folders.emplace_back(GIZML_MP4_MODULE_DIR);
  std::vector<std::filesystem::path> files;
  for (const auto& folder : folders) files.push_back(folder / kMp4ModuleFile);
  return files;
}

Module load() {
  Module m;
  for (const auto& file : places()) {
    if (!std::filesystem::exists(file)) continue;
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      m.failure = dlerror();
      continue;
    }
    m.write = reinterpret_cast<Mp4Write*>(dlsym(handle, "gizml_mp4_write"));
    m.contents = reinterpret_cast<Mp4Contents*>(dlsym(handle, "gizml_mp4_contents"));
    if (m.write != nullptr && m.contents != nullptr) return m;
    m.write = nullptr;
    m.contents = nullptr;
    m.failure = file.string() + " lacks the module's entry points";
    dlclose(handle);
  }
  if (m.failure.empty()) m.failure = std::string(kMp4ModuleFile) + " is neither beside the program nor in " + GIZML_MP4_MODULE_DIR;
  return m;
}

const Module& module(const char* who) {
  static const Module m = load();
  if (m.write == nullptr) throw Error(std::string(who) + ": cannot load the MP4 writer (FFmpeg's libraries): " + m.failure);
  return m;
}

}  // namespace

void writeMp4(const std::string& path, std::span<const Image> frames, double fps, const Audio& audio) {
  std::string error;
  if (!module("image::writeVideo").write(path, frames, fps, audio, error)) throw Error(error);
}

std::string mp4Contents() {
  std::string contents, error;
  if (!module("image::videoWriter").contents(contents, error)) throw Error(error);
  return contents;
}

}  // namespace gizml::image
#endif
