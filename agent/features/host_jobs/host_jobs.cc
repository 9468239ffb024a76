#include "agent/features/host_jobs/host_jobs.h"

#include <fmt/format.h>

#include <filesystem>
#include <system_error>

#include "base/duration.h"
#include "base/log/log.h"
#include "base/os/thread.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

std::map<std::string, std::string> labelsOf(const json& node) {
  std::map<std::string, std::string> out;
  const json& labels = kube::jsonField(kube::jsonField(node, "metadata"), "labels");
  if (!labels.is_object()) return out;
  for (const auto& [k, v] : labels.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string phaseOf(const json& status, const std::string& node) {
  return kube::jsonText(kube::jsonField(kube::jsonField(status, "nodes"), node), "phase");
}

std::string describeExit(const base::ProcessResult& r, std::chrono::seconds timeout) {
  if (r.cancelled) return "stopped: the HostJob was deleted";
  if (r.timed_out) return fmt::format("timed out after {}", base::formatDuration(timeout));
  if (r.term_signal != 0) return fmt::format("killed by signal {}", r.term_signal);
  return fmt::format("exited with status {}", r.exit_code);
}

}  // namespace

HostJobs::HostJobs(std::function<ObservedHostJobs()> observe, kube::KubeClient& kube,
                   const base::Clock& clock, std::unique_ptr<base::ProcessRunner> runner,
                   HostJobsOptions options)
    : observe_(std::move(observe)),
      kube_(kube),
      clock_(clock),
      runner_(std::move(runner)),
      o_(std::move(options)) {}

HostJobs::~HostJobs() {
  std::map<std::string, std::unique_ptr<Run>> runs;
  {
    std::lock_guard lock(mu_);
    runs.swap(runs_);
  }
  for (auto& [uid, run] : runs) run->cancel = true;
  for (auto& [uid, run] : runs) {
    if (run->thread.joinable()) run->thread.join();
  }
}

void HostJobs::reapFinishedLocked() {
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (it->second->done) {
      if (it->second->thread.joinable()) it->second->thread.join();
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
}

base::Result<std::string> HostJobs::workingDir(const std::string& host_path) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = fs::canonical(o_.host_root.empty() ? "/" : o_.host_root, ec);
  if (ec) return Error("the host root " + o_.host_root + ": " + ec.message(), ErrorCode::kIo);
  const fs::path lexical = root / fs::path(host_path).relative_path();
  const fs::path real = fs::canonical(lexical, ec);
  if (ec) {
    return Error(
        fmt::format("spec.hostPath {}: {}", base::quoteForMessage(host_path), ec.message()),
        ErrorCode::kNotFound);
  }
  // Symlinks are resolved: the result must still be the root or under it.
  const std::string r = real.string();
  const std::string prefix = root.string() == "/" ? "/" : root.string() + "/";
  if (r != root.string() && r.compare(0, prefix.size(), prefix) != 0) {
    return Error(fmt::format("spec.hostPath {} leaves the host root (it resolves to {})",
                             base::quoteForMessage(host_path), base::quoteForMessage(r)),
                 ErrorCode::kEscape);
  }
  if (!fs::is_directory(real, ec)) {
    return Error(
        fmt::format("spec.hostPath {} is not a directory", base::quoteForMessage(host_path)),
        ErrorCode::kInvalidArgument);
  }
  return r;
}

base::Status HostJobs::writeEntry(const std::string& job, const json& entry, const json& extra) {
  json status = extra;
  status["nodes"] = {{o_.node_name, entry}};
  auto patched = kube_.patch(kHostJobResource, "", job, kube::PatchType::kMerge,
                             {{"status", status}}, "status");
  if (!patched) return std::move(patched).error().wrap("hostjob " + job + ": write its status");
  return base::ok();
}

void HostJobs::event(const std::string& job, const std::string& uid, const std::string& reason,
                     const std::string& message, const std::string& type) {
  auto recorded = kube_.recordEvent({.involved_resource = kHostJobResource,
                                     .involved_name = job,
                                     .involved_uid = uid,
                                     .reason = reason,
                                     .message = message,
                                     .type = type});
  if (!recorded && o_.report) o_.report("event", recorded.error().message());
}

base::Result<ReconcileResult> HostJobs::reconcile() {
  ReconcileResult result;
  const ObservedHostJobs observed = observe_();
  if (!observed.synced) {
    result.summary = "the hostjob cache has not synced";
    return result;
  }
  // Runs whose HostJob is gone, replaced or being deleted stop.
  {
    std::lock_guard lock(mu_);
    reapFinishedLocked();
    for (auto& [uid, run] : runs_) {
      bool live = false;
      for (const HostJobRecord& j : observed.jobs) {
        if (j.uid == uid && !j.deleting) live = true;
      }
      if (!live && !run->cancel.exchange(true)) {
        base::logInfo("stopping a host job: its HostJob was deleted",
                      {{"job", run->job}, {"node", o_.node_name}});
      }
    }
  }
  std::size_t started = 0;
  std::size_t running = 0;
  std::string plan;
  std::vector<Error> errors;
  std::optional<json> this_node;  // read once per reconcile, when a job needs it
  for (const HostJobRecord& job : observed.jobs) {
    if (job.deleting) continue;
    const std::string phase = phaseOf(job.status, o_.node_name);
    if (isFinalPhase(phase)) continue;
    {
      std::lock_guard lock(mu_);
      if (runs_.count(job.uid) != 0) {
        ++running;
        continue;
      }
      if (finished_uids_.count(job.uid) != 0) continue;
    }
    if (phase == kPhaseRunning) {
      // Started by this node's agent before it restarted: at most once, so not again.
      const std::string message =
          "interrupted: the agent restarted while the command ran; not run again";
      if (!o_.dry_run) {
        auto w = writeEntry(job.name, {{"phase", kPhaseFailed},
                                       {"message", message},
                                       {"endTime", kube::formatRfc3339(clock_.wallNow())}});
        if (!w) {
          errors.push_back(w.error());
          continue;
        }
        event(job.name, job.uid, "JobFailed", o_.node_name + ": " + message, "Warning");
        checkCompletion(job.name, job.uid);
      }
      continue;
    }
    ParsedHostJob parsed = parseHostJobSpec(job.spec);
    std::string rejection = parsed.rejection;
    std::string working_dir;
    if (parsed.spec) {
      if (!this_node) {
        auto node = kube_.get(kube::resources::kNodes, "", o_.node_name);
        if (!node) return std::move(node).error().wrap("host jobs: read this node");
        this_node = std::move(*node);
      }
      if (!selectsNode(*parsed.spec, o_.node_name, labelsOf(*this_node))) continue;
      auto dir = workingDir(parsed.spec->host_path);
      if (!dir) {
        rejection = dir.error().message();
      } else {
        working_dir = std::move(*dir);
      }
    }
    if (!rejection.empty()) {
      plan += fmt::format("reject {}: {}\n", job.name, rejection);
      if (o_.dry_run) continue;
      base::logWarn("host job rejected", {{"job", job.name}, {"reason", rejection}});
      auto w = writeEntry(job.name,
                          {{"phase", kPhaseRejected},
                           {"message", rejection},
                           {"endTime", kube::formatRfc3339(clock_.wallNow())}},
                          {{"message", "rejected: " + rejection}});
      if (!w) {
        errors.push_back(w.error());
        continue;
      }
      event(job.name, job.uid, "JobRejected",
            o_.node_name + ": nothing run: " + rejection +
                " (see docs/features/host-jobs.md#safety-rules)",
            "Warning");
      continue;
    }
    plan += fmt::format("run {}: {} in {}\n", job.name, base::formatArgv(parsed.spec->command),
                        parsed.spec->host_path);
    if (o_.dry_run) continue;
    // (1) Durable before anything runs: a restart finds Running and does not run it again.
    const base::WallTime now = clock_.wallNow();
    if (auto w = writeEntry(job.name,
                            {{"phase", kPhaseRunning}, {"startTime", kube::formatRfc3339(now)}});
        !w) {
      errors.push_back(w.error());
      continue;
    }
    // (2) Its own thread.
    auto run = std::make_unique<Run>();
    run->job = job.name;
    run->uid = job.uid;
    Run& ref = *run;
    {
      std::lock_guard lock(mu_);
      auto& slot = runs_[job.uid];
      slot = std::move(run);
      ref.thread = base::startThread(
          "host-job", [this, &ref, spec = std::move(*parsed.spec), dir = std::move(working_dir),
                       now]() mutable { execute(ref, std::move(spec), std::move(dir), now); });
    }
    if (o_.count_action) o_.count_action("host_job_started");
    ++started;
  }
  result.plan = plan;
  result.summary = o_.dry_run ? "dry run: " + std::to_string(observed.jobs.size()) + " hostjobs"
                              : fmt::format("{} hostjobs, {} running here, {} started",
                                            observed.jobs.size(), running + started, started);
  if (!errors.empty()) {
    std::string joined;
    for (const Error& e : errors) joined += (joined.empty() ? "" : "; ") + e.message();
    return Error("host jobs: " + joined, errors.front().code());
  }
  return result;
}

void HostJobs::execute(Run& run, HostJobSpec spec, std::string working_dir,
                       base::WallTime started) {
  std::string message;
  try {
    message = runAndReport(run, spec, working_dir, started);
  } catch (const std::exception& e) {
    // A bug, recovered here: the job must not stay Running, and the agent runs on.
    message = std::string("failed inside the agent: ") + e.what();
    base::logError("host job failed inside the agent",
                   {{"job", run.job}, {"node", o_.node_name}, {"error", e.what()}});
    if (!run.cancel) {
      try {
        const json entry = {{"phase", kPhaseFailed},
                            {"message", message},
                            {"startTime", kube::formatRfc3339(started)},
                            {"endTime", kube::formatRfc3339(clock_.wallNow())}};
        if (auto w = writeEntry(run.job, entry); !w && o_.report) {
          o_.report("host job status", w.error().message());
        }
      } catch (const std::exception& again) {
        base::logError("host job status not written",
                       {{"job", run.job}, {"node", o_.node_name}, {"error", again.what()}});
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    ++finished_here_;
    finished_uids_.insert(run.uid);
    last_ = run.job + ": " + message;
  }
  run.done = true;
}

std::string HostJobs::runAndReport(Run& run, const HostJobSpec& spec,
                                   const std::string& working_dir, base::WallTime started) {
  base::ProcessRequest request;
  request.argv = spec.command;
  request.inherit_env = false;
  request.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                 {"EKCO_HOST_ROOT", o_.host_root},
                 {"EKCO_NODE_NAME", o_.node_name},
                 {"EKCO_HOST_JOB", run.job}};
  request.working_dir = working_dir;
  request.timeout = spec.timeout;
  request.kill_grace = o_.kill_grace;
  request.max_output_bytes = std::size_t{1} << 20;
  std::string output;  // stdout and stderr lines as they came, bounded
  request.on_output_line = [&output](base::OutputStream, std::string_view line) {
    output.append(line);
    output.push_back('\n');
    if (output.size() > 4 * kHostJobOutputBytes) output = outputTail(output);
  };
  request.cancelled = [&run] { return run.cancel.load(); };
  base::logInfo(
      "running a host job",
      {{"job", run.job}, {"command", base::formatArgv(spec.command)}, {"dir", working_dir}});
  auto result = runner_->run(request);
  const base::WallTime ended = clock_.wallNow();
  json entry = {{"startTime", kube::formatRfc3339(started)},
                {"endTime", kube::formatRfc3339(ended)}};
  std::string message;
  bool ok = false;
  if (!result) {
    message = "did not run: " + result.error().message();
    entry["phase"] = kPhaseFailed;
  } else {
    ok = result->success();
    message = describeExit(*result, spec.timeout);
    entry["phase"] = ok ? kPhaseSucceeded : kPhaseFailed;
    entry["exitCode"] = result->exit_code;
    if (output.empty())
      output = result->stdout_data + result->stderr_data;  // a non-streaming runner
    entry["output"] = outputTail(output);
  }
  entry["message"] = message;
  base::logInfo("host job finished",
                {{"job", run.job}, {"node", o_.node_name}, {"result", message}});
  if (!run.cancel) {
    // (3) The result and its Event.
    if (auto w = writeEntry(run.job, entry); !w) {
      if (o_.report) o_.report("host job status", w.error().message());
    } else {
      event(run.job, run.uid, ok ? "JobSucceeded" : "JobFailed",
            fmt::format("{}: {} {}", o_.node_name, base::formatArgv(spec.command), message),
            ok ? "Normal" : "Warning");
      // (4) Completion.
      checkCompletion(run.job, run.uid);
    }
  }
  return message;
}

void HostJobs::checkCompletion(const std::string& job, const std::string& uid) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto current = kube_.get(kHostJobResource, "", job);
    if (!current) return;  // deleted meanwhile, or the API is away: the next result retries
    if (kube::jsonText(kube::jsonField(*current, "metadata"), "uid") != uid) return;
    json status = kube::jsonField(*current, "status");
    if (!status.is_object()) status = json::object();
    if (kube::jsonField(status, "completed") == json(true)) return;
    ParsedHostJob parsed = parseHostJobSpec(kube::jsonField(*current, "spec"));
    if (!parsed.spec) return;
    auto nodes = kube_.listAll(kube::resources::kNodes, "");
    if (!nodes) {
      if (o_.report) o_.report("host job completion", nodes.error().message());
      return;
    }
    std::vector<std::string> selected;
    const json& items = kube::jsonArray(*nodes, "items");
    for (const json& n : items) {
      const std::string name = kube::jsonText(kube::jsonField(n, "metadata"), "name");
      if (selectsNode(*parsed.spec, name, labelsOf(n))) selected.push_back(name);
    }
    const JobProgress progress = jobProgress(kube::jsonField(status, "nodes"), selected);
    const bool complete = progress.complete();
    if (kube::jsonText(status, "summary") == progress.summary() && !complete) return;
    status["summary"] = progress.summary();
    if (complete) status["completed"] = true;
    json object = *current;
    object["status"] = status;
    auto updated = kube_.update(kHostJobResource, "", object, "status");
    if (!updated) {
      if (updated.error().code() == ErrorCode::kConflict) continue;  // another agent wrote
      if (o_.report) o_.report("host job completion", updated.error().message());
      return;
    }
    if (complete) {
      base::logInfo("host job completed", {{"job", job}, {"summary", progress.summary()}});
      event(job, uid, "JobCompleted",
            fmt::format("Job completed on {} node(s), {} failed. Safe to delete.",
                        progress.selected, progress.failed));
    }
    return;
  }
}

json HostJobs::status() const {
  std::lock_guard lock(mu_);
  json running = json::array();
  for (const auto& [uid, run] : runs_) {
    if (!run->done) running.push_back(run->job);
  }
  return {{"running", running}, {"finished_here", finished_here_}, {"last", last_}};
}

WatchSpec hostJobsWatch() {
  return {.key = "hostjobs",
          .scope = Scope::kNode,
          .build = informerWatch<HostJobRecord>([](const WatchContext&) {
            return InformerSource<HostJobRecord>{.resource = kHostJobResource,
                                                 .project = projectHostJob,
                                                 .label = "hostjobs",
                                                 .what = "hostjob cache",
                                                 .absent_is_empty = true};
          })};
}

ControllerSpec hostJobsSpec() {
  return {.name = "host-jobs",
          .scope = Scope::kNode,
          .status_key = "host_jobs",
          .enabled = [](const Config& c) { return c.enable_host_jobs; },
          .watches = {hostJobsWatch()},
          // Not paused in maintenance: a HostJob is an administrator's explicit command (often
          // part of the very maintenance), not ekco acting on its own.
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            auto jobs = observeWatch<HostJobRecord>(d.watches, hostJobsWatch());
            if (!jobs) return std::move(jobs).error();
            return std::make_shared<HostJobs>(
                [observe = std::move(*jobs)] {
                  auto seen = observe();
                  return ObservedHostJobs{.synced = seen.synced, .jobs = std::move(seen.items)};
                },
                d.client, d.clock, std::make_unique<base::BoostProcessRunner>(d.clock),
                HostJobsOptions{.node_name = d.node_name,
                                .host_root = d.host_root,
                                .dry_run = d.dry_run,
                                .count_action = d.count_action,
                                .report = d.report});
          }};
}

}  // namespace ekco::agent
