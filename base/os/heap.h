// The process heap, as far as ekco touches it: giving freed memory back to the kernel.
#pragma once

#include <cstddef>

namespace ekco::base {

// Returns the heap's free pages to the kernel (glibc's malloc_trim), so that a large transient
// allocation such as an informer's first list does not stay in the RSS. Safe from any thread.
//
// Under AddressSanitizer this does nothing: ASan replaces the allocator, so glibc's malloc is
// never initialised by an allocation, and malloc_trim would run glibc's lazy, not thread-safe
// ptmalloc_init from whichever threads get there first. Two informer threads doing so at once
// corrupt glibc's arena accounting and abort the process at thread exit ("malloc assertion
// failure in __malloc_arena_thread_freeres"), which a CI run hit. Nothing is lost: ASan's heap
// is not glibc's, so there is nothing of it to trim.
void releaseFreeHeap();

// Called once at the start of the process (agent/main.cc), before any thread: every allocation
// of kHeapMmapThreshold or more gets its own mapping, returned to the kernel when freed. Large
// buffers (a response body, a watch line, a list page) are transient; in glibc's per-thread
// arenas, where its default moving threshold put them once one had been freed, they stayed in
// the RSS after being freed: endless lines on every watch took a Release agent to 227 MiB for
// 96 MiB of buffers (base/memory_budget.h). Nothing under AddressSanitizer (as above).
inline constexpr std::size_t kHeapMmapThreshold = std::size_t{128} << 10;
void configureHeap();

}  // namespace ekco::base
