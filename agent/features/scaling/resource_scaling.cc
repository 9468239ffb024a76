#include "agent/features/scaling/resource_scaling.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

constexpr std::size_t kHistory = 10;

std::string describe(const ScaledResource& t) {
  return fmt::format("{} {}/{}", t.resource.kind, t.ns, t.name);
}

}  // namespace

std::vector<ScaledResource> kurlMonitoringResources() {
  const kube::Resource prometheuses{.group = "monitoring.coreos.com",
                                    .version = "v1",
                                    .plural = "prometheuses",
                                    .kind = "Prometheus"};
  const kube::Resource alertmanagers{.group = "monitoring.coreos.com",
                                     .version = "v1",
                                     .plural = "alertmanagers",
                                     .kind = "Alertmanager"};
  return {
      {.resource = prometheuses, .ns = "monitoring", .name = "k8s", .cap = 2},
      {.resource = alertmanagers, .ns = "monitoring", .name = "prometheus-alertmanager", .cap = 3}};
}

std::optional<std::int64_t> desiredReplicas(std::int64_t current, std::int64_t nodes,
                                            std::int64_t cap) {
  if (nodes < 1 || cap < 1) return std::nullopt;
  if (current > cap) return std::nullopt;  // set by hand above what ekco would choose
  const std::int64_t want = std::min(cap, nodes);
  if (want == current) return std::nullopt;
  return want;
}

ResourceScalingController::ResourceScalingController(std::function<ObservedNodes()> observe,
                                                     kube::KubeClient& client,
                                                     ResourceScalingOptions options)
    : observe_(std::move(observe)), client_(client), options_(std::move(options)) {}

Result<ResourceScalingController::Outcome> ResourceScalingController::scale(
    const ScaledResource& target, std::int64_t nodes) {
  const std::string what = describe(target);
  const std::string key = target.resource.plural + "/" + target.ns + "/" + target.name;
  auto object = client_.get(target.resource, target.ns, target.name);
  if (!object) {
    if (object.error().code() == ErrorCode::kNotFound) {
      std::lock_guard lock(mu_);
      targets_status_[key] = {{"present", false}};
      return Outcome{.line = what + ": absent"};
    }
    if (object.error().code() == ErrorCode::kPermissionDenied) {
      // A DaemonSet install whose RBAC leaves monitoring out (deploy-monitoring/ not applied):
      // a choice, not an outage. Shown in /status, warned once, looked at again next interval.
      const std::string why = what +
                              ": not permitted to read it (kubectl apply -f "
                              "deploy-monitoring/ grants it); not scaled";
      if (forbidden_warned_.insert(key).second) {
        base::logWarn("resource scaling not permitted",
                      {{"resource", what}, {"error", object.error()}});
      }
      std::lock_guard lock(mu_);
      targets_status_[key] = {{"present", nullptr}, {"error", why}};
      return Outcome{.line = why};
    }
    return std::move(object).error().wrap("read " + what);
  }
  forbidden_warned_.erase(key);
  // The CRDs' default: an unset spec.replicas runs one.
  const std::int64_t current =
      kube::jsonInteger(kube::jsonField(*object, "spec"), "replicas").value_or(1);
  const std::string version = kube::jsonResourceVersion(*object);
  const std::optional<std::int64_t> desired = desiredReplicas(current, nodes, target.cap);
  {
    std::lock_guard lock(mu_);
    targets_status_[key] = {{"present", true},
                            {"replicas", current},
                            {"cap", target.cap},
                            {"nodes", nodes},
                            {"desired", desired ? json(*desired) : json(nullptr)}};
  }
  if (!desired) {
    return Outcome{.line = current > target.cap
                               ? fmt::format("{}: {} replicas, above the cap of {} (set by hand): "
                                             "left alone",
                                             what, current, target.cap)
                               : fmt::format("{}: {} replicas, as wanted", what, current)};
  }
  const std::string reason =
      fmt::format("{} nodes: min({}, {}) = {}", nodes, target.cap, nodes, *desired);
  const std::string line =
      fmt::format("{}: replicas {} -> {} ({})", what, current, *desired, reason);
  if (options_.effects.dry_run) {
    if (planned_.insert(key + "=" + std::to_string(*desired)).second) {
      base::logInfo("dry run: would scale",
                    {{"resource", what}, {"from", current}, {"to", *desired}, {"reason", reason}});
    }
    return Outcome{.line = "would scale " + line, .changed = true};
  }
  if (version.empty()) {
    return Error(what + ": the object has no metadata.resourceVersion; not patched",
                 ErrorCode::kInvalidArgument);
  }
  if (!options_.effects.leaderFresh()) {
    return Error(what + ": not patched: this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  const json patch =
      json::array({kube::resourceVersionTest(version),
                   {{"op", "add"}, {"path", "/spec/replicas"}, {"value", *desired}}});
  auto patched =
      client_.patch(target.resource, target.ns, target.name, kube::PatchType::kJson, patch);
  if (!patched) {
    const ErrorCode code = patched.error().code();
    if (code == ErrorCode::kInvalidArgument || code == ErrorCode::kConflict ||
        code == ErrorCode::kNotFound) {
      // Changed (or deleted) since it was read: decide again on what is there now.
      return Outcome{.line = what + ": changed since it was read; looking again", .conflict = true};
    }
    return std::move(patched).error().wrap("scale " + what);
  }
  base::logInfo("scaled",
                {{"resource", what}, {"from", current}, {"to", *desired}, {"reason", reason}});
  options_.effects.event(
      {.involved_resource = target.resource,
       .involved_namespace = target.ns,
       .involved_name = target.name,
       .reason = "Scaled",
       .message = fmt::format("ekco set spec.replicas {} -> {} ({})", current, *desired, reason)});
  options_.effects.count("replicas_scaled");
  {
    std::lock_guard lock(mu_);
    history_.push_back(
        {{"resource", what}, {"from", current}, {"to", *desired}, {"reason", reason}});
    if (history_.size() > kHistory) history_.erase(history_.begin());
  }
  return Outcome{.line = "scaled " + line, .changed = true};
}

Result<ReconcileResult> ResourceScalingController::reconcile() {
  const ObservedNodes observed = observe_();
  if (!observed.synced) return ReconcileResult{.summary = "waiting for the node cache"};
  const auto nodes = static_cast<std::int64_t>(observed.nodes.size());
  ReconcileResult result;
  bool changed = false;
  bool conflict = false;
  for (const ScaledResource& target : options_.targets) {
    auto outcome = scale(target, nodes);
    if (!outcome) return std::move(outcome).error();
    changed = changed || outcome->changed;
    conflict = conflict || outcome->conflict;
    if (!result.plan.empty()) result.plan += "\n";
    result.plan += outcome->line;
  }
  result.summary = conflict  ? "a scaled resource changed meanwhile; looking again"
                   : changed ? (options_.effects.dry_run ? "would scale (dry run)" : "scaled")
                             : "replicas as wanted";
  result.requeue_after = conflict ? std::chrono::milliseconds(kAfterConflict) : options_.interval;
  return result;
}

json ResourceScalingController::status() const {
  std::lock_guard lock(mu_);
  return {{"targets", targets_status_}, {"history", history_}};
}

ControllerSpec resourceScalingSpec() {
  return {
      .name = "resource-scaling",
      .scope = Scope::kLeader,
      .status_key = "resource_scaling",
      .enabled = [](const Config& c) { return c.auto_resource_scaling; },
      .watches = {clusterNodesWatch()},
      .pauses_in_maintenance = true,  // patches Prometheus/Alertmanager replicas
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        return std::make_shared<ResourceScalingController>(
            std::move(*nodes), d.client,
            ResourceScalingOptions{
                .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                    d.config.reconcile_interval),
                .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
