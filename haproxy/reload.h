// Making the running HAProxy load a new /etc/haproxy/haproxy.cfg without dropping established
// connections.
//
// HAProxy runs as a static pod (`haproxy -W -db -f /usr/local/etc/haproxy/haproxy.cfg`:
// master-worker mode) that mounts the host DIRECTORY /etc/haproxy, so after the agent replaces
// haproxy.cfg (temp file + rename: a new inode) the container sees the new file. A reload is
// SIGUSR2 to the HAProxy master: the master re-executes itself (same pid, same start time, and in
// HAProxy 2.6 the same command line; the new worker's gets "-sf OLD_WORKER -x sockpair@N" put in
// front), parses the config again and, if it is valid, forks a new worker with it and tells the old
// worker to finish its open connections and exit (soft stop). If the config is invalid, the master
// logs it ("Loading failure!"), starts no worker and keeps the old one serving; the next SIGUSR2
// with a valid file reloads normally.
//
// Why SIGUSR2 found through /proc, and not the alternatives:
//   - EKCO execs `kill -HUP 1` into the pod through the Kubernetes API (a master-worker HAProxy
//     treats SIGHUP like SIGUSR2). That needs the API server, which this load balancer itself
//     fronts: a node whose HAProxy points at dead apiservers may be unable to reach one to fix it.
//     It also needs pods/exec rights, a `kill` in the image and the pod's name, and it tells
//     nothing about whether the new config was accepted.
//   - The master CLI socket (`-S /path`, `reload` command) would need a socket in a hostPath
//     directory writable by the image's non-root haproxy user (uid 99), one more host directory
//     and one more protocol to keep compatible.
//   - /proc needs only that the agent runs as root in the host PID namespace (a host service, or
//     hostPID: true for a DaemonSet). The master is found by its config file, compared by identity
//     (st_dev + st_ino, resolved inside the process's own root), so it works across mount
//     namespaces and never signals an unrelated HAProxy.
//
// The master's answer is not observable through the signal, so the reload is verified by watching
// for a new worker: a child of the master that was not there before (pid AND start time, since
// pids are reused). No new worker within the timeout means the master rejected the config (the old
// worker keeps serving); ReloadResult says so rather than failing, because the caller's next step
// (re-render, report) is the same.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::haproxy {

struct ReloadOptions {
  // The process table. Tests pass a fake tree (dirs <pid>/ with comm, cmdline, stat, root, cwd).
  std::string proc_root = "/proc";
  // How long reloadHaproxy waits for every signalled master to start a new worker. Also the
  // bound on each of the shorter waits before it signals: for a master in the middle of execve
  // to show its command line, and for a starting master to catch SIGUSR2.
  std::chrono::milliseconds confirm_timeout{2000};
  // How often it looks.
  std::chrono::milliseconds poll_interval{20};
};

// One process, identified across pid reuse: start_time is field 22 of /proc/PID/stat (clock ticks
// after boot).
struct ProcessIdentity {
  int pid = 0;
  std::uint64_t start_time = 0;

  friend bool operator==(const ProcessIdentity&, const ProcessIdentity&) = default;
};

// A HAProxy master and its current workers (after a reload the old worker stays a child of the
// master until its last connection closes, so there may be several).
struct HaproxyProcess {
  int pid = 0;
  std::uint64_t start_time = 0;
  std::vector<ProcessIdentity> workers{};
};

struct ReloadResult {
  // The masters that were signalled. Empty with not_ready empty: no running HAProxy serves this
  // file (not an error: the static pod may not be running yet, and it reads the file when it
  // starts).
  std::vector<int> masters{};
  // Masters that were found but not signalled because they did not catch SIGUSR2 within
  // confirm_timeout (still starting, or re-executing for another reload): signalling them would
  // have killed them or been ignored. Try again later.
  std::vector<int> not_ready{};
  // Every master found was signalled and started a new worker within confirm_timeout. False when
  // `masters` is empty. The caller should retry later when it is false and masters or not_ready
  // is not empty.
  bool confirmed = false;
  // One line for the log and status, e.g. "reloaded master 1234 (new worker 1290)",
  // "no HAProxy process serves /etc/haproxy/haproxy.cfg", "master 1234 started no new worker
  // within 2s: the new config was probably rejected, the old worker keeps serving".
  std::string detail{};
};

// Every HAProxy master whose config file is `config_path` (a path in this process's view).
//
// Candidates are the processes under proc_root whose comm, or argv[0]'s basename, is "haproxy".
// Each config file of a candidate (every `-f PATH`, and every argument after `--`) is resolved in
// the candidate's view: an absolute path inside /proc/PID/root (symbolic links included, with
// openat2 RESOLVE_IN_ROOT where the kernel has it), a relative one against /proc/PID/cwd (or
// against `-C DIR`). A candidate matches when one of them is the same file (st_dev + st_ino) as
// config_path. A master is a matching candidate whose parent (stat field 4) is neither a matching
// candidate nor another "haproxy" (a master re-executing for a reload has an empty command line
// for a moment; its workers are not masters); its workers are the matching candidates whose parent
// it is. Sorted by pid.
//
// While a HAProxy process is in the middle of execve(2) (its command line empty: a master
// re-executing itself) the scan is repeated every poll_interval, up to confirm_timeout, so a
// master is not missed during its reload. Processes that vanish or cannot be read while scanning
// are skipped. Errors: config_path cannot be stat'ed (kNotFound, ...), proc_root cannot be listed;
// both name the path.
[[nodiscard]] base::Result<std::vector<HaproxyProcess>> findHaproxyMasters(
    const std::string& config_path, const ReloadOptions& options = ReloadOptions{});

// Sends SIGUSR2 to every master findHaproxyMasters finds (a master that is gone by then, ESRCH,
// is left out) and waits up to confirm_timeout, polling every poll_interval, until each has a
// worker it did not have before. `clock` measures the timeouts (monoNow only).
//
// A master is signalled only once it catches SIGUSR2 (SigCgt in /proc/PID/status); it waits up to
// confirm_timeout for that first. HAProxy 2.6 installs the handler late: a master that was just
// started, or that is re-executing itself for a reload, dies of SIGUSR2 (default action) before
// its image has set up signals, and while it re-executes into "wait mode" after forking a worker
// it ignores SIGUSR2 (the reload is silently lost). Both windows last tens of milliseconds; the
// check cannot close the race with a reload someone else triggers between the check and kill(2).
//
// Errors: those of findHaproxyMasters, and a master this process may not signal (EPERM,
// kPermissionDenied, naming the pid). A master that starts no new worker is not an error:
// confirmed is false and detail says which master and why.
[[nodiscard]] base::Result<ReloadResult> reloadHaproxy(
    const std::string& config_path, const base::Clock& clock,
    const ReloadOptions& options = ReloadOptions{});

}  // namespace ekco::haproxy
