// The parent's side of a running child (base/os/process_supervisor.h): poll(2) over its pipes and
// its pidfd, the timeout's SIGTERM/SIGKILL to its process group, and waitpid(2). Starting it is
// base/os/process.cc's.
#include "base/os/process_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace ekco::base {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

// How long output may stay open after the child exited before its process group is killed.
constexpr milliseconds kLeftoverGrace = 250ms;
// How long to keep reading after SIGKILL, for output still buffered in the pipes; bounds the wait
// when the pipes are held by a process outside the group.
constexpr milliseconds kKilledDrain = 250ms;
// Without a pidfd (kernels before 5.3) the child's exit is polled with this backoff.
constexpr milliseconds kExitPollMin = 1ms;
constexpr milliseconds kExitPollMax = 50ms;
constexpr std::size_t kChunk = 64 * 1024;

// True once the child has terminated; leaves it unreaped (WNOWAIT), so its pid, and with it the
// process group id, cannot be reused while the group may still be signalled.
bool hasExited(pid_t pid) {
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    if (errno != EINTR) return true;  // ECHILD: nothing left to wait for
  }
  return info.si_pid != 0;
}

void killGroup(pid_t pgid, int sig) { ::kill(-pgid, sig); }

// t + d, or MonoTime::max() where that would overflow (milliseconds::max() as "forever").
MonoTime addClamped(MonoTime t, milliseconds d) {
  using std::chrono::nanoseconds;
  constexpr auto kMax = std::chrono::duration_cast<milliseconds>(nanoseconds::max());
  if (d >= kMax || MonoTime::max() - t <= nanoseconds(d)) return MonoTime::max();
  return t + d;
}

timespec toTimespec(std::chrono::nanoseconds d) {
  if (d < std::chrono::nanoseconds::zero()) d = std::chrono::nanoseconds::zero();
  auto secs = std::chrono::duration_cast<std::chrono::seconds>(d);
  return timespec{.tv_sec = static_cast<time_t>(secs.count()),
                  .tv_nsec = static_cast<long>((d - secs).count())};
}

// One captured output stream.
struct Output {
  UniqueFd fd;
  std::string* data = nullptr;
  std::size_t limit = 0;
  bool truncated = false;
  // ProcessRequest::on_output_line (null or empty: no streaming) and what it is called with.
  const std::function<void(OutputStream, std::string_view)>* on_line = nullptr;
  OutputStream stream = OutputStream::kStdout;
  std::string partial{};  // the current line so far, when streaming

  // Reads what is available; closes the descriptor at end of file.
  void drain() {
    std::array<char, kChunk> buf;
    while (fd.valid()) {
      ssize_t n = ::read(fd.get(), buf.data(), buf.size());
      if (n > 0) {
        std::size_t room = limit - std::min(limit, data->size());
        std::size_t keep = std::min(room, static_cast<std::size_t>(n));
        data->append(buf.data(), keep);
        if (keep < static_cast<std::size_t>(n)) truncated = true;
        feedLines(std::string_view(buf.data(), static_cast<std::size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      fd.reset();  // end of file, or an error that more reading will not fix
      flushLine();
    }
  }

  // Passes the unterminated last line, if any (end of file, or the run is over).
  void flushLine() {
    if (streaming() && !partial.empty()) {
      (*on_line)(stream, partial);
      partial.clear();
    }
  }

 private:
  bool streaming() const { return on_line != nullptr && *on_line; }

  void feedLines(std::string_view chunk) {
    if (!streaming()) return;
    while (!chunk.empty()) {
      const std::size_t nl = chunk.find('\n');
      const std::size_t take = nl == std::string_view::npos ? chunk.size() : nl;
      const std::size_t fits = std::min(take, kMaxOutputLine - partial.size());
      partial.append(chunk.substr(0, fits));
      chunk.remove_prefix(fits);
      if (partial.size() == kMaxOutputLine || (fits == take && nl != std::string_view::npos)) {
        (*on_line)(stream, partial);
        partial.clear();
        if (fits == take && nl != std::string_view::npos) chunk.remove_prefix(1);  // the '\n'
      }
    }
  }
};

// The parent's side of a running child: feeds stdin, collects output, enforces the timeout and
// the leftover rule, then reaps. See BoostProcessRunner in process.h for the contract.
class Supervisor {
 public:
  Supervisor(const ProcessRequest& request, const Clock& clock, pid_t pid, UniqueFd pidfd,
             UniqueFd stdin_fd, UniqueFd stdout_fd, UniqueFd stderr_fd, ProcessResult& result)
      : request_(request),
        clock_(clock),
        pid_(pid),
        pidfd_(std::move(pidfd)),
        stdin_(std::move(stdin_fd)),
        out_{.fd = std::move(stdout_fd),
             .data = &result.stdout_data,
             .limit = request.max_output_bytes,
             .on_line = &request.on_output_line,
             .stream = OutputStream::kStdout},
        err_{.fd = std::move(stderr_fd),
             .data = &result.stderr_data,
             .limit = request.max_output_bytes,
             .on_line = &request.on_output_line,
             .stream = OutputStream::kStderr},
        result_(result) {}

  Status run(MonoTime start) {
    start_ = start;
    deadline_ = request_.timeout > milliseconds::zero() ? addClamped(start, request_.timeout)
                                                        : MonoTime::max();
    if (request_.on_heartbeat && request_.heartbeat_interval > milliseconds::zero()) {
      next_heartbeat_ = addClamped(start, request_.heartbeat_interval);
    }
    while (step()) {
    }
    out_.flushLine();  // pipes still held by something outside the group when reading stopped
    err_.flushLine();
    result_.output_truncated = out_.truncated || err_.truncated;
    return reap();
  }

 private:
  enum class Phase {
    kRunning,       // the child runs; deadline_ is the timeout
    kTerminating,   // SIGTERM sent; deadline_ ends kill_grace
    kLeaderExited,  // the child exited; deadline_ ends kLeftoverGrace
    kKilled,        // SIGKILL sent; deadline_ ends kKilledDrain
  };

  // One round of waiting and I/O; false when the run is over.
  bool step() {
    if (!exited_ && hasExited(pid_)) {
      exited_ = true;
      if (phase_ == Phase::kRunning) {
        enter(Phase::kLeaderExited, kLeftoverGrace);
      } else if (phase_ == Phase::kTerminating) {
        kill(SIGKILL);  // the rest of the group, which the SIGTERM may have spared
      }
    }
    if (!out_.fd.valid() && !err_.fd.valid() && (exited_ || phase_ == Phase::kKilled)) {
      return false;
    }
    heartbeat();
    if (phase_ == Phase::kRunning && !exited_ && request_.cancelled && request_.cancelled()) {
      result_.cancelled = true;
      if (request_.kill_grace > milliseconds::zero()) {
        killGroup(pid_, SIGTERM);
        enter(Phase::kTerminating, request_.kill_grace);
      } else {
        kill(SIGKILL);
      }
      return true;
    }
    if (clock_.monoNow() >= deadline_) {
      switch (phase_) {
        case Phase::kRunning:
          result_.timed_out = true;
          if (request_.kill_grace > milliseconds::zero()) {
            killGroup(pid_, SIGTERM);
            enter(Phase::kTerminating, request_.kill_grace);
          } else {
            kill(SIGKILL);
          }
          return true;
        case Phase::kTerminating:
        case Phase::kLeaderExited:
          kill(SIGKILL);
          return true;
        case Phase::kKilled:
          return false;  // the pipes are held outside the group: stop reading
      }
    }
    waitForEvents();
    return true;
  }

  // Calls on_heartbeat once its time has come (at most once per step: a late step does not
  // catch up with the ones it missed) while the child is still running.
  void heartbeat() {
    if (next_heartbeat_ == MonoTime::max()) return;
    if (phase_ != Phase::kRunning || exited_) {
      next_heartbeat_ = MonoTime::max();
      return;
    }
    const MonoTime now = clock_.monoNow();
    if (now < next_heartbeat_) return;
    request_.on_heartbeat(std::chrono::duration_cast<milliseconds>(now - start_));
    next_heartbeat_ = addClamped(now, request_.heartbeat_interval);
  }

  void enter(Phase phase, milliseconds for_how_long) {
    phase_ = phase;
    deadline_ = addClamped(clock_.monoNow(), for_how_long);
    if (phase != Phase::kRunning) stdin_.reset();
  }

  void kill(int sig) {
    killGroup(pid_, sig);
    enter(Phase::kKilled, kKilledDrain);
  }

  void waitForEvents() {
    std::array<pollfd, 4> fds{};
    nfds_t n = 0;
    int stdin_at = -1;
    int out_at = -1;
    int err_at = -1;
    if (stdin_.valid()) {
      stdin_at = static_cast<int>(n);
      fds[n++] = pollfd{.fd = stdin_.get(), .events = POLLOUT, .revents = 0};
    }
    if (out_.fd.valid()) {
      out_at = static_cast<int>(n);
      fds[n++] = pollfd{.fd = out_.fd.get(), .events = POLLIN, .revents = 0};
    }
    if (err_.fd.valid()) {
      err_at = static_cast<int>(n);
      fds[n++] = pollfd{.fd = err_.fd.get(), .events = POLLIN, .revents = 0};
    }
    bool exit_polled = !exited_ && !pidfd_.valid();
    if (!exited_ && pidfd_.valid()) {
      fds[n++] = pollfd{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
    }

    std::optional<std::chrono::nanoseconds> wait;
    const MonoTime wake = std::min(deadline_, next_heartbeat_);
    if (wake != MonoTime::max()) wait = wake - clock_.monoNow();
    if (request_.cancelled && phase_ == Phase::kRunning) {  // ask it every 100 ms
      const std::chrono::nanoseconds poll = std::chrono::milliseconds(100);
      wait = wait ? std::min<std::chrono::nanoseconds>(*wait, poll) : poll;
    }
    if (exit_polled) {
      wait = wait ? std::min<std::chrono::nanoseconds>(*wait, exit_poll_) : exit_poll_;
      exit_poll_ = std::min<std::chrono::nanoseconds>(exit_poll_ * 2, kExitPollMax);
    }
    timespec ts{};
    if (wait) ts = toTimespec(*wait);
    if (::ppoll(fds.data(), n, wait ? &ts : nullptr, nullptr) <= 0) return;  // timeout or EINTR

    if (stdin_at >= 0 && fds[stdin_at].revents != 0) writeStdin();
    if (out_at >= 0 && fds[out_at].revents != 0) out_.drain();
    if (err_at >= 0 && fds[err_at].revents != 0) err_.drain();
  }

  void writeStdin() {
    const std::string& data = request_.stdin_data;
    while (stdin_written_ < data.size()) {
      std::size_t len = std::min(kChunk, data.size() - stdin_written_);
      ssize_t n = ::write(stdin_.get(), data.data() + stdin_written_, len);
      if (n >= 0) {
        stdin_written_ += static_cast<std::size_t>(n);
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else {
        break;  // EPIPE: the child stopped reading, which is its business
      }
    }
    stdin_.reset();  // all written (or unwritable): the child sees end of file
  }

  Status reap() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0) {
      // ECHILD: something else reaped the child (SIGCHLD ignored, or a wait(-1) elsewhere) and
      // its status is lost.
      if (errno != EINTR) {
        return errnoError(fmt::format("run {}: wait", request_.argv.front()), errno);
      }
    }
    if (WIFEXITED(status)) {
      result_.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result_.exit_code = -1;
      result_.term_signal = WTERMSIG(status);
    }
    return ok();
  }

  const ProcessRequest& request_;
  const Clock& clock_;
  const pid_t pid_;
  UniqueFd pidfd_;
  UniqueFd stdin_;
  Output out_;
  Output err_;
  ProcessResult& result_;
  Phase phase_ = Phase::kRunning;
  MonoTime deadline_ = MonoTime::max();
  MonoTime start_{};
  MonoTime next_heartbeat_ = MonoTime::max();
  bool exited_ = false;
  std::size_t stdin_written_ = 0;
  std::chrono::nanoseconds exit_poll_ = kExitPollMin;
};

}  // namespace

Status superviseChild(const ProcessRequest& request, const Clock& clock, MonoTime start,
                      StartedChild child, ProcessResult& result) {
  Supervisor supervisor(request, clock, child.pid, std::move(child.pidfd),
                        std::move(child.stdin_fd), std::move(child.stdout_fd),
                        std::move(child.stderr_fd), result);
  return supervisor.run(start);
}

}  // namespace ekco::base
