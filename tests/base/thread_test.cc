#include "base/os/thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

namespace ekco::base {
namespace {

struct Failures {
  std::mutex mu;
  std::string thread;
  std::string error;
  int count = 0;
};

TEST(Thread, AnExceptionIsLoggedAndHandedToTheHandlerNeverTerminate) {
  Failures f;
  ThreadFailureScope scope([&](std::string_view thread, std::string_view error) {
    std::lock_guard lock(f.mu);
    f.thread = thread;
    f.error = error;
    ++f.count;
  });
  // Without the top-level handler this would call std::terminate and abort the test binary.
  std::thread t = startThread("host-job", [] { throw std::runtime_error("[json.exception.x]"); });
  t.join();
  EXPECT_EQ(f.count, 1);
  EXPECT_EQ(f.thread, "host-job");
  EXPECT_EQ(f.error, "[json.exception.x]");
}

TEST(Thread, TheHandlerIsInheritedByThreadsThoseThreadsStart) {
  std::atomic<int> failures{0};
  ThreadFailureScope scope([&](std::string_view, std::string_view) { ++failures; });
  std::thread outer = startThread("outer", [] {
    std::thread inner = startThread("inner", [] { throw 7; });  // not even a std::exception
    inner.join();
  });
  outer.join();
  EXPECT_EQ(failures.load(), 1);
}

TEST(Thread, AScopeEndsWithItsLifetimeAndNormalThreadsCallNothing) {
  std::atomic<int> outer_calls{0};
  std::atomic<int> inner_calls{0};
  ThreadFailureScope outer([&](std::string_view, std::string_view) { ++outer_calls; });
  {
    ThreadFailureScope inner([&](std::string_view, std::string_view) { ++inner_calls; });
    startThread("a", [] { throw std::runtime_error("x"); }).join();
  }
  startThread("b", [] { throw std::runtime_error("y"); }).join();
  int ran = 0;
  startThread("c", [&] { ran = 1; }).join();
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(inner_calls.load(), 1);
  EXPECT_EQ(outer_calls.load(), 1);
  EXPECT_TRUE(runGuarded("d", [] {}));
  EXPECT_FALSE(runGuarded("e", [] { throw std::logic_error("z"); }));
  EXPECT_EQ(outer_calls.load(), 2);
}

}  // namespace
}  // namespace ekco::base
