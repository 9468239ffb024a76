#include "base/os/thread.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <exception>
#include <utility>

#include "base/log/log.h"

namespace ekco::base {

namespace {

thread_local ThreadFailureHandler t_handler;

void failed(std::string_view name, std::string_view error) {
  logError("thread failed", {{"thread", name}, {"error", error}});
  if (t_handler) {
    try {
      t_handler(name, error);
    } catch (...) {
      logError("thread failure handler failed", {{"thread", name}});
    }
    return;
  }
  // No agent to stop: ask the process to stop the way a person would.
  ::kill(::getpid(), SIGTERM);
}

}  // namespace

bool runGuarded(std::string_view name, const std::function<void()>& body) {
  try {
    body();
    return true;
  } catch (const std::exception& e) {
    failed(name, e.what());
  } catch (...) {
    failed(name, "an exception that is not a std::exception");
  }
  return false;
}

std::thread startThread(std::string name, std::function<void()> body) {
  return std::thread([name = std::move(name), body = std::move(body), handler = t_handler] {
    t_handler = handler;
    // The kernel keeps 15 bytes of a thread's name; a longer name is cut (a failure is harmless).
    const std::string comm = name.substr(0, 15);
    ::pthread_setname_np(::pthread_self(), comm.c_str());
    runGuarded(name, body);
  });
}

ThreadFailureScope::ThreadFailureScope(ThreadFailureHandler handler)
    : previous_(std::exchange(t_handler, std::move(handler))) {}

ThreadFailureScope::~ThreadFailureScope() { t_handler = std::move(previous_); }

}  // namespace ekco::base
