#include "core/page_memory.h"

#include <sys/mman.h>

namespace gizml::core {

void* mapPages(size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint: where it is refused, 4 KiB pages serve as well
  return p;
}

void unmapPages(void* pages, size_t bytes) { ::munmap(pages, bytes); }

}  // namespace gizml::core
