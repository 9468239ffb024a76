#include "base/os/heap.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::base {
namespace {

// Concurrent first calls, each in a fresh process (the race is in glibc's one-time set-up).
// Under AddressSanitizer, calling glibc's malloc_trim this way aborted about one process in 50
// ("malloc assertion failure in __malloc_arena_thread_freeres") or crashed it; 200 runs catch
// that nearly always.
TEST(HeapTest, ConcurrentReleasesInFreshProcessesNeverAbort) {
  SystemClock clock;
  BoostProcessRunner runner(clock);
  for (int i = 0; i < 200; ++i) {
    auto r = runner.run(ProcessRequest{.argv = {HEAP_RELEASE_RACE}});
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_TRUE(r->success()) << "run " << i << ": exit " << r->exit_code << ", signal "
                              << r->term_signal << "\n"
                              << r->stderr_data;
  }
}

}  // namespace
}  // namespace ekco::base
