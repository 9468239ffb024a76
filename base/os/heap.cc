#include "base/os/heap.h"

#include <malloc.h>

#include <cstddef>

// GCC defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang (the fuzz build) only answers
// __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EKCO_HEAP_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define EKCO_HEAP_UNDER_ASAN 1
#endif

namespace ekco::base {

void releaseFreeHeap() {
#if defined(EKCO_HEAP_UNDER_ASAN)
  // See heap.h: glibc's allocator is not the one in use.
#else
  ::malloc_trim(0);
#endif
}

void configureHeap() {
#if !defined(EKCO_HEAP_UNDER_ASAN)
  // Setting them fixes them: glibc no longer raises the mmap threshold (up to 32 MiB) each time
  // a mapped chunk is freed, which is what put later large buffers into the arenas.
  ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapMmapThreshold));
  ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(2 * kHeapMmapThreshold));
#endif
}

}  // namespace ekco::base
