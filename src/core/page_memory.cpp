#include "core/page_memory.h"

#include <sys/mman.h>

#include <fstream>
#include <string>

namespace gizml::core {

void* mapPages(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: where it is refused, 4 KiB pages serve as well
  return p;
}

void unmapPages(void* pages, size_t bytes) { ::munmap(pages, bytes); }

int64_t availableMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

}  // namespace gizml::core
