// Running other programs (kubeadm, crictl, systemctl, ...) behind an interface, so controllers can
// be tested against a recording fake (tests/fakes/scripted_process_runner.h) and only
// base/os/process.cc starts real processes.
//
// There is no shell anywhere: argv goes to execve(2) as it is, so an argument such as
// "$HOME; rm -rf x" reaches the program literally.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::base {

// Environment variables by name; ordered, so requests print and compare deterministically.
using Environment = std::map<std::string, std::string>;

enum class OutputStream { kStdout, kStderr };

struct ProcessRequest {
  // argv[0] is the program: a path containing '/' (absolute, or relative to working_dir), or a
  // bare name looked up in the PATH the child will see (see inherit_env). Empty PATH entries are
  // skipped rather than meaning ".", so a command never runs from an accidental directory; with
  // no PATH at all the systemd default is searched. The child receives argv unchanged, argv[0]
  // included (as execvp(3) does; Boost.Process would put the resolved path there).
  std::vector<std::string> argv{};

  // inherit_env = true: the child gets the agent's environment with `env` added on top (an entry
  // in `env` overrides an inherited one of the same name).
  // inherit_env = false: `env` is the child's whole environment; nothing is inherited.
  bool inherit_env = true;
  Environment env{};

  // Written to the child's stdin, which is then closed. Empty: stdin is /dev/null. A child that
  // exits without reading all of it is not an error.
  std::string stdin_data{};

  // The child's working directory; empty: the agent's. A directory that cannot be entered is an
  // Error (Boost.Process would silently run the child in the agent's directory instead).
  std::string working_dir{};

  // 0 = no timeout. When it passes, the child's whole process group gets SIGTERM, then SIGKILL
  // after kill_grace (immediately when kill_grace is 0), and the result has timed_out set.
  std::chrono::milliseconds timeout{0};
  std::chrono::milliseconds kill_grace{0};

  // Output beyond this many bytes per stream is read and discarded (output_truncated is set), so
  // a runaway child cannot exhaust the agent's memory and is never blocked on a full pipe.
  std::size_t max_output_bytes = std::size_t{64} << 20;

  // Optional: called with each line of output as it is read, while the child runs (to stream a
  // long-running program's progress to the log). The line has no '\n' (a trailing '\r' is
  // kept); a last line without '\n' is passed at end of file, and a line longer than
  // kMaxOutputLine bytes is passed in pieces of that size. It sees all output, including what
  // max_output_bytes discards from the captured copy. Called on run()'s thread, stdout and
  // stderr lines in the order they were read; it must not throw. Runners that do not stream
  // (test fakes) may ignore it.
  std::function<void(OutputStream stream, std::string_view line)> on_output_line{};

  // Optional: called every heartbeat_interval (> 0) while the child runs, with the time since
  // it started, so a caller can say what it is still waiting for when a long-running program is
  // silent. Called on run()'s thread, between reads; it must not throw. Not called once the
  // child has exited or been signalled. Runners that do not supervise a real child (test fakes)
  // may ignore it.
  std::chrono::milliseconds heartbeat_interval{0};
  std::function<void(std::chrono::milliseconds elapsed)> on_heartbeat{};

  // Optional: asked about every 100 ms while the child runs; once it answers true the child's
  // process group is stopped as on a timeout (SIGTERM, SIGKILL after kill_grace) and the result
  // has cancelled set (a job whose resource was deleted). Called on run()'s thread; it must not
  // throw. Runners that do not supervise a real child may ignore it.
  std::function<bool()> cancelled{};
};

inline constexpr std::size_t kMaxOutputLine = std::size_t{64} << 10;

// How a child ended. A non-zero exit, a signal or a timeout is a ProcessResult, not an Error:
// the caller decides what counts as failure (failureError() builds the usual message).
struct ProcessResult {
  int exit_code = 0;    // exit status; -1 when the child was killed by a signal
  int term_signal = 0;  // the signal that killed the child, 0 if it exited
  std::string stdout_data{};
  std::string stderr_data{};
  bool timed_out = false;
  bool output_truncated = false;  // stdout or stderr exceeded max_output_bytes
  bool cancelled = false;         // stopped because request.cancelled answered true
  std::chrono::nanoseconds duration{0};

  // Exited with status 0 within the timeout.
  bool success() const { return exit_code == 0 && term_signal == 0 && !timed_out && !cancelled; }
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;

  // Runs the program to completion and returns how it ended, with stdout and stderr captured
  // (read concurrently, so a child filling both pipes never deadlocks). An Error means the
  // program never ran: empty argv or an argument with a NUL byte (kInvalidArgument), program not
  // found (kNotFound), not executable (kPermissionDenied), working directory missing, or an OS
  // failure creating pipes or the process. Thread-safe: several threads may call run() at once.
  [[nodiscard]] virtual Result<ProcessResult> run(const ProcessRequest& request) = 0;
};

// The real runner, on Boost.Process (which only base/os/process.cc includes: it costs seconds of
// compile time per translation unit).
//
// The child runs in a new process group with default signal dispositions, an empty signal mask
// and no file descriptors other than stdin/stdout/stderr. The run ends when the child has exited
// and stdout and stderr are closed. Two cases end it early, killing the whole process group with
// SIGKILL, grandchildren included:
//   - the timeout passes (timed_out is set);
//   - the child has exited but something it left behind in its process group still holds stdout
//     or stderr open 250 ms later (its status is reported as usual).
// A process that moved itself to another process group or session (a daemon) is not killed; if it
// holds the output pipes, the runner stops reading them shortly after the group was killed.
// The child is always reaped. SIGCHLD must not be set to SIG_IGN in the agent (the kernel would
// then reap children itself and their status would be lost), and nothing else in the agent may
// call wait(-1).
class BoostProcessRunner final : public ProcessRunner {
 public:
  // `clock` measures the timeout and the duration; it must outlive the runner.
  explicit BoostProcessRunner(const Clock& clock) : clock_(clock) {}

  Result<ProcessResult> run(const ProcessRequest& request) override;

 private:
  const Clock& clock_;
};

// argv for messages: elements joined by spaces, those that are empty or contain spaces, quotes
// or shell metacharacters single-quoted ("kubeadm 'a b' ''"). Display only: nothing parses it.
std::string formatArgv(const std::vector<std::string>& argv);

// The Error for a run whose result the caller treats as failure:
// "kubeadm init: exited with status 1: <last 1 KiB of stderr, else of stdout>". kTimeout when the
// run timed out, kUnknown otherwise.
[[nodiscard]] Error failureError(const ProcessRequest& request, const ProcessResult& result);

}  // namespace ekco::base
