#include "base/heap.h"

#include <malloc.h>

namespace ekco::base {

void releaseFreeHeap() {
#if defined(__SANITIZE_ADDRESS__)
  // See heap.h: glibc's allocator is not the one in use.
#else
  ::malloc_trim(0);
#endif
}

}  // namespace ekco::base
