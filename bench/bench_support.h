// What the benchmark programs and the demo (demo/demo.cc) share: their child processes (spawned
// into process groups of their own, killed and reaped on every exit path, also on
// SIGINT/SIGTERM/SIGHUP), failures as exceptions, and small helpers. Not for tests: they have
// tests/agent/process_support.h.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace ekco::bench {

namespace fs = std::filesystem;

// Every child started, and the work directory: what the cleanup (normal exit, failure or a
// signal) must undo.
class Children {
 public:
  // Starts args[0] (a path) with stdout and stderr appended to log_path, in a new process group,
  // with an empty signal mask (this process blocks the termination signals).
  pid_t spawn(std::vector<std::string> args, const std::string& log_path) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid = -1;
    std::lock_guard lock(mu_);
    const int rc = ::posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return -1;
    pids_.push_back(pid);
    return pid;
  }

  // Runs at cleanup, before the children are killed (e.g. stopping an etcd cluster the program
  // started through another helper). Registered hooks run once, last registered first.
  void onCleanup(std::function<void()> hook) {
    std::lock_guard lock(mu_);
    hooks_.push_back(std::move(hook));
  }

  void setWorkDir(fs::path dir, bool keep) {
    std::lock_guard lock(mu_);
    work_dir_ = std::move(dir);
    keep_ = keep;
  }

  // SIGKILL to every child's process group (HAProxy's workers too), reap, remove the work
  // directory. Idempotent.
  void cleanup() {
    std::lock_guard lock(mu_);
    for (auto it = hooks_.rbegin(); it != hooks_.rend(); ++it) (*it)();
    hooks_.clear();
    for (pid_t pid : pids_) ::kill(-pid, SIGKILL);
    for (pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
    pids_.clear();
    if (!work_dir_.empty() && !keep_) {
      std::error_code ec;
      fs::remove_all(work_dir_, ec);
    }
    work_dir_.clear();
  }

  // True while the child runs (reaps it when it has exited).
  bool running(pid_t pid) {
    int status = 0;
    return ::waitpid(pid, &status, WNOHANG) == 0;
  }

 private:
  std::mutex mu_;
  std::vector<pid_t> pids_;
  std::vector<std::function<void()>> hooks_;
  fs::path work_dir_;
  bool keep_ = false;
};

inline Children g_children;

// The termination signals are blocked in every thread; this one waits for them, cleans up and
// exits. `program` names the benchmark in the message.
inline void startSignalThread(const sigset_t& set, const char* program) {
  std::thread([set, program] {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) return;
    std::fprintf(stderr, "%s: signal %d, cleaning up\n", program, sig);
    g_children.cleanup();
    std::_Exit(128 + sig);
  }).detach();
}

struct Failure {
  std::string message{};
};

[[noreturn]] inline void fail(const std::string& message) { throw Failure{message}; }

inline std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

template <typename F>
bool eventually(F pred, std::chrono::steady_clock::duration timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

// VmRSS of a process in KiB (0 when it cannot be read).
inline long vmRssKib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// A benchmark's main after its flags are parsed: the termination signals go to the cleanup
// thread (the mask is inherited by every thread started from here on; children get an empty
// mask), `run` runs, a failure is one line on stderr, and every child is killed and reaped.
inline int runBench(const char* program, const std::function<int()>& run) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  startSignalThread(set, program);
  int rc = 1;
  try {
    rc = run();
  } catch (const Failure& f) {
    std::fprintf(stderr, "%s: %s\n", program, f.message.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
  }
  g_children.cleanup();
  return rc;
}

}  // namespace ekco::bench
