#include "agent/features/purge/purge_dead_nodes.h"

#include <algorithm>

#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using nlohmann::json;

PurgeDeadNodesController::PurgeDeadNodesController(std::function<ObservedNodes()> observe,
                                                   ReadNodesFn read_nodes, PurgeFn purge,
                                                   const base::Clock& clock,
                                                   PurgeDeadNodesOptions options)
    : observe_(std::move(observe)),
      read_nodes_(std::move(read_nodes)),
      purge_(std::move(purge)),
      clock_(clock),
      options_(std::move(options)) {}

PurgeGuardInput PurgeDeadNodesController::guardInput(std::vector<kube::NodeRecord> nodes,
                                                     const std::string& target) const {
  return {.nodes = std::move(nodes),
          .target = target,
          .self = options_.self,
          .automatic = true,
          .min_ready_master_nodes = options_.min_ready_master_nodes,
          .min_ready_worker_nodes = options_.min_ready_worker_nodes,
          .now = clock_.wallNow(),
          .node_unreachable_toleration = options_.node_unreachable_toleration,
          .storm_guard_percent = options_.storm_guard_percent};
}

std::optional<PurgeDeadNodesController::Refusal> PurgeDeadNodesController::freshRefusal(
    const std::string& target) const {
  if (!read_nodes_) return Refusal{.reason = "no way to read the nodes from the API"};
  auto nodes = read_nodes_();
  if (!nodes)
    return Refusal{.reason = "cannot read the nodes from the API: " + nodes.error().message()};
  if (auto refused = purgeRefusal(guardInput(*nodes, target))) {
    return Refusal{.reason = "on a fresh read from the API: " + *refused};
  }
  if (!options_.clear_first || !options_.read_pods || options_.purge.dry_run) return std::nullopt;
  // EKCO's order, on the API's pods: once the Node is gone clear-nodes no longer sees them.
  auto pods = options_.read_pods(target);
  if (!pods) {
    return Refusal{.reason = "cannot read the pods on " + target +
                             " from the API: " + pods.error().message()};
  }
  const ClearPlan clear = planClear(*nodes, *pods, clock_.wallNow(), *options_.clear_first);
  const auto due = std::count_if(clear.due.begin(), clear.due.end(),
                                 [&](const PodToClear& item) { return item.node == target; });
  if (due == 0) return std::nullopt;
  return Refusal{
      .reason = "on a fresh read from the API: waiting for clear-nodes to force-delete " +
                std::to_string(due) + " pod(s) stuck on it first",
      .clear_first = true};
}

base::Result<ReconcileResult> PurgeDeadNodesController::reconcile() {
  ReconcileResult result;
  const ObservedNodes observed = observe_();
  if (!observed.synced) {
    result.summary = "waiting for the node cache";
    result.requeue_after = std::chrono::milliseconds(250);
    return result;
  }
  const auto now = clock_.wallNow();
  const DeadNodeChoice choice = chooseDeadNode(observed, now);
  if (choice.next_dead) {
    result.requeue_after = std::chrono::ceil<std::chrono::milliseconds>(*choice.next_dead - now);
  }
  if (choice.recheck_soon) {
    result.requeue_after = std::min(result.requeue_after.value_or(kListedRecheck), kListedRecheck);
  }
  {
    std::lock_guard lock(mu_);
    held_ = choice.held;
  }
  if (!choice.chosen) {
    result.summary = choice.held.empty()
                         ? "no dead node to purge"
                         : std::to_string(choice.held.size()) + " dead node(s) held back";
    return result;
  }
  return purgeChosen(*choice.chosen, std::move(result));
}

PurgeDeadNodesController::DeadNodeChoice PurgeDeadNodesController::chooseDeadNode(
    const ObservedNodes& observed, base::WallTime now) const {
  DeadNodeChoice choice;
  // node -> pods clear-nodes still owes; planned once, and only when a dead node passes the
  // guards (most passes find none).
  std::optional<std::map<std::string, std::size_t>> due_for_clearing;
  auto podsDueOn = [&](const std::string& node) -> std::size_t {
    if (!options_.clear_first || !options_.observe_pods || options_.purge.dry_run) return 0;
    if (!due_for_clearing) {
      due_for_clearing.emplace();
      const ClearPlan clear =
          planClear(observed.nodes, options_.observe_pods(), now, *options_.clear_first);
      for (const PodToClear& item : clear.due) ++(*due_for_clearing)[item.node];
    }
    auto it = due_for_clearing->find(node);
    return it == due_for_clearing->end() ? 0 : it->second;
  };
  for (const auto& node : observed.nodes) {
    const auto dead_at = deadAt(node, options_.node_unreachable_toleration);
    if (!dead_at) continue;
    if (*dead_at > now) {
      if (!choice.next_dead || *dead_at < *choice.next_dead) choice.next_dead = *dead_at;
      continue;
    }
    const std::string name = node.name.str();
    if (auto refused = purgeRefusal(guardInput(observed.nodes, name))) {
      choice.held[name] = *refused;
      continue;
    }
    if (options_.clear_first && options_.pods_listed_on && !options_.purge.dry_run &&
        !options_.pods_listed_on(name)) {
      choice.held[name] = "waiting for the pods on it to be listed (clear-nodes goes first)";
      choice.recheck_soon = true;
      continue;
    }
    if (const std::size_t due = podsDueOn(name); due > 0) {
      choice.held[name] = "waiting for clear-nodes to force-delete " + std::to_string(due) +
                          " pod(s) stuck on it first";
      continue;
    }
    if (options_.purge.dry_run && planned_.count(name) != 0) {
      choice.held[name] = "dry run: plan already logged";
      continue;
    }
    if (!choice.chosen) choice.chosen = name;
  }
  return choice;
}

base::Result<ReconcileResult> PurgeDeadNodesController::purgeChosen(const std::string& node,
                                                                    ReconcileResult result) {
  // The guards again, on the API's own answer (not the cache), right before acting.
  if (auto refused = freshRefusal(node)) {
    base::logWarn("not purging dead node", {{"node", node}, {"reason", refused->reason}});
    {
      std::lock_guard lock(mu_);
      held_[node] = refused->reason;
    }
    result.summary = "not purging " + node + ": " + refused->reason;
    // clear-nodes deletes due pods at once; its delete wakes this controller only when the pod
    // cache had listed the pod, so look again soon either way.
    result.requeue_after = refused->clear_first ? kAfterPurge : kRecheckAfter;
    return result;
  }
  base::logInfo(options_.purge.dry_run ? "dry run: would purge dead node" : "purging dead node",
                {{"node", node}});
  PurgeOptions purge_options = options_.purge;
  purge_options.recheck = [this, target = node]() -> std::optional<std::string> {
    auto refused = freshRefusal(target);
    return refused ? std::optional<std::string>(refused->reason) : std::nullopt;
  };
  auto report = purge_(node, purge_options);
  json entry = {{"node", node},
                {"at", kube::formatRfc3339(clock_.wallNow())},
                {"dry_run", options_.purge.dry_run}};
  if (!report) {
    entry["error"] = report.error().message();
    std::lock_guard lock(mu_);
    history_.push_back(std::move(entry));
    if (history_.size() > 20) history_.erase(history_.begin());
    return report.error().wrap("purge " + node);
  }
  entry["actions"] = report->actions;
  entry["warnings"] = report->warnings;
  {
    std::lock_guard lock(mu_);
    history_.push_back(entry);
    if (history_.size() > 20) history_.erase(history_.begin());
  }
  if (options_.purge.dry_run) {
    planned_.insert(node);
    std::string plan;
    for (const auto& a : report->actions) plan += a + "\n";
    result.plan = plan;
    result.summary = "dry run: would purge " + node;
  } else {
    result.summary = "purged " + node;
  }
  // Another dead node may be waiting: look again shortly (not at once: the cache may still
  // show the node just purged).
  result.requeue_after = kAfterPurge;
  return result;
}

json PurgeDeadNodesController::status() const {
  std::lock_guard lock(mu_);
  json held = json::object();
  for (const auto& [node, why] : held_) held[node] = why;
  return {{"held", held}, {"history", history_}};
}

ControllerSpec purgeDeadNodesSpec() {
  return {
      .name = "purge-dead-nodes",
      .scope = Scope::kLeader,
      .status_key = "purge_dead_nodes",
      .enabled = [](const Config& c) { return c.purge_dead_nodes; },
      .watches = {clusterNodesWatch(), unhealthyNodePodsWatch()},
      .pauses_in_maintenance = true,  // removes Nodes, etcd members, OSDs
      .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        auto pods = unhealthyNodePods(d.watches);
        if (!pods) return std::move(pods).error();
        const Config& c = d.config;
        auto purge = [d](const std::string& node,
                         const PurgeOptions& given) -> base::Result<PurgeReport> {
          PurgeOptions options = given;
          options.event = [d, node](const std::string& reason, const std::string& message) {
            auto recorded = d.client.recordEvent({.involved_resource = kube::resources::kNodes,
                                                  .involved_name = node,
                                                  .reason = reason,
                                                  .message = message});
            if (!recorded && d.report) d.report("event", recorded.error().message());
          };
          if (d.count_action) d.count_action("node_purge");
          return purgeNode({.client = d.client, .exec = d.exec, .fs = d.host_fs, .clock = d.clock},
                           node, options);
        };
        return std::make_shared<PurgeDeadNodesController>(
            std::move(*nodes), [&client = d.client] { return readNodes(client); }, std::move(purge),
            d.clock,
            PurgeDeadNodesOptions{
                .self = d.node_name,
                .node_unreachable_toleration = c.node_unreachable_toleration,
                .min_ready_master_nodes = c.min_ready_master_nodes,
                .min_ready_worker_nodes = c.min_ready_worker_nodes,
                .storm_guard_percent = c.storm_guard_percent,
                .purge = {.certificates_dir = c.certificates_dir,
                          .maintain_rook_storage_nodes = c.maintain_rook_storage_nodes,
                          .dry_run = d.dry_run,
                          .allow_healthy_etcd_member = false,
                          .may_continue = d.is_leader_fresh,
                          .event = {}},
                .clear_first =
                    c.clear_dead_nodes ? std::optional<ClearRules>(clearRules(c)) : std::nullopt,
                .observe_pods = [pods = *pods] { return pods->pods(); },
                .pods_listed_on =
                    [pods = *pods](const std::string& node) { return pods->listed(node); },
                .read_pods =
                    [&client = d.client](const std::string& node) {
                      return readPodsOnNode(client, node);
                    }});
      }};
}

}  // namespace ekco::agent
