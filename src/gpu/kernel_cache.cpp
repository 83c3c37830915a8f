// The on-disk cache of compiled kernels: $XDG_CACHE_HOME/gizml/kernels (or
// ~/.cache/gizml/kernels), one file per key (a hash of source, architecture, compiler and driver
// versions). A file is a header (magic, key, payload size, payload checksum) and the payload;
// written to a temporary file and renamed, so a reader sees a whole file or none, and a damaged
// one (wrong size or checksum) is deleted and rebuilt.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "gpu/device.h"

namespace gizhw::gpu {
namespace {

constexpr char kMagic[8] = {'G', 'Z', 'K', 'C', '0', '0', '0', '1'};
struct Header {
  char magic[8];
  char key[32];
  uint64_t payloadBytes;
  uint64_t checksum;
};

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::filesystem::path entryPath(const std::string& key) { return std::filesystem::path(kernelCacheDirectory()) / (key + ".bin"); }

}  // namespace

uint64_t checksum64(const void* data, size_t bytes) { return fnv1a(data, bytes, 0xcbf29ce484222325ull); }

std::string hashText(const std::string& text) {
  // Two independent 64-bit FNV-1a hashes (different seeds, the second over the reversed bytes).
  const uint64_t a = fnv1a(text.data(), text.size(), 0xcbf29ce484222325ull);
  std::string reversed(text.rbegin(), text.rend());
  const uint64_t b = fnv1a(reversed.data(), reversed.size(), 0x84222325cbf29ce4ull ^ text.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return buf;
}

std::string kernelCacheDirectory() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/gizml/kernels";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/gizml/kernels";
  return (std::filesystem::temp_directory_path() / "gizml-kernels").string();
}

bool cacheLoad(const std::string& key, std::vector<char>& image) {
  const auto path = entryPath(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  Header h{};
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  bool ok = !ec && size >= sizeof h && in.read(reinterpret_cast<char*>(&h), sizeof h) &&
            std::memcmp(h.magic, kMagic, 8) == 0 && std::memcmp(h.key, key.data(), std::min<size_t>(32, key.size())) == 0 &&
            h.payloadBytes == size - sizeof h;
  if (ok) {
    image.resize(h.payloadBytes);
    ok = in.read(image.data(), static_cast<std::streamsize>(image.size())) && checksum64(image.data(), image.size()) == h.checksum;
  }
  if (!ok) {
    image.clear();
    std::filesystem::remove(path, ec);  // damaged or partial: rebuilt by the caller
  }
  return ok;
}

void cacheStore(const std::string& key, const std::vector<char>& image) {
  // A cache that cannot be written only costs a compilation next time.
  std::error_code ec;
  std::filesystem::create_directories(kernelCacheDirectory(), ec);
  const auto path = entryPath(key);
  auto temp = path;
  temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(std::random_device{}());
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  std::memcpy(h.key, key.data(), std::min<size_t>(32, key.size()));
  h.payloadBytes = image.size();
  h.checksum = checksum64(image.data(), image.size());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return;
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(image.data(), static_cast<std::streamsize>(image.size()));
    if (!out) {
      out.close();
      std::filesystem::remove(temp, ec);
      return;
    }
  }
  std::filesystem::rename(temp, path, ec);
  if (ec) std::filesystem::remove(temp, ec);
}

}  // namespace gizhw::gpu
