// The only file that starts processes. Boost.Process v1 (1.74) does fork/execve and carries a
// failed execve's errno back to the parent; everything around it (PATH lookup, pipes, the child's
// setup here; timeouts and reaping in process_supervisor.cc) is ours, because 1.74 gets several
// of those wrong:
//   - start_dir ignores a failing chdir(2) and runs the child in the parent's directory;
//   - an error reported from an on_exec_setup handler is sent to the parent but execve still
//     runs, so the parent reports a failure for a child that is running; and the parent reads
//     that report with a single read(2) that can come up short (see ChildSetup);
//   - after a failed execve the forked child is never reaped (a zombie per failed start);
//   - its own error pipe is made close-on-exec with a separate fcntl(2) after pipe(2), so a
//     concurrent spawn in another thread can inherit it and stall this spawn until that child
//     exits; its stdio pipes are not close-on-exec at all;
//   - child::exit_code() returns WTERMSIG for a signalled child, indistinguishable from an exit
//     status, and on_exit() reaps through a process-wide SIGCHLD handler.
// So the executor gets exe, argv and envp through the documented extension interface
// (posix_executor::exe/cmd_line/env), and one handler does the child's setup and reports its
// failures on a pipe of its own.
#include "base/os/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <boost/process/child.hpp>
#include <boost/process/error.hpp>
#include <boost/process/extend.hpp>

#include "base/os/process_supervisor.h"
#include "base/os/unique_fd.h"

namespace ekco::base {
namespace {

namespace bp = boost::process;
using std::chrono::milliseconds;

// What execvp(3) and systemd search when PATH is unset.
constexpr std::string_view kDefaultPath =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
// The child reports which setup step failed, and the errno, as step << kStepShift | errno
// (errno values are below 4096).
enum ChildStep : int { kStepExec = 0, kStepChdir = 1, kStepSetup = 2 };
constexpr int kStepShift = 12;

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// Close-on-exec from the start: a concurrent spawn in another thread must not inherit them.
Result<Pipe> makePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errnoError("pipe2", errno);
  return Pipe{.read = UniqueFd(fds[0]), .write = UniqueFd(fds[1])};
}

Status setNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return errnoError("fcntl O_NONBLOCK", errno);
  }
  return ok();
}

bool hasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// Looks a bare program name up in `path` the way execvp(3) does, except that empty entries are
// skipped instead of meaning the current directory.
Result<std::string> resolveProgram(const std::string& name, std::string_view path) {
  if (name.find('/') != std::string::npos) return name;
  bool denied = false;
  while (true) {
    std::size_t colon = path.find(':');
    std::string_view dir = path.substr(0, colon);
    if (!dir.empty()) {
      std::string candidate = fmt::format("{}/{}", dir, name);
      struct stat st {};
      if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
        if (::access(candidate.c_str(), X_OK) == 0) return candidate;
        denied = true;
      }
    }
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  if (denied) {
    return Error(fmt::format("run {}: found in PATH but not executable", name),
                 ErrorCode::kPermissionDenied);
  }
  return Error(fmt::format("run {}: not found in PATH", name), ErrorCode::kNotFound);
}

// Marks every descriptor from 3 up close-on-exec, so the child keeps only stdin/stdout/stderr.
// Runs between fork and exec: async-signal-safe calls only, no allocation.
void closeOtherFdsOnExec() {
  if (::close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC) == 0) return;  // Linux 5.11+
  // Older kernels: list /proc/self/fd with raw getdents64 (opendir would allocate).
  int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    alignas(8) char buf[4096];
    while (true) {
      long n = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (n <= 0) break;
      for (long off = 0; off < n;) {
        // struct linux_dirent64: u64 d_ino, s64 d_off, u16 d_reclen, u8 d_type, char d_name[].
        unsigned short reclen = 0;
        std::memcpy(&reclen, buf + off + 16, sizeof reclen);
        const char* name = buf + off + 19;
        int fd = 0;
        bool numeric = *name != '\0';
        for (const char* p = name; *p != '\0'; ++p) {
          if (*p < '0' || *p > '9') {
            numeric = false;
            break;
          }
          fd = fd * 10 + (*p - '0');
        }
        if (numeric && fd > 2 && fd != dir) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
        off += reclen;
      }
    }
    ::close(dir);
    return;
  }
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  for (int fd = 3; fd < max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
}

// The child's setup, as a Boost.Process extension handler. Everything it points to is prepared
// before fork and outlives the spawn.
//
// A failing step is reported on our own status pipe, as one 4-byte write of
// step << kStepShift | errno, and the child exits before Boost writes to its error pipe. Boost's
// channel is not safe to use for this: set_error() from a handler writes its 8-byte header in
// two write(2)s while the parent reads it with one read(2), so under load the parent takes the
// error number for a length, builds a string of that size and throws std::length_error, leaving
// the child unreaped. The status pipe is close-on-exec: end of file means execve succeeded.
struct ChildSetup : bp::extend::handler {
  const char* exe = nullptr;
  char* const* argv = nullptr;
  char** envp = nullptr;
  const char* working_dir = nullptr;  // nullptr: stay in the parent's directory
  std::array<int, 3> stdio{-1, -1, -1};
  int status_fd = -1;
  mutable int child_status_fd = -1;  // status_fd moved above 2, in the child

  template <typename Executor>
  void on_setup(Executor& exec) const {
    exec.exe = exe;
    exec.cmd_line = argv;
    exec.env = envp;
  }

  // Runs in the child between fork and execve: async-signal-safe calls only.
  template <typename Executor>
  void on_exec_setup(Executor&) const {
    // (1) Move the status pipe and the child's stdin/stdout/stderr above 2: any of them may itself
    // be 0, 1 or 2 (when the agent runs with a standard descriptor closed), would be clobbered by
    // the dup2 calls below, and dup2 onto itself would not clear close-on-exec.
    child_status_fd = ::fcntl(status_fd, F_DUPFD_CLOEXEC, 3);
    if (child_status_fd < 0) ::_exit(127);  // cannot report; the parent sees exit status 127
    std::array<int, 3> high{};
    for (int i = 0; i < 3; ++i) {
      high[i] = ::fcntl(stdio[i], F_DUPFD_CLOEXEC, 3);
      if (high[i] < 0) fail(kStepSetup, errno);
    }
    for (int i = 0; i < 3; ++i) {
      if (::dup2(high[i], i) < 0) fail(kStepSetup, errno);
    }
    // (2) Working directory.
    if (working_dir != nullptr && ::chdir(working_dir) != 0) fail(kStepChdir, errno);
    // (3) A process group of its own, so a timeout can kill the child and everything it started.
    if (::setpgid(0, 0) != 0) fail(kStepSetup, errno);
    // (4) Default signal dispositions and an empty mask. execve keeps ignored signals ignored and
    // keeps the mask, and the agent blocks or ignores some (SIGPIPE at least, during run()).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; ++sig) {
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // (5) No other descriptors of the agent (sockets, files, other children's pipes).
    closeOtherFdsOnExec();
  }

  // In the child, after execve failed.
  template <typename Executor>
  void on_exec_error(Executor&, const std::error_code& ec) const {
    fail(kStepExec, ec.value());
  }

  // Boost does not reap a child after a failure it detected itself; do it so no zombie is left.
  template <typename Executor>
  void on_error(Executor& exec, const std::error_code&) const {
    if (exec.pid > 0) {
      while (::waitpid(exec.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }

  [[noreturn]] void fail(int step, int err) const {
    int code = (step << kStepShift) | err;
    while (::write(child_status_fd, &code, sizeof code) < 0 && errno == EINTR) {
    }
    ::_exit(127);
  }
};

// Waits until the child has exec'd (end of file on the status pipe) or reported a failed step.
std::optional<int> readChildFailure(int status_fd) {
  int code = 0;
  ssize_t n;
  while ((n = ::read(status_fd, &code, sizeof code)) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof code)) return code;
  return std::nullopt;
}

Error childFailureError(const ProcessRequest& request, int code) {
  const std::string& program = request.argv.front();
  int err = code & ((1 << kStepShift) - 1);
  switch (code >> kStepShift) {
    case kStepExec:
      return errnoError(fmt::format("run {}", program), err);
    case kStepChdir:
      return errnoError(fmt::format("run {}: working directory {}", program, request.working_dir),
                        err);
    default:
      return errnoError(fmt::format("run {}: set up child", program), err);
  }
}

// Blocks SIGPIPE in the calling thread while run() writes the child's stdin, so a child that
// exits without reading it makes write(2) fail with EPIPE instead of killing the agent. A
// SIGPIPE raised meanwhile is consumed before the mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      timespec zero{};
      while (::sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

Status validate(const ProcessRequest& request) {
  if (request.argv.empty() || request.argv.front().empty()) {
    return Error("run: empty argv", ErrorCode::kInvalidArgument);
  }
  for (std::size_t i = 0; i < request.argv.size(); ++i) {
    if (hasNul(request.argv[i])) {
      return Error(fmt::format("run {}: argument {} contains a NUL byte", request.argv.front(), i),
                   ErrorCode::kInvalidArgument);
    }
  }
  for (const auto& [name, value] : request.env) {
    if (name.empty() || name.find('=') != std::string::npos || hasNul(name) || hasNul(value)) {
      return Error(fmt::format("run {}: invalid environment variable name or value for {}",
                               request.argv.front(), formatArgv({name})),
                   ErrorCode::kInvalidArgument);
    }
  }
  if (hasNul(request.working_dir)) {
    return Error(fmt::format("run {}: working directory contains a NUL byte", request.argv.front()),
                 ErrorCode::kInvalidArgument);
  }
  if (request.timeout < milliseconds::zero() || request.kill_grace < milliseconds::zero()) {
    return Error(fmt::format("run {}: negative timeout or kill grace", request.argv.front()),
                 ErrorCode::kInvalidArgument);
  }
  return ok();
}

// The child's environment as "NAME=value" strings, and the PATH a bare program name is looked up
// in (the one the child will see).
struct ChildEnv {
  std::vector<std::string> entries;
  std::string path;
};

ChildEnv buildEnv(const ProcessRequest& request) {
  ChildEnv env;
  std::optional<std::string> path;
  if (request.inherit_env) {
    for (char** e = ::environ; e != nullptr && *e != nullptr; ++e) {
      std::string_view entry(*e);
      std::size_t eq = entry.find('=');
      if (eq == std::string_view::npos) continue;  // not a variable; execve would pass it on
      std::string name(entry.substr(0, eq));
      if (request.env.contains(name)) continue;
      if (name == "PATH") path = std::string(entry.substr(eq + 1));
      env.entries.emplace_back(entry);
    }
  }
  for (const auto& [name, value] : request.env) {
    if (name == "PATH") path = value;
    env.entries.push_back(fmt::format("{}={}", name, value));
  }
  env.path = path.value_or(std::string(kDefaultPath));
  return env;
}

std::string_view trimmed(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  std::size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  std::size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

}  // namespace

// One procedure in numbered steps (1)-(5) whose descriptors pass from step to step; kept whole.
Result<ProcessResult> BoostProcessRunner::run(const ProcessRequest& request) {
  EKCO_TRY(validate(request));
  ChildEnv env = buildEnv(request);
  auto exe = resolveProgram(request.argv.front(), env.path);
  EKCO_TRY(exe);

  // (1) Everything the child needs, prepared before fork: the child may not allocate.
  std::vector<std::string> args = request.argv;
  std::vector<char*> argv_ptrs;
  argv_ptrs.reserve(args.size() + 1);
  for (std::string& a : args) argv_ptrs.push_back(a.data());
  argv_ptrs.push_back(nullptr);
  std::vector<char*> env_ptrs;
  env_ptrs.reserve(env.entries.size() + 1);
  for (std::string& e : env.entries) env_ptrs.push_back(e.data());
  env_ptrs.push_back(nullptr);

  // (2) Pipes. Without stdin data the child reads /dev/null, never the agent's stdin.
  auto context = [&](std::string_view what) {
    return fmt::format("run {}: {}", request.argv.front(), what);
  };
  UniqueFd stdin_parent;
  UniqueFd stdin_child;
  if (request.stdin_data.empty()) {
    stdin_child = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!stdin_child.valid()) return errnoError(context("open /dev/null"), errno);
  } else {
    auto p = makePipe();
    if (!p) return std::move(p).error().wrap(context("stdin"));
    stdin_parent = std::move(p->write);
    stdin_child = std::move(p->read);
    EKCO_TRY(setNonBlocking(stdin_parent.get()));
  }
  auto out = makePipe();
  if (!out) return std::move(out).error().wrap(context("stdout"));
  auto err = makePipe();
  if (!err) return std::move(err).error().wrap(context("stderr"));
  EKCO_TRY(setNonBlocking(out->read.get()));
  EKCO_TRY(setNonBlocking(err->read.get()));

  std::optional<SigpipeBlock> sigpipe_block;
  if (!request.stdin_data.empty()) sigpipe_block.emplace();

  // (3) Spawn. Boost reports its own failures (pipe, fork) through `ec`, the child its failures
  // through the status pipe; anything Boost still throws stops here.
  auto status = makePipe();
  if (!status) return std::move(status).error().wrap(context("status pipe"));
  ChildSetup setup;
  setup.exe = exe->c_str();
  setup.argv = argv_ptrs.data();
  setup.envp = env_ptrs.data();
  setup.working_dir = request.working_dir.empty() ? nullptr : request.working_dir.c_str();
  setup.stdio = {stdin_child.get(), out->write.get(), err->write.get()};
  setup.status_fd = status->write.get();
  MonoTime start = clock_.monoNow();
  pid_t pid = -1;
  std::error_code ec;
  try {
    bp::child child(setup, ec);
    if (!ec) {
      pid = child.id();
      child.detach();  // reaped below; child's destructor would otherwise terminate it
    }
  } catch (const std::exception& e) {
    return Error(fmt::format("run {}: {}", request.argv.front(), e.what()), ErrorCode::kIo);
  }
  if (ec) return errnoError(context("start"), ec.value());

  // (4) The parent keeps only its own ends, so it sees end of file when the child is done.
  status->write.reset();
  if (auto failure = readChildFailure(status->read.get())) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return childFailureError(request, *failure);
  }
  stdin_child.reset();
  out->write.reset();
  err->write.reset();

  // (5) Supervise and reap. A pidfd (Linux 5.3+) reports the exit without polling. Through
  // syscall(2): glibc 2.36's <sys/pidfd.h> lacks extern "C", so its pidfd_open does not link.
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  ProcessResult result;
  EKCO_TRY(superviseChild(request, clock_, start,
                          {.pid = pid,
                           .pidfd = std::move(pidfd),
                           .stdin_fd = std::move(stdin_parent),
                           .stdout_fd = std::move(out->read),
                           .stderr_fd = std::move(err->read)},
                          result));
  result.duration = clock_.monoNow() - start;
  return result;
}

std::string formatArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
    });
    if (plain) {
      out += arg;
      continue;
    }
    out += '\'';
    for (char c : arg) {
      if (c == '\'') {
        out += "'\\''";
      } else {
        out += c;
      }
    }
    out += '\'';
  }
  return out;
}

Error failureError(const ProcessRequest& request, const ProcessResult& result) {
  std::string how;
  ErrorCode code = ErrorCode::kUnknown;
  if (result.timed_out) {
    how = fmt::format("timed out after {}ms", request.timeout.count());
    code = ErrorCode::kTimeout;
  } else if (result.term_signal != 0) {
    how = fmt::format("killed by signal {} ({})", result.term_signal,
                      sigabbrev_np(result.term_signal) != nullptr
                          ? fmt::format("SIG{}", sigabbrev_np(result.term_signal))
                          : std::string("unknown"));
  } else {
    how = fmt::format("exited with status {}", result.exit_code);
  }
  std::string_view detail = trimmed(result.stderr_data);
  if (detail.empty()) detail = trimmed(result.stdout_data);
  constexpr std::size_t kTail = 1024;
  if (detail.size() > kTail) detail = detail.substr(detail.size() - kTail);
  std::string message = fmt::format("{}: {}", formatArgv(request.argv), how);
  if (!detail.empty()) message += fmt::format(": {}", detail);
  return Error(std::move(message), code);
}

}  // namespace ekco::base
