// ekco's threads. Every thread the agent starts runs its body under a top-level handler: an
// exception that escapes a thread is a bug, and without a handler the C++ runtime calls
// std::terminate, which aborts the whole agent with no log line saying which thread or why (and,
// for a host job, leaves its status Running forever). Here it is logged at error priority, one
// line naming the thread and the exception, and the thread's failure handler is called.
//
// The handler is inherited: a thread started with startThread gets the handler of the thread that
// started it. The agent installs one (ThreadFailureScope) on the thread that runs it, so every
// thread it starts, and every thread those start, stops that agent cleanly with a failure exit
// status (systemd or the kubelet then restarts it). Several agents in one process (tests) each
// stop only themselves. A thread with no handler in its ancestry asks the whole process to stop
// cleanly (SIGTERM to itself), which is what `ekco agent` does on a signal.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <thread>

namespace ekco::base {

// Called on the failed thread, after the log line, with the thread's name and the error.
using ThreadFailureHandler = std::function<void(std::string_view thread, std::string_view error)>;

// Runs `body` on a new thread, named `name` in the log (and, up to 15 bytes, in /proc as its
// comm), under the top-level handler.
std::thread startThread(std::string name, std::function<void()> body);

// Runs `body` on the calling thread under the same top-level handler: for the thread a caller
// already owns (main's), or a body that must finish its own bookkeeping first. Returns whether it
// returned normally.
bool runGuarded(std::string_view name, const std::function<void()>& body);

// Installs `handler` for the calling thread (and the threads it starts from now on) for the
// scope's lifetime; the previous handler is restored after.
class ThreadFailureScope {
 public:
  explicit ThreadFailureScope(ThreadFailureHandler handler);
  ~ThreadFailureScope();
  ThreadFailureScope(const ThreadFailureScope&) = delete;
  ThreadFailureScope& operator=(const ThreadFailureScope&) = delete;

 private:
  ThreadFailureHandler previous_;
};

}  // namespace ekco::base
