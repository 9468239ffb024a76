#include "haproxy/reload.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include <dirent.h>
#include <fmt/format.h>

#include "base/duration.h"
#include "base/os/unique_fd.h"

namespace ekco::haproxy {
namespace {

constexpr std::string_view kHaproxyName = "haproxy";

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;

  friend bool operator==(const FileId&, const FileId&) = default;
};

// The fields of /proc/PID/stat this file needs.
struct ProcStat {
  char state = '?';
  int ppid = 0;
  std::uint64_t start_time = 0;
};

// One process whose config files include config_path.
struct Candidate {
  int pid = 0;
  ProcStat stat{};
};

// What one scan of the process table found.
struct Scan {
  std::vector<HaproxyProcess> masters{};
  // HAProxy processes that could not be inspected for lack of permission (for the message when
  // nothing matched: an agent that is not root sees no HAProxy at all).
  int unreadable = 0;
  // HAProxy processes in the middle of execve(2) (comm set, command line still empty): a master
  // re-executing itself, which this scan could not match.
  int in_exec = 0;
};

std::optional<int> parsePid(std::string_view text) {
  if (text.empty() || text.front() == '0') return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// Reads a small /proc file whole. nullopt with errno set when it cannot be read.
std::optional<std::string> readSmallFile(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  std::string out;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// /proc/PID/stat: "pid (comm) state ppid ... starttime ...". comm may contain spaces and ')', so
// the fields are counted from the last ')'.
std::optional<ProcStat> parseProcStat(std::string_view text) {
  std::size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::istringstream in(std::string(text.substr(close + 1)));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string field; in >> field && fields.size() < 20;) fields.push_back(field);
  if (fields.size() < 20) return std::nullopt;
  ProcStat out;
  auto parse = [](const std::string& s, auto& value) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    return ec == std::errc() && end == s.data() + s.size();
  };
  if (fields[0].size() != 1) return std::nullopt;
  out.state = fields[0][0];
  if (!parse(fields[1], out.ppid) || !parse(fields[19], out.start_time)) return std::nullopt;
  return out;
}

std::optional<ProcStat> readProcStat(const std::string& pid_dir) {
  auto text = readSmallFile(pid_dir + "/stat");
  if (!text) return std::nullopt;
  return parseProcStat(*text);
}

// Whether the process catches SIGUSR2 (in /proc/PID/status, SigCgt has its bit and SigIgn not).
// A HAProxy master installs its handler only late in its start-up, and again after each re-exec
// (every reload): before that SIGUSR2 kills it (default action), and while it re-executes into
// "wait mode" it ignores SIGUSR2, losing the reload. nullopt: the process is gone.
std::optional<bool> catchesSigusr2(const std::string& pid_dir) {
  auto text = readSmallFile(pid_dir + "/status");
  if (!text) return std::nullopt;
  std::optional<std::uint64_t> caught;
  std::optional<std::uint64_t> ignored;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    auto mask = [&](std::string_view key, std::optional<std::uint64_t>& out) {
      if (!line.starts_with(key)) return;
      std::size_t start = line.find_first_not_of(" \t", key.size());
      if (start == std::string::npos) return;
      std::uint64_t value = 0;
      auto [end, ec] = std::from_chars(line.data() + start, line.data() + line.size(), value, 16);
      if (ec == std::errc()) out = value;
    };
    mask("SigCgt:", caught);
    mask("SigIgn:", ignored);
  }
  const std::uint64_t bit = std::uint64_t{1} << (SIGUSR2 - 1);
  return caught && ignored && (*caught & bit) != 0 && (*ignored & bit) == 0;
}

std::vector<std::string> splitCmdline(const std::string& raw) {
  std::vector<std::string> argv;
  std::size_t start = 0;
  while (start < raw.size()) {
    std::size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    argv.push_back(raw.substr(start, end - start));
    start = end + 1;
  }
  return argv;
}

std::string_view basename(std::string_view path) {
  std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// The config files on a HAProxy command line: every `-f PATH` and everything after `--`; and the
// `-C DIR` that relative ones are read from.
struct ConfigArgs {
  std::vector<std::string> files{};
  std::string chdir{};
};

ConfigArgs configArgs(const std::vector<std::string>& argv) {
  ConfigArgs out;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "--") {
      for (++i; i < argv.size(); ++i) out.files.push_back(argv[i]);
      break;
    }
    if (i + 1 < argv.size() && argv[i] == "-f") {
      out.files.push_back(argv[++i]);
    } else if (i + 1 < argv.size() && argv[i] == "-C") {
      out.chdir = argv[++i];
    }
  }
  return out;
}

std::optional<FileId> statId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

// `path` (absolute) resolved inside the directory `root` as if it were "/": absolute symbolic
// links stay inside it (openat2 RESOLVE_IN_ROOT). Falls back to following `root + path` on
// kernels or sandboxes without openat2.
std::optional<FileId> statInRoot(const std::string& root, const std::string& path) {
  base::UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return std::nullopt;
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, root_fd.get(), path.c_str(), &how, sizeof how);
  if (fd < 0) {
    if (errno == ENOSYS || errno == EPERM) return statId(root + path);
    return std::nullopt;
  }
  base::UniqueFd file(static_cast<int>(fd));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino};
}

bool isPermissionError(int err) { return err == EACCES || err == EPERM; }

enum class Match { kNo, kYes, kUnreadable, kInExec };

// Whether the process in `pid_dir` is a HAProxy that reads `config`.
Match servesConfig(const std::string& pid_dir, const FileId& config) {
  auto comm = readSmallFile(pid_dir + "/comm");
  if (!comm) return Match::kNo;  // exited (comm is readable by everyone)
  if (!comm->empty() && comm->back() == '\n') comm->pop_back();
  auto cmdline = readSmallFile(pid_dir + "/cmdline");
  if (!cmdline) {
    return *comm == kHaproxyName && isPermissionError(errno) ? Match::kUnreadable : Match::kNo;
  }
  std::vector<std::string> argv = splitCmdline(*cmdline);
  bool is_haproxy = *comm == kHaproxyName || (!argv.empty() && basename(argv[0]) == kHaproxyName);
  if (!is_haproxy) return Match::kNo;
  if (argv.empty()) {
    // A zombie (exited, not yet reaped) has no command line either.
    auto stat = readProcStat(pid_dir);
    return stat && stat->state != 'Z' && stat->state != 'X' ? Match::kInExec : Match::kNo;
  }

  ConfigArgs args = configArgs(argv);
  const std::string root = pid_dir + "/root";
  bool unreadable = false;
  for (const std::string& file : args.files) {
    if (file.empty()) continue;
    std::optional<FileId> id;
    if (file.front() == '/') {
      id = statInRoot(root, file);
    } else if (!args.chdir.empty() && args.chdir.front() == '/') {
      id = statInRoot(root, args.chdir + "/" + file);
    } else if (!args.chdir.empty()) {
      id = statId(pid_dir + "/cwd/" + args.chdir + "/" + file);
    } else {
      id = statId(pid_dir + "/cwd/" + file);
    }
    if (!id && isPermissionError(errno)) unreadable = true;
    if (id && *id == config) return Match::kYes;
  }
  return unreadable ? Match::kUnreadable : Match::kNo;
}

std::string pidDir(const ReloadOptions& options, int pid) {
  return options.proc_root + "/" + std::to_string(pid);
}

base::Result<Scan> scan(const std::string& config_path, const ReloadOptions& options) {
  struct stat st {};
  if (::stat(config_path.c_str(), &st) != 0) {
    return base::errnoError("HAProxy config " + config_path, errno);
  }
  const FileId config{st.st_dev, st.st_ino};

  DIR* dir = ::opendir(options.proc_root.c_str());
  if (dir == nullptr) {
    return base::errnoError("list processes in " + options.proc_root, errno);
  }
  std::vector<int> pids;
  errno = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (auto pid = parsePid(entry->d_name)) pids.push_back(*pid);
  }
  int read_errno = errno;
  ::closedir(dir);
  if (read_errno != 0) {
    return base::errnoError("list processes in " + options.proc_root, read_errno);
  }

  Scan out;
  std::map<int, Candidate> matching;  // by pid
  for (int pid : pids) {
    const std::string pid_dir = pidDir(options, pid);
    switch (servesConfig(pid_dir, config)) {
      case Match::kYes:
        break;
      case Match::kNo:
        continue;
      case Match::kUnreadable:
        ++out.unreadable;
        continue;
      case Match::kInExec:
        ++out.in_exec;
        continue;
    }
    auto stat = readProcStat(pid_dir);
    if (!stat) continue;  // exited meanwhile
    matching.emplace(pid, Candidate{.pid = pid, .stat = *stat});
  }

  for (const auto& [pid, candidate] : matching) {
    if (matching.contains(candidate.stat.ppid)) continue;
    // A worker whose master is re-executing (for a reload): the master's command line is empty
    // for a moment, so it did not match. The worker is not a master.
    if (auto parent_comm = readSmallFile(pidDir(options, candidate.stat.ppid) + "/comm");
        parent_comm && *parent_comm == std::string(kHaproxyName) + "\n") {
      continue;
    }
    HaproxyProcess master{.pid = pid, .start_time = candidate.stat.start_time};
    for (const auto& [child_pid, child] : matching) {
      if (child.stat.ppid == pid) {
        master.workers.push_back({.pid = child_pid, .start_time = child.stat.start_time});
      }
    }
    out.masters.push_back(std::move(master));
  }
  return out;
}

// A scan that is not fooled by a master in the middle of re-executing itself (a reload, or its
// switch to wait mode after forking a worker): while some HAProxy is in execve, scans again, up to
// confirm_timeout.
base::Result<Scan> settledScan(const std::string& config_path, const ReloadOptions& options) {
  const auto interval = std::max(options.poll_interval, std::chrono::milliseconds(1));
  for (auto waited = std::chrono::milliseconds(0);; waited += interval) {
    auto found = scan(config_path, options);
    if (!found || found->in_exec == 0 || waited >= options.confirm_timeout) return found;
    std::this_thread::sleep_for(interval);
  }
}

// The state of one signalled master while waiting.
struct Pending {
  HaproxyProcess before{};
  int new_worker = 0;  // 0: none yet
  bool exited = false;
};

// Whether `master` (pid and start time) still runs.
bool stillRuns(const ReloadOptions& options, const HaproxyProcess& master) {
  auto stat = readProcStat(pidDir(options, master.pid));
  return stat && stat->start_time == master.start_time;
}

enum class Readiness { kReady, kGone, kNotReady };

// Waits until `master` catches SIGUSR2, at most until `deadline`.
Readiness waitUntilReady(const HaproxyProcess& master, const base::Clock& clock,
                         base::MonoTime deadline, const ReloadOptions& options) {
  while (true) {
    auto catches = catchesSigusr2(pidDir(options, master.pid));
    if (!catches || !stillRuns(options, master)) return Readiness::kGone;
    if (*catches) return Readiness::kReady;
    if (clock.monoNow() >= deadline) return Readiness::kNotReady;
    std::this_thread::sleep_for(options.poll_interval);
  }
}

// Waits until each signalled master has forked a worker it did not have before, or exited, at
// most confirm_timeout.
base::Status awaitNewWorkers(std::vector<Pending>& pending, const std::string& config_path,
                             const base::Clock& clock, const ReloadOptions& options) {
  const base::MonoTime deadline = clock.monoNow() + options.confirm_timeout;
  while (!pending.empty()) {
    auto now_found = scan(config_path, options);
    if (!now_found) return std::move(now_found).error();
    bool waiting = false;
    for (Pending& p : pending) {
      if (p.new_worker != 0 || p.exited) continue;
      auto it = std::find_if(now_found->masters.begin(), now_found->masters.end(),
                             [&](const HaproxyProcess& m) {
                               return m.pid == p.before.pid && m.start_time == p.before.start_time;
                             });
      if (it != now_found->masters.end()) {
        for (const ProcessIdentity& worker : it->workers) {
          if (std::find(p.before.workers.begin(), p.before.workers.end(), worker) ==
              p.before.workers.end()) {
            p.new_worker = worker.pid;
            break;
          }
        }
      } else {
        // Not found as a master: while it re-executes, its command line can briefly be
        // unreadable, so it counts as gone only when the process itself is.
        p.exited = !stillRuns(options, p.before);
      }
      if (p.new_worker == 0 && !p.exited) waiting = true;
    }
    if (!waiting || clock.monoNow() >= deadline) break;
    std::this_thread::sleep_for(options.poll_interval);
  }

  return base::ok();
}

// The result's detail and confirmation: the masters reloaded (with their new workers), then
// those that exited or started none, then the problems found before signalling.
void describeReload(const std::vector<Pending>& pending, const std::vector<std::string>& problems,
                    const ReloadOptions& options, ReloadResult& result) {
  std::vector<std::string> parts;
  std::vector<std::string> reloaded;
  result.confirmed = !pending.empty() && problems.empty();
  for (const Pending& p : pending) {
    if (p.new_worker != 0) {
      reloaded.push_back(fmt::format("{} (new worker {})", p.before.pid, p.new_worker));
      continue;
    }
    result.confirmed = false;
    if (p.exited) {
      parts.push_back(fmt::format("master {} exited during the reload", p.before.pid));
    } else {
      parts.push_back(fmt::format(
          "master {} started no new worker within {}: the new config was probably rejected, the "
          "old worker keeps serving",
          p.before.pid, base::formatDuration(options.confirm_timeout)));
    }
  }
  if (!reloaded.empty()) {
    std::string joined;
    for (const std::string& r : reloaded) joined += (joined.empty() ? "" : ", ") + r;
    parts.insert(parts.begin(),
                 fmt::format("reloaded master{} {}", reloaded.size() > 1 ? "s" : "", joined));
  }
  parts.insert(parts.end(), problems.begin(), problems.end());
  for (const std::string& part : parts) {
    result.detail += (result.detail.empty() ? "" : "; ") + part;
  }
}

}  // namespace

base::Result<std::vector<HaproxyProcess>> findHaproxyMasters(const std::string& config_path,
                                                             const ReloadOptions& options) {
  auto found = settledScan(config_path, options);
  if (!found) return std::move(found).error();
  return std::move(found->masters);
}

base::Result<ReloadResult> reloadHaproxy(const std::string& config_path, const base::Clock& clock,
                                         const ReloadOptions& options) {
  auto found = settledScan(config_path, options);
  if (!found) return std::move(found).error();
  ReloadResult result;
  if (found->masters.empty()) {
    result.detail = "no HAProxy process serves " + config_path;
    if (found->unreadable > 0) {
      result.detail += fmt::format(
          " ({} HAProxy process(es) could not be inspected: permission denied; the agent needs "
          "root and the host PID namespace)",
          found->unreadable);
    }
    return result;
  }

  std::vector<Pending> pending;
  std::vector<std::string> problems;  // for the detail, after the reloaded masters
  const base::MonoTime ready_deadline = clock.monoNow() + options.confirm_timeout;
  for (const HaproxyProcess& master : found->masters) {
    Readiness readiness = waitUntilReady(master, clock, ready_deadline, options);
    if (readiness == Readiness::kGone) continue;  // exited since the scan
    if (readiness == Readiness::kNotReady) {
      result.not_ready.push_back(master.pid);
      problems.push_back(fmt::format(
          "master {} was not ready for a reload within {} (starting, or re-executing for another "
          "reload): not signalled",
          master.pid, base::formatDuration(options.confirm_timeout)));
      continue;
    }
    // The workers it has now: one it forked while starting up is not the reload's.
    HaproxyProcess before = master;
    if (auto now = scan(config_path, options)) {
      for (const HaproxyProcess& m : now->masters) {
        if (m.pid == master.pid && m.start_time == master.start_time) before = m;
      }
    }
    if (::kill(master.pid, SIGUSR2) != 0) {
      int err = errno;
      if (err == ESRCH) continue;  // exited since the check
      return base::errnoError(
          fmt::format("signal HAProxy master {} to reload {}", master.pid, config_path), err);
    }
    result.masters.push_back(master.pid);
    pending.push_back({.before = before});
  }
  if (pending.empty() && problems.empty()) {
    result.detail = "no HAProxy process serves " + config_path + " (its master exited)";
    return result;
  }

  EKCO_TRY(awaitNewWorkers(pending, config_path, clock, options));
  describeReload(pending, problems, options, result);
  return result;
}

}  // namespace ekco::haproxy
