#include "agent/features/api_address/change_node.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/edge/command_env.h"
#include "agent/features/api_address/set_kubeconfig_server.h"
#include "base/log/log.h"
#include "base/os/process.h"
#include "base/os/thread.h"
#include "base/strings.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/transport/kubeconfig.h"
#include "units/systemd_manager.h"

namespace ekco::agent {

using api_address::NodeResult;
using api_address::NodeTask;
using api_address::Step;
using api_address::StepState;
using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

std::string key(const std::string& id, Step step) {
  return id + "/" + std::string(api_address::stepName(step));
}

// The last non-empty line of `text`.
std::string lastLine(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  const auto nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

// What regen-cert says when it keeps a name the cluster reaches the apiserver by
// (agent/features/certs/certs_cmd.cc).
constexpr std::string_view kKeptName = "is not dropped: the cluster reaches the apiserver by it";

}  // namespace

ChangeNodeController::ChangeNodeController(ChangeNodeDeps deps, const base::Clock& clock,
                                           ChangeNodeOptions options)
    : deps_(std::move(deps)), clock_(clock), options_(std::move(options)) {}

ChangeNodeController::~ChangeNodeController() { join(); }

void ChangeNodeController::join() {
  std::thread t;
  {
    std::lock_guard lock(mu_);
    t = std::move(thread_);
  }
  if (t.joinable()) t.join();
}

Result<ReconcileResult> ChangeNodeController::reconcile() {
  ReconcileResult result;
  result.requeue_after = options_.interval;
  const ObservedNode own = deps_.own_node();
  if (!own.synced || !own.node) {
    result.summary = "waiting for this node's record";
    return result;
  }
  const auto task_text = own.node->annotation(api_address::kTaskAnnotation);
  if (!task_text) {
    result.summary = "no task";
    return result;
  }
  auto task = api_address::parseTask(*task_text);
  if (!task) return std::move(task).error().wrap("this node's task is left alone");
  std::optional<NodeResult> answer;
  if (auto r = own.node->annotation(api_address::kResultAnnotation)) {
    if (auto parsed = api_address::parseResult(*r)) answer = std::move(*parsed);
  }
  const bool answered = answer && answer->id == task->id && answer->step == task->step;
  if (answered && answer->state != StepState::kRunning) {
    result.summary = fmt::format("{} {}", api_address::stepName(task->step),
                                 answer->state == StepState::kDone ? "done" : "failed");
    return result;
  }
  std::unique_lock lock(mu_);
  if (running_) {
    result.summary = "running " + running_key_;
    result.requeue_after = options_.active_interval;
    return result;
  }
  const std::string k = key(task->id, task->step);
  if (finished_here_.contains(k)) {
    // Run by this process: never again, whatever the cache still says. Its final answer is
    // written until it gets out.
    if (unsent_answer_) {
      const std::string value = *unsent_answer_;
      lock.unlock();
      if (auto wrote = deps_.answer(value); !wrote) {
        result.requeue_after = options_.active_interval;
        return std::move(wrote).error().wrap("write this node's answer");
      }
      lock.lock();
      unsent_answer_.reset();
    }
    result.summary = fmt::format("{} finished", api_address::stepName(task->step));
    return result;
  }
  // A task nobody started that is older than a step may take: its request has ended (the
  // leader gave up on this node), it is not started now.
  if (!answered && clock_.wallNow() - task->at > api_address::kStepTimeout) {
    result.summary = fmt::format(
        "{} of request {} is older than {}m and was never started; not "
        "run",
        api_address::stepName(task->step), task->id,
        std::chrono::duration_cast<std::chrono::minutes>(api_address::kStepTimeout).count());
    return result;
  }
  // Not run by this process: a `running` answer is an earlier process's, killed mid-step.
  const bool resumed = answered;
  const std::string what = fmt::format("{} {} (request {})", resumed ? "resume" : "run",
                                       api_address::stepName(task->step), task->id);
  if (options_.dry_run) {
    result.plan = "would " + what;
    result.summary = result.plan;
    return result;
  }
  if (deps_.may_act && !deps_.may_act()) {
    result.summary = "not now: maintenance mode is on";
    return result;
  }
  if (thread_.joinable()) {
    lock.unlock();
    join();
    lock.lock();
  }
  running_ = true;
  running_key_ = k;
  base::logInfo("api address change: step", {{"node", options_.node_name}, {"step", what}});
  thread_ = base::startThread("api-address", [this, t = *task, resumed] { run(t, resumed); });
  result.summary = what;
  result.requeue_after = options_.active_interval;
  return result;
}

void ChangeNodeController::run(NodeTask task, bool resumed) {
  NodeResult r{.id = task.id, .step = task.step, .state = StepState::kRunning};
  base::Status wrote = deps_.answer(api_address::renderResult(r));
  if (wrote) {
    auto done = deps_.run_step(task, resumed);
    if (done) {
      r.state = StepState::kDone;
      r.why = *done;
    } else {
      r.state = StepState::kFailed;
      r.why = done.error().message();
    }
    base::logInfo("api address change: step ended",
                  {{"node", options_.node_name},
                   {"step", api_address::stepName(task.step)},
                   {"state", r.state == StepState::kDone ? "done" : "failed"},
                   {"why", r.why}});
    // The answer must get out: the leader waits for it. A few tries here, then each reconcile
    // tries again (the step itself is never run again by this process).
    for (int attempt = 0; attempt < 3; ++attempt) {
      wrote = deps_.answer(api_address::renderResult(r));
      if (wrote) break;
      std::this_thread::sleep_for(std::chrono::seconds(2));
    }
  }
  if (wrote && r.state == StepState::kDone && task.step == Step::kKubeconfigs &&
      deps_.restart_agent && task.server != options_.agent_server) {
    deps_.restart_agent("this node's kubeconfigs now point at " + task.server);
  }
  std::lock_guard lock(mu_);
  status_ = {{"request", task.id},
             {"step", api_address::stepName(task.step)},
             {"resumed", resumed},
             {"state", !wrote                          ? "answer not written"
                       : r.state == StepState::kDone   ? "done"
                       : r.state == StepState::kFailed ? "failed"
                                                       : "running"},
             {"why", wrote ? r.why : wrote.error().message()}};
  if (r.state != StepState::kRunning) {
    finished_here_.insert(running_key_);
    if (!wrote) unsent_answer_ = api_address::renderResult(r);
  }
  running_ = false;
  running_key_.clear();
}

json ChangeNodeController::status() const {
  std::lock_guard lock(mu_);
  json out = status_;
  if (running_) out["running"] = running_key_;
  return out;
}

Result<std::string> runNodeStep(const NodeStepHost& d, const NodeTask& task, bool resumed) {
  const std::string& host_root = d.host_root;
  if (task.step == Step::kCertificate || task.step == Step::kDropSans) {
    const bool add = task.step == Step::kCertificate;
    const std::vector<std::string>& names = add ? task.add : task.drop;
    if (names.empty()) return std::string("no name to change");
    base::BoostProcessRunner runner(d.clock);
    auto ran =
        runner.run({.argv = {d.ekco_bin, "regen-cert", add ? "--add-alt-names" : "--drop-alt-names",
                             fmt::format("{}", fmt::join(names, ",")), "--host-root", host_root,
                             "--node-name", d.node_name},
                    .timeout = std::chrono::minutes(10)});
    if (!ran) return std::move(ran).error().wrap("ekco regen-cert");
    if (ran->exit_code == 0) return lastLine(ran->stdout_data);
    if (!add && ran->stderr_data.find(kKeptName) != std::string::npos) {
      return "kept: " + lastLine(ran->stderr_data);
    }
    return Error(fmt::format("ekco regen-cert exited with status {}: {}", ran->exit_code,
                             lastLine(ran->stderr_data)),
                 ErrorCode::kUnknown);
  }
  const std::string kubelet_conf = "/etc/kubernetes/kubelet.conf";
  if (task.step == Step::kCheck) {
    if (auto answers = api_address::apiAnswersAt(d.host_fs, kubelet_conf, task.server, d.clock);
        !answers) {
      return std::move(answers).error().wrap("the new address does not answer on this node");
    }
    return "the API answers at " + task.server + " from this node";
  }
  if (auto answers = api_address::apiAnswersAt(d.host_fs, kubelet_conf, task.server, d.clock);
      !answers) {
    return std::move(answers).error().wrap("the new address does not answer on this node");
  }
  auto systemd = units::connectSystemd(units::systemBusAddress(host_root), d.clock);
  if (!systemd) return std::move(systemd).error();
  api_address::KubeconfigSwitchDeps deps{.fs = d.host_fs,
                                         .clock = d.clock,
                                         .systemd = systemd->get(),
                                         .verify = [&](base::WallTime since) {
                                           return api_address::kubeletWorksThrough(
                                               d.host_fs, kubelet_conf, d.node_name, since,
                                               d.clock);
                                         }};
  auto report = api_address::switchKubeconfigServer({.server = task.server,
                                                     .admin = task.admin,
                                                     .restart_when_unchanged = resumed,
                                                     .run_id = task.id,
                                                     .now = d.clock.wallNow(),
                                                     .verify_timeout = d.verify_timeout},
                                                    deps);
  if (!report) return std::move(report).error();
  return report->changed.empty() ? report->lines.back()
                                 : fmt::format("{} point at {}, kubelet restarted and verified",
                                               fmt::join(report->changed, ", "), task.server);
}

base::Status writeNodeAnswer(const NodeStepHost& host, const std::string& value) {
  CommandClient c;
  EKCO_TRY(buildClient(c,
                       {.host_root = host.host_root,
                        .node_credentials = true,
                        .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(10),
                                                        .reporting_instance = host.node_name}},
                       kube::processEnvironment(), "/", host.clock));
  const json patch = {
      {"metadata", {{"annotations", {{std::string(api_address::kResultAnnotation), value}}}}}};
  auto patched =
      c.client->patch(kube::resources::kNodes, "", host.node_name, kube::PatchType::kMerge, patch);
  if (!patched) return std::move(patched).error();
  return base::ok();
}

ControllerSpec changeNodeSpec() {
  return {
      .name = "api-address-node",
      .scope = Scope::kNode,
      .status_key = "api_address_node",
      .enabled = [](const Config&) { return true; },
      .watches = {ownNodeWatch()},
      .pauses_in_maintenance = true,
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto own = observeOwnNode(d.watches);
        if (!own) return std::move(own).error();
        auto host = std::make_shared<NodeStepHost>(
            NodeStepHost{.host_root = d.host_root.empty() ? "/" : d.host_root,
                         .node_name = d.node_name,
                         .clock = d.clock,
                         .host_fs = d.host_fs});
        ChangeNodeDeps deps{
            .own_node = std::move(*own),
            .answer = [host](const std::string& value) { return writeNodeAnswer(*host, value); },
            .run_step = [host](const NodeTask& task,
                               bool resumed) { return runNodeStep(*host, task, resumed); },
            .may_act = d.may_act};
        // The agent's own connection came from the host's kubeconfig (from the packages): a
        // fresh process reads it again once it points elsewhere.
        if (!d.host_kubeconfig_server.empty()) deps.restart_agent = d.restart_agent;
        return std::make_shared<ChangeNodeController>(
            std::move(deps), d.clock,
            ChangeNodeOptions{.node_name = d.node_name,
                              .dry_run = d.dry_run,
                              .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  d.config.reconcile_interval),
                              .agent_server = d.host_kubeconfig_server});
      },
  };
}

}  // namespace ekco::agent
