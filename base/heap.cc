#include "base/heap.h"

#include <malloc.h>

namespace ekco::base {

void releaseFreeHeap() {
// GCC defines __SANITIZE_ADDRESS__ under -fsanitize=address; clang (the fuzz build) only answers
// __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EKCO_HEAP_UNDER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(EKCO_HEAP_UNDER_ASAN)
  // See heap.h: glibc's allocator is not the one in use.
#else
  ::malloc_trim(0);
#endif
}

}  // namespace ekco::base
