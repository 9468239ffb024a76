// Shared by the agent tests that run real processes (`ekco agent`, haproxy): spawn with stderr
// to a log file, wait for a condition, read a file back.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

extern char** environ;

namespace ekco::agent::testing {

// Polls `pred` every 20 ms until it holds or `timeout` passes; returns its last value.
template <typename F>
bool eventually(F pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

inline std::string readWholeFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Starts argv[0] (a path) with this process's environment plus `extra_env` ("K=V", replacing an
// inherited variable of the same name: getenv returns the first match), stdout and
// stderr appended to `log_path`, in a process group of its own (so killAndReap also ends its
// children, e.g. HAProxy's workers). Returns the pid, or -1 (with a test failure) when it cannot.
inline pid_t spawnLogged(std::vector<std::string> args, const std::string& log_path,
                         std::vector<std::string> extra_env = {}) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 2, 1);
  std::vector<char*> envp;
  const auto overridden = [&extra_env](std::string_view entry) {
    const std::string_view name = entry.substr(0, entry.find('='));
    for (const std::string& e : extra_env) {
      if (std::string_view(e).substr(0, e.find('=')) == name) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) envp.push_back(*e);
  }
  for (auto& e : extra_env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  EXPECT_EQ(rc, 0) << "cannot start " << args[0];
  return rc == 0 ? pid : -1;
}

// SIGKILL to the process group of a spawnLogged process, and reap it (teardown); a pid <= 0 is
// ignored.
inline void killAndReap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

// ASAN_OPTIONS for a child whose RSS a test measures: this process's, with ASan's quarantine cut
// to 1 MiB. By default it holds every freed buffer (256 MiB), so the RSS would measure the
// sanitizer, not the program. (No effect on a build without ASan.)
inline std::string asanOptionsForRss() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::string options = asan != nullptr ? asan : "";
  return options + (options.empty() ? "" : ":") + "quarantine_size_mb=1";
}

}  // namespace ekco::agent::testing
