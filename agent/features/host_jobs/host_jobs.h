// Runs HostJobs (hostjobs.ekco.kurl.sh; the spec and its rules:
// agent/features/host_jobs/host_job_spec.h) on this node: every agent, with enable_host_jobs (root
// on every node: an explicit opt-in).
//
// For each HostJob in the cache, on each reconcile:
//   - status.nodes.<this node> is final (Succeeded, Failed, Rejected): done here, never again;
//   - a run of it is in progress in this process: wait for it;
//   - it says Running but this process does not run it (the agent restarted during the run):
//     Failed, "interrupted", not run again (a job runs at most once per node);
//   - the spec is rejected (a shell string, an empty argv, a hostPath outside the host root, an
//     unknown selector operator, ...): Rejected with the message, in status.nodes and
//     status.message, a Warning Event JobRejected; nothing runs;
//   - this Node (read from the API, not a cache) does not match nodeSelectorTerms: nothing;
//   - otherwise (1) status.nodes.<node> = Running with startTime, written before anything runs,
//     (2) the command runs on a thread of its own through the process runner (argv, no shell,
//     working directory hostPath under the host root, the timeout, SIGTERM then SIGKILL 10 s
//     later), so a long job never holds up the other node reconcilers, (3) its result
//     (Succeeded/Failed, exitCode, startTime, endTime, the last 4 KiB of output) is written to
//     status.nodes.<node> with an Event JobSucceeded or JobFailed (Warning), (4) the agent
//     recomputes status.summary over the nodes the job selects and, when every one of them has
//     finished, sets status.completed: true and records JobCompleted (a status update with the
//     resourceVersion: exactly one agent wins it).
// A HostJob deleted (or being deleted) while its command runs: the run is stopped (SIGTERM,
// then SIGKILL) and nothing more is written.
//
// Status writes are JSON merge patches of the status subresource naming only this node's entry,
// so agents never overwrite each other's results.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "agent/controller/spec.h"
#include "agent/controller/watch.h"
#include "agent/features/host_jobs/host_job_spec.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "kube/client.h"

namespace ekco::agent {

// The HostJobs (every agent's watch, with enable_host_jobs).
struct ObservedHostJobs {
  bool synced = false;  // listed at least once, or the API does not serve hostjobs (no CRD)
  std::vector<HostJobRecord> jobs{};
};

// "hostjobs": every HostJob (node scope). A cluster without the CRD is listed and empty.
WatchSpec hostJobsWatch();

struct HostJobsOptions {
  std::string node_name{};
  std::string host_root = "/";  // as this process sees it; hostPath is resolved under it
  bool dry_run = false;
  std::chrono::milliseconds kill_grace{std::chrono::seconds(10)};
  std::function<void(std::string_view kind)> count_action{};
  std::function<void(std::string_view what, const std::string& message)> report{};
};

class HostJobs final : public Controller {
 public:
  HostJobs(std::function<ObservedHostJobs()> observe, kube::KubeClient& kube,
           const base::Clock& clock, std::unique_ptr<base::ProcessRunner> runner,
           HostJobsOptions options);
  ~HostJobs() override;  // stops and joins every run
  std::string name() const override { return "host-jobs"; }
  base::Result<ReconcileResult> reconcile() override;
  // {"running": [names], "finished_here": n, "last": "..."}
  nlohmann::json status() const override;

 private:
  struct Run {
    std::string job;
    std::string uid;
    std::atomic<bool> cancel{false};
    std::atomic<bool> done{false};
    std::thread thread;
  };

  // The job's thread: runAndReport, and whatever happens in it the job ends (a status written
  // when the API answers) and the run is marked done.
  void execute(Run& run, HostJobSpec spec, std::string working_dir, base::WallTime started);
  // Runs the command and writes its result and Event; returns the result's message.
  std::string runAndReport(Run& run, const HostJobSpec& spec, const std::string& working_dir,
                           base::WallTime started);
  base::Status writeEntry(const std::string& job, const nlohmann::json& entry,
                          const nlohmann::json& extra = nlohmann::json::object());
  void event(const std::string& job, const std::string& uid, const std::string& reason,
             const std::string& message, const std::string& type = "Normal");
  void checkCompletion(const std::string& job, const std::string& uid);
  // The working directory as this process sees it, or why it is refused (outside the host root).
  base::Result<std::string> workingDir(const std::string& host_path) const;
  void reapFinishedLocked();

  std::function<ObservedHostJobs()> observe_;
  kube::KubeClient& kube_;
  const base::Clock& clock_;
  std::unique_ptr<base::ProcessRunner> runner_;
  HostJobsOptions o_;

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<Run>> runs_;  // by uid
  // The uids this process has run to the end: the cache may still say Running for a moment.
  std::set<std::string> finished_uids_;
  std::size_t finished_here_ = 0;
  std::string last_{};
};

ControllerSpec hostJobsSpec();

}  // namespace ekco::agent
