#include "agent/features/reboot/node_recovery.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "base/log/log.h"
#include "base/utf8.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

std::string when(base::WallTime t) { return kube::formatRfc3339(t); }

std::string durationText(base::Duration d) {
  return base::formatDuration(std::chrono::duration_cast<milliseconds>(d));
}

bool readyTrue(const kube::NodeRecord& node) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  return ready != nullptr && ready->status == "True";
}

// Ready Unknown (the node lifecycle controller lost the kubelet) or False.
bool readyLost(const kube::NodeRecord& node) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  return ready != nullptr && (ready->status == "Unknown" || ready->status == "False");
}

NodeRecovery decide(const kube::NodeRecord& node, const NodeLease* lease, base::WallTime now,
                    const RecoveryRules& rules, bool& relevant) {
  NodeRecovery r{.node = node.name.str(), .beacon = beaconOf(node)};
  relevant = true;
  if (lease) r.lease_renewed = lease->renew_time;
  const kube::TaintRecord* oos = outOfServiceTaint(node);
  if (oos) r.tainted_at = oos->time_added;
  if (oos && !outOfServiceByEkco(node)) {
    r.state = RecoveryState::kPersonsTaint;
    r.reason = "the out-of-service taint was not applied by ekco: left alone";
    return r;
  }
  if (oos) {
    if (readyTrue(node)) {
      r.state = RecoveryState::kUntaintDue;
      r.partition = !r.beacon || node.boot_id.empty() || node.boot_id == r.beacon->boot_id;
      r.reason = r.partition
                     ? "the kubelet reports Ready again with the same boot id " +
                           (node.boot_id.empty() ? std::string("(none reported)") : node.boot_id) +
                           ": the node never rebooted (a partition)"
                     : "the kubelet reports Ready again after a reboot (boot id " +
                           r.beacon->boot_id + " -> " + node.boot_id + ")";
    } else {
      r.state = RecoveryState::kTainted;
      r.reason = "tainted out-of-service by ekco; waiting for the node to come back";
    }
    return r;
  }
  if (!r.beacon) {
    relevant = false;
    return r;
  }
  const Beacon& b = *r.beacon;
  if (!node.boot_id.empty() && node.boot_id != b.boot_id) {
    r.state = RecoveryState::kStaleBeacon;
    r.reason = "the kubelet reports boot id " + node.boot_id + ", not the beacon's " + b.boot_id +
               ": the node booted since";
    return r;
  }
  if (r.lease_renewed && *r.lease_renewed > base::saturatingAdd(b.at, rules.beacon_window)) {
    r.state = RecoveryState::kStaleBeacon;
    r.reason = fmt::format(
        "its Lease was renewed at {}, more than {} after the beacon ({}): the "
        "node kept running",
        when(*r.lease_renewed), durationText(rules.beacon_window), when(b.at));
    return r;
  }
  if (!readyLost(node)) {
    r.state = RecoveryState::kShuttingDown;
    r.reason = "shutting down since " + when(b.at) + "; the node still reports Ready";
    return r;
  }
  const base::WallTime silent_since = r.lease_renewed.value_or(b.at);
  r.due = base::saturatingAdd(silent_since, rules.lease_grace);
  const kube::ConditionRecord* ready = node.condition("Ready");
  const std::string ready_text = ready ? ready->status.str() : "?";
  if (now >= *r.due) {
    r.state = RecoveryState::kDue;
    r.reason = fmt::format(
        "shut down through ekco shutdown at {} (boot id {}); Ready {}; heartbeat Lease not "
        "renewed since {} (grace {})",
        when(b.at), b.boot_id, ready_text, when(silent_since), durationText(rules.lease_grace));
  } else {
    r.state = RecoveryState::kWaiting;
    r.reason = fmt::format("Ready {}; heartbeat Lease renewed at {}; out of service at {}",
                           ready_text, when(silent_since), when(*r.due));
  }
  return r;
}

// "28+" → 28; nullopt when it does not start with a digit.
std::optional<int> leadingNumber(std::string_view s) {
  int n = 0;
  std::size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) != 0 && i < 6; ++i) {
    n = n * 10 + (s[i] - '0');
  }
  if (i == 0) return std::nullopt;
  return n;
}

}  // namespace

std::string_view recoveryStateName(RecoveryState state) {
  switch (state) {
    case RecoveryState::kShuttingDown:
      return "shutting-down";
    case RecoveryState::kWaiting:
      return "waiting";
    case RecoveryState::kDue:
      return "due";
    case RecoveryState::kStaleBeacon:
      return "stale-beacon";
    case RecoveryState::kTainted:
      return "tainted";
    case RecoveryState::kUntaintDue:
      return "untaint-due";
    case RecoveryState::kPersonsTaint:
      return "persons-taint";
  }
  return "?";
}

RecoveryRules recoveryRules(const Config& config) {
  return {.lease_grace = config.shutdown_out_of_service_grace,
          .beacon_window = kBeaconWindow,
          .storm_guard_percent = config.storm_guard_percent};
}

RecoveryPlan planRecovery(const std::vector<kube::NodeRecord>& nodes,
                          const std::vector<NodeLease>& leases, base::WallTime now,
                          const RecoveryRules& rules) {
  RecoveryPlan plan;
  plan.storm = assessStorm(nodes, rules.storm_guard_percent);
  std::map<std::string_view, const NodeLease*> by_name;
  for (const NodeLease& l : leases) by_name.emplace(l.name, &l);
  for (const kube::NodeRecord& n : nodes) {
    auto it = by_name.find(n.name.view());
    bool relevant = false;
    NodeRecovery r = decide(n, it == by_name.end() ? nullptr : it->second, now, rules, relevant);
    if (!relevant) continue;
    if (r.state == RecoveryState::kWaiting && (!plan.next || *r.due < *plan.next)) {
      plan.next = r.due;
    }
    plan.nodes.push_back(std::move(r));
  }
  std::sort(plan.nodes.begin(), plan.nodes.end(),
            [](const NodeRecovery& a, const NodeRecovery& b) { return a.node < b.node; });
  return plan;
}

base::Result<bool> supportsOutOfService(const json& info) {
  std::optional<int> major;
  std::optional<int> minor;
  if (info.is_object()) {
    if (info.contains("major") && info["major"].is_string()) {
      major = leadingNumber(info["major"].get<std::string>());
    }
    if (info.contains("minor") && info["minor"].is_string()) {
      minor = leadingNumber(info["minor"].get<std::string>());
    }
    if ((!major || !minor) && info.contains("gitVersion") && info["gitVersion"].is_string()) {
      std::string_view v = info["gitVersion"].get_ref<const std::string&>();
      if (!v.empty() && v.front() == 'v') v.remove_prefix(1);
      major = leadingNumber(v);
      const std::size_t dot = v.find('.');
      minor = dot == std::string_view::npos ? std::nullopt : leadingNumber(v.substr(dot + 1));
    }
  }
  if (!major || !minor) {
    return Error("cannot read the server's version from " +
                     std::string(base::utf8Prefix(kube::jsonDump(info), 200)),
                 ErrorCode::kParse);
  }
  return *major > 1 || (*major == 1 && *minor >= 28);
}

NodeRecoveryController::NodeRecoveryController(std::function<ObservedNodes()> observe_nodes,
                                               std::function<ObservedNodeLeases()> observe_leases,
                                               kube::KubeClient& client, const base::Clock& clock,
                                               NodeRecoveryOptions options,
                                               NodeRecoveryCallbacks callbacks)
    : observe_nodes_(std::move(observe_nodes)),
      observe_leases_(std::move(observe_leases)),
      client_(client),
      clock_(clock),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

base::Result<ReconcileResult> NodeRecoveryController::reconcile() {
  const ObservedNodes nodes = observe_nodes_();
  const ObservedNodeLeases leases = observe_leases_();
  if (!nodes.synced || !leases.synced) {
    std::lock_guard lock(mu_);
    synced_ = false;
    return ReconcileResult{.summary = "waiting for the node and node lease caches to list",
                           .requeue_after = milliseconds(250)};
  }
  const base::WallTime now = clock_.wallNow();
  const RecoveryPlan plan = planRecovery(nodes.nodes, leases.leases, now, options_.rules);
  {
    std::lock_guard lock(mu_);
    synced_ = true;
    last_plan_ = plan;
    evaluated_at_ = now;
  }
  ReconcileResult result;
  std::vector<Error> errors;
  int done = 0;
  for (const NodeRecovery& item : plan.nodes) {
    const bool taint_like = item.state == RecoveryState::kDue;
    if (!taint_like && item.state != RecoveryState::kUntaintDue) {
      result.plan +=
          fmt::format("{} {}: {}\n", item.node, recoveryStateName(item.state), item.reason);
      if (item.state == RecoveryState::kStaleBeacon &&
          logged_.insert(item.node + "/stale/" + when(item.beacon->at)).second) {
        base::logInfo("node recovery: ignoring a stale shutdown beacon",
                      {{"node", item.node}, {"reason", item.reason}});
      }
      continue;
    }
    if (taint_like && plan.storm.active) {
      result.plan +=
          fmt::format("{}: blocked by the storm guard: {}\n", item.node, plan.storm.reason);
      continue;
    }
    auto did = act(item);
    if (!did) {
      if (did.error().code() == ErrorCode::kUnavailable && !leaderFresh()) {
        return std::move(did).error();  // fencing: stop at once
      }
      errors.push_back(did.error());
      continue;
    }
    result.plan += *did + "\n";
    if (!did->empty() && !did->starts_with("skip")) ++done;
  }
  if (plan.next) {
    const auto remaining = std::chrono::ceil<milliseconds>(*plan.next - clock_.wallNow());
    result.requeue_after = std::max(milliseconds(0), remaining);
  }
  if (!errors.empty()) {
    std::string message = errors.front().message();
    if (errors.size() > 1) message += fmt::format(" (and {} more)", errors.size() - 1);
    return Error(message, errors.front().code());
  }
  result.summary = fmt::format("{} nodes followed, {} acted on", plan.nodes.size(), done);
  if (plan.storm.active) result.summary += "; storm guard: " + plan.storm.reason;
  if (plan.next) result.summary += "; next grace ends " + when(*plan.next);
  return result;
}

bool NodeRecoveryController::leaderFresh() const { return options_.effects.leaderFresh(); }

base::Result<bool> NodeRecoveryController::outOfServiceSupported() {
  if (version_stale_.exchange(false)) oos_supported_.reset();
  if (oos_supported_) return *oos_supported_;
  auto info = callbacks_.server_version ? callbacks_.server_version() : client_.serverVersion();
  if (!info) return std::move(info).error().wrap("read the server version");
  auto supported = supportsOutOfService(*info);
  if (!supported) return std::move(supported).error();
  oos_supported_ = *supported;
  std::lock_guard lock(mu_);
  server_version_ = kube::jsonText(*info, "gitVersion");
  return *supported;
}

base::Result<NodeRecoveryController::Fresh> NodeRecoveryController::readFresh(
    const std::string& node) {
  Fresh fresh;
  auto object = client_.get(kube::resources::kNodes, "", node);
  if (!object) return std::move(object).error().wrap("read node " + node);
  auto record = kube::projectNode(*object);
  if (!record) return std::move(record).error();
  fresh.object = std::move(*object);
  fresh.record = std::move(*record);
  auto lease = client_.get(kube::resources::kLeases, kNodeLeaseNamespace, node);
  if (lease) {
    auto parsed = kube::parseLease(*lease);
    if (!parsed) return std::move(parsed).error();
    fresh.lease = NodeLease{.name = parsed->name, .renew_time = parsed->renew_time};
  } else if (lease.error().code() != ErrorCode::kNotFound) {
    return std::move(lease).error().wrap("read the heartbeat Lease of " + node);
  }
  return fresh;
}

base::Result<NodeRecovery> NodeRecoveryController::recheck(const NodeRecovery& item, Fresh& fresh,
                                                           std::string& why_not) {
  auto read = readFresh(item.node);
  if (!read) return std::move(read).error();
  fresh = std::move(*read);
  const base::WallTime now = clock_.wallNow();
  std::vector<NodeLease> leases;
  if (fresh.lease) leases.push_back(*fresh.lease);
  RecoveryPlan again = planRecovery({fresh.record}, leases, now, options_.rules);
  if (again.nodes.empty()) {
    why_not = "the node no longer has a shutdown beacon or an out-of-service taint";
    return item;
  }
  NodeRecovery r = again.nodes.front();
  if (r.state != item.state) {
    why_not = fmt::format("the API's state is {} ({})", recoveryStateName(r.state), r.reason);
    return r;
  }
  if (item.state == RecoveryState::kDue) {
    // The storm guard on the API's nodes, not the cache's.
    auto all = readNodes(client_);
    if (!all) return std::move(all).error();
    StormAssessment storm = assessStorm(*all, options_.rules.storm_guard_percent);
    if (storm.active) why_not = "storm guard: " + storm.reason;
  }
  return r;
}

base::Result<std::string> NodeRecoveryController::act(const NodeRecovery& item) {
  const bool taint_like = item.state == RecoveryState::kDue;
  std::optional<bool> supported;
  if (taint_like) {
    auto s = outOfServiceSupported();
    if (!s) return std::move(s).error();
    supported = *s;
  }
  const std::string what = !taint_like  ? "remove ekco's out-of-service taint"
                           : *supported ? "taint out-of-service (node.kubernetes.io/out-of-service="
                                          "nodeshutdown:NoExecute)"
                                        : "force-delete its pods (Kubernetes before 1.28: no "
                                          "out-of-service taint)";
  const std::string once = item.node + "/" + when(item.beacon ? item.beacon->at : base::WallTime{});
  if (taint_like && !*supported && cleared_.count(once) != 0) {
    return fmt::format("{}: pods force-deleted already (Kubernetes before 1.28)", item.node);
  }
  if (options_.effects.dry_run) {
    if (logged_
            .insert(item.node + "/dry/" + std::string(recoveryStateName(item.state)) + "/" +
                    when(item.beacon ? item.beacon->at : base::WallTime{}))
            .second) {
      base::logInfo("node recovery: dry run: would " + what,
                    {{"node", item.node}, {"reason", item.reason}});
    }
    return fmt::format("{}: dry run: would {}: {}", item.node, what, item.reason);
  }
  // Guard 1: the API's state, decided again.
  Fresh fresh;
  std::string why_not;
  auto again = recheck(item, fresh, why_not);
  if (!again) return std::move(again).error();
  if (!why_not.empty()) {
    base::logInfo("node recovery: not acting", {{"node", item.node}, {"reason", why_not}});
    std::lock_guard lock(mu_);
    last_skip_ = item.node + ": " + why_not;
    return fmt::format("skip {}: {}", item.node, why_not);
  }
  // Guard 2: still a fresh leader (and not paused), right before the write.
  if (!leaderFresh()) {
    {
      std::lock_guard lock(mu_);
      last_skip_ = item.node + ": this agent is not a fresh leader";
    }
    return Error("not a fresh leader: stopped before acting on " + item.node,
                 ErrorCode::kUnavailable);
  }
  if (!taint_like) return untaint(*again, fresh);
  if (*supported) return taint(*again, fresh);
  auto pods = forceDeletePods(*again);
  if (pods) cleared_.insert(once);
  return pods;
}

base::Result<std::string> NodeRecoveryController::taint(const NodeRecovery& item,
                                                        const Fresh& fresh) {
  json taints = kube::jsonField(kube::jsonField(fresh.object, "spec"), "taints");
  if (!taints.is_array()) taints = json::array();
  const std::string added = kube::formatRfc3339(clock_.wallNow());
  taints.push_back({{"key", std::string(kTaintOutOfService)},
                    {"value", std::string(kOutOfServiceValue)},
                    {"effect", "NoExecute"},
                    {"timeAdded", added}});
  json patch = {{"metadata",
                 {{"resourceVersion",
                   kube::jsonText(kube::jsonField(fresh.object, "metadata"), "resourceVersion")},
                  {"annotations",
                   {{std::string(kOutOfServiceByAnnotation), std::string(kOutOfServiceByEkco)},
                    {std::string(kOutOfServiceAtAnnotation), added}}}}},
                {"spec", {{"taints", taints}}}};
  auto patched =
      client_.patch(kube::resources::kNodes, "", item.node, kube::PatchType::kMerge, patch);
  if (!patched) return std::move(patched).error().wrap("taint " + item.node + " out-of-service");
  base::logWarn("node recovery: tainted node out-of-service",
                {{"node", item.node}, {"reason", item.reason}});
  options_.effects.count("node_out_of_service");
  event(fresh.record, "OutOfServiceTaintApplied",
        "ekco applied node.kubernetes.io/out-of-service=nodeshutdown:NoExecute: the node was " +
            item.reason +
            ". Its pods are deleted without grace and their volumes released; ekco startup "
            "removes the taint after the reboot.",
        "Warning");
  remember(item.node, "tainted out-of-service", item.reason);
  // The pod GC deletes the node's pods on its next pass (every 20 s); deleting them now, with
  // the taint already on the node (so their volumes are force-detached), saves up to that much.
  // A failure here loses nothing: the pod GC deletes them on its next pass.
  auto pods = forceDeletePods(item);
  if (!pods) {
    base::logWarn("node recovery: pods left to the pod GC",
                  {{"node", item.node}, {"error", pods.error()}});
    return fmt::format("{}: tainted out-of-service: {}\n{}: pods left to the pod GC: {}", item.node,
                       item.reason, item.node, pods.error().message());
  }
  return fmt::format("{}: tainted out-of-service: {}\n{}", item.node, item.reason, *pods);
}

base::Result<std::string> NodeRecoveryController::untaint(const NodeRecovery& item,
                                                          const Fresh& fresh) {
  json taints = json::array();
  const json& current = kube::jsonArray(kube::jsonField(fresh.object, "spec"), "taints");
  for (const json& t : current) {
    if (kube::jsonText(t, "key") != kTaintOutOfService) taints.push_back(t);
  }
  json patch = {{"metadata",
                 {{"resourceVersion",
                   kube::jsonText(kube::jsonField(fresh.object, "metadata"), "resourceVersion")},
                  {"annotations",
                   {{std::string(kOutOfServiceByAnnotation), nullptr},
                    {std::string(kOutOfServiceAtAnnotation), nullptr},
                    {std::string(kShutdownAtAnnotation), nullptr},
                    {std::string(kShutdownBootIdAnnotation), nullptr}}}}},
                {"spec", {{"taints", taints}}}};
  auto patched =
      client_.patch(kube::resources::kNodes, "", item.node, kube::PatchType::kMerge, patch);
  if (!patched) {
    return std::move(patched).error().wrap("remove the out-of-service taint of " + item.node);
  }
  if (item.partition) {
    base::logWarn(
        "node recovery: node came back without rebooting (a partition, or a power-off "
        "that did not happen); removed ekco's out-of-service taint",
        {{"node", item.node}, {"reason", item.reason}});
  } else {
    base::logInfo("node recovery: removed ekco's out-of-service taint",
                  {{"node", item.node}, {"reason", item.reason}});
  }
  options_.effects.count("node_out_of_service_removed");
  event(fresh.record, item.partition ? "NodePartitionEnded" : "OutOfServiceTaintRemoved",
        "ekco removed the node.kubernetes.io/out-of-service taint it had applied: " + item.reason,
        item.partition ? "Warning" : "Normal");
  remember(item.node, item.partition ? "untainted (partition)" : "untainted", item.reason);
  return fmt::format("{}: removed ekco's out-of-service taint: {}", item.node, item.reason);
}

base::Result<std::string> NodeRecoveryController::forceDeletePods(const NodeRecovery& item) {
  auto pods = readPodsOnNode(client_, item.node);
  if (!pods) return std::move(pods).error();
  int deleted = 0;
  for (const kube::PodRecord& pod : *pods) {
    // Mirror pods are the kubelet's (it re-creates them); a pod already force-deleted waits for
    // its finalizers only.
    if (pod.owner_kind == "Node") continue;
    if (pod.deletion_grace_period_seconds && *pod.deletion_grace_period_seconds == 0) continue;
    if (!leaderFresh()) {
      return Error("not a fresh leader: stopped before force-deleting pods on " + item.node,
                   ErrorCode::kUnavailable);
    }
    const std::string name = pod.ns.str() + "/" + pod.name;
    auto removed = client_.remove(kube::resources::kPods, pod.ns.view(), pod.name,
                                  {.grace_period_seconds = 0, .precondition_uid = pod.uid});
    if (!removed) {
      const ErrorCode code = removed.error().code();
      if (code == ErrorCode::kNotFound || code == ErrorCode::kConflict) continue;
      return removed.error().wrap("force-delete pod " + name + " on " + item.node);
    }
    ++deleted;
    base::logInfo("node recovery: force-deleted pod of a node shut down through ekco shutdown",
                  {{"pod", name}, {"node", item.node}, {"reason", item.reason}});
    options_.effects.count("pod_force_deleted");
    options_.effects.event(
        {.involved_resource = kube::resources::kPods,
         .involved_namespace = pod.ns.str(),
         .involved_name = pod.name,
         .involved_uid = pod.uid,
         .reason = "ForceDeleted",
         .message = "Force-deleted by ekco (node-recovery): node " + item.node + " " + item.reason,
         .type = "Warning"});
  }
  if (deleted == 0) return fmt::format("{}: no pod left to force-delete", item.node);
  remember(item.node, fmt::format("force-deleted {} pods", deleted), item.reason);
  return fmt::format("{}: force-deleted {} pods: {}", item.node, deleted, item.reason);
}

void NodeRecoveryController::event(const kube::NodeRecord& node, std::string_view reason,
                                   const std::string& message, std::string_view type) {
  options_.effects.event({.involved_resource = kube::resources::kNodes,
                          .involved_name = node.name.str(),
                          .involved_uid = node.uid,
                          .reason = std::string(reason),
                          .message = message,
                          .type = std::string(type)});
}

void NodeRecoveryController::remember(const std::string& node, const std::string& what,
                                      const std::string& reason) {
  std::lock_guard lock(mu_);
  actions_.push_front({.node = node, .what = what, .reason = reason, .at = clock_.wallNow()});
  while (actions_.size() > options_.history) actions_.pop_back();
}

json NodeRecoveryController::status() const {
  std::lock_guard lock(mu_);
  json nodes = json::array();
  for (const NodeRecovery& r : last_plan_.nodes) {
    // "since": when the node's current state started, as far as the API shows it.
    std::optional<base::WallTime> since;
    if (r.state == RecoveryState::kTainted || r.state == RecoveryState::kUntaintDue ||
        r.state == RecoveryState::kPersonsTaint) {
      since = r.tainted_at;
    } else if (r.beacon) {
      since = r.beacon->at;
    }
    nodes.push_back({{"node", r.node},
                     {"state", recoveryStateName(r.state)},
                     {"since", kube::rfc3339OrNull(since)},
                     {"shutdown_at",
                      kube::rfc3339OrNull(r.beacon ? std::optional(r.beacon->at) : std::nullopt)},
                     {"boot_id", r.beacon ? json(r.beacon->boot_id) : json(nullptr)},
                     {"lease_renewed", kube::rfc3339OrNull(r.lease_renewed)},
                     {"out_of_service_at", kube::rfc3339OrNull(r.due)},
                     {"tainted_at", kube::rfc3339OrNull(r.tainted_at)},
                     {"reason", r.reason}});
  }
  json actions = json::array();
  for (const Action& a : actions_) {
    actions.push_back(
        {{"node", a.node}, {"what", a.what}, {"at", when(a.at)}, {"reason", a.reason}});
  }
  return {
      {"dry_run", options_.effects.dry_run},
      {"shutdown_out_of_service_grace", durationText(options_.rules.lease_grace)},
      {"server_version", server_version_},
      {"synced", synced_},
      {"evaluated_at", kube::rfc3339OrNull(evaluated_at_)},
      {"storm_guard", {{"active", last_plan_.storm.active}, {"reason", last_plan_.storm.reason}}},
      {"nodes", nodes},
      {"next_grace_end", kube::rfc3339OrNull(last_plan_.next)},
      {"last_actions", actions},
      {"last_skip", last_skip_}};
}

void NodeRecoveryController::leadershipChanged(bool leading) {
  // A new term asks the server's version again (it may have been upgraded meanwhile). This runs
  // on the elector's thread while a reconcile may run: only the atomic flag is touched.
  if (leading) version_stale_ = true;
}

ControllerSpec nodeRecoverySpec() {
  return {.name = "node-recovery",
          .scope = Scope::kLeader,
          .status_key = "node_recovery",
          .enabled = [](const Config& c) { return c.shutdown_out_of_service; },
          .watches = {clusterNodesWatch(), nodeLeasesWatch()},
          .pauses_in_maintenance = true,  // taints nodes, force-deletes pods
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            auto nodes = observeClusterNodes(d.watches);
            if (!nodes) return std::move(nodes).error();
            auto leases = observeNodeLeases(d.watches);
            if (!leases) return std::move(leases).error();
            return std::make_shared<NodeRecoveryController>(
                std::move(*nodes), std::move(*leases), d.client, d.clock,
                NodeRecoveryOptions{.rules = recoveryRules(d.config), .effects = d.effects()},
                NodeRecoveryCallbacks{});
          }};
}

}  // namespace ekco::agent
