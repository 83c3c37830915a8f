#pragma once
// Memory for the large arrays that kernels stream (tensor storages, packed weights, KV caches):
// mapped straight from the kernel, so it comes zeroed on first touch with no pass over it, and
// advised as transparent huge pages, so that a decode step reading hundreds of MiB walks 2 MiB
// pages instead of 4 KiB ones (fewer TLB misses). The heap serves small arrays.
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace gizml::core {

/// Arrays from this size on are mapped: wherever such a mapping lands it holds at least one whole
/// 2 MiB huge page. Smaller ones come from the heap, which reuses freed memory without faulting
/// it in again: a fresh 1 MiB mapping for each decode step's logits (Gemma 3's 262,144) cost 256
/// page faults a step, 3 % of the step.
inline constexpr size_t kMappedBytes = size_t{4} << 20;

/// `bytes` (at least kMappedBytes) of zeroed memory mapped and advised MADV_HUGEPAGE; nullptr
/// when the system has none to give.
void* mapPages(size_t bytes);
/// Gives back what mapPages(bytes) returned.
void unmapPages(void* pages, size_t bytes);

/// A std::allocator that maps arrays of kMappedBytes or more with mapPages.
template <class T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() = default;
  template <class U>
  PageAllocator(const PageAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kMappedBytes) return std::allocator<T>().allocate(n);
    if (void* p = mapPages(bytes)) return static_cast<T*>(p);
    throw std::bad_alloc();
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) < kMappedBytes) std::allocator<T>().deallocate(p, n);
    else unmapPages(p, n * sizeof(T));
  }
  template <class U>
  bool operator==(const PageAllocator<U>&) const noexcept { return true; }
};

/// A vector whose large buffers are mapped pages (PageAllocator).
template <class T>
using PageVector = std::vector<T, PageAllocator<T>>;

/// Bytes of memory the machine has available now (Linux's MemAvailable: free memory and the
/// caches it may drop); 0 where it cannot tell.
int64_t availableMemory();

}  // namespace gizml::core
