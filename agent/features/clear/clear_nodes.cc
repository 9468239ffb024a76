#include "agent/features/clear/clear_nodes.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

std::string podName(const kube::PodRecord& pod) { return pod.ns.str() + "/" + pod.name; }

std::string when(base::WallTime t) { return kube::formatRfc3339(t); }

// "in 12.5s" / "now".
std::string inHowLong(base::WallTime at, base::WallTime now) {
  if (at <= now) return "now";
  return "in " + base::formatDuration(std::chrono::duration_cast<milliseconds>(at - now));
}

// Nothing is deleted while the storm guard holds; the plan lists what it blocks.
ReconcileResult blockedByStorm(const ClearPlan& plan) {
  std::string text;
  ReconcileResult result;
  for (const PodToClear& item : plan.due) {
    text += fmt::format("blocked by the storm guard: force-delete {} on {}\n", podName(item.pod),
                        item.node);
  }
  result.summary = fmt::format("storm guard: {}; clearing nothing ({} pods due)", plan.storm.reason,
                               plan.due.size());
  result.plan = text;
  return result;
}

}  // namespace

ClearNodesController::ClearNodesController(
    std::function<ObservedNodes()> observe_nodes,
    std::function<std::vector<kube::PodRecord>()> observe_pods, kube::KubeClient& client,
    const base::Clock& clock, ClearNodesOptions options, ClearNodesCallbacks callbacks)
    : observe_nodes_(std::move(observe_nodes)),
      observe_pods_(std::move(observe_pods)),
      client_(client),
      clock_(clock),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

base::Result<ReconcileResult> ClearNodesController::reconcile() {
  const ClearRules& rules = options_.rules;
  ObservedNodes observed = observe_nodes_();
  if (!observed.synced) {
    std::lock_guard lock(mu_);
    synced_ = false;
    // Leadership makes this controller due before the leader's caches exist, and a cache's
    // first adds may wake it a moment before it counts as synced: look again shortly.
    return ReconcileResult{.summary = "waiting for the node cache to list",
                           .requeue_after = milliseconds(250)};
  }
  const std::vector<kube::PodRecord> pods = observe_pods_();
  const base::WallTime now = clock_.wallNow();
  const ClearPlan plan = planClear(observed.nodes, pods, now, rules);
  noteStorm(plan.storm);
  forgetGone(pods);
  {
    std::lock_guard lock(mu_);
    synced_ = true;
    last_plan_ = plan;
    evaluated_at_ = now;
  }
  // The storm ends with a node change, which wakes this controller.
  if (plan.storm.active) return blockedByStorm(plan);
  auto pass = clearDue(plan);
  if (!pass) return std::move(pass).error();
  return summarize(plan, std::move(*pass), clock_.wallNow());
}

void ClearNodesController::forgetGone(const std::vector<kube::PodRecord>& pods) {
  // A uid is never reused.
  std::set<std::string> seen;
  for (const kube::PodRecord& p : pods) seen.insert(p.uid);
  for (auto it = handled_.begin(); it != handled_.end();) {
    it = seen.count(*it) != 0 ? std::next(it) : handled_.erase(it);
  }
}

base::Result<ClearNodesController::ClearPass> ClearNodesController::clearDue(
    const ClearPlan& plan) {
  const ClearRules& rules = options_.rules;
  ClearPass pass;
  std::optional<std::vector<kube::NodeRecord>> fresh_nodes;
  for (const PodToClear& item : plan.due) {
    if (handled_.count(item.pod.uid) != 0 && !options_.effects.dry_run) continue;  // cache lagging
    const std::string reason = clearReason(item, rules);
    if (options_.effects.dry_run) {
      pass.text += fmt::format("force-delete {} on {}: {}\n", podName(item.pod), item.node, reason);
      ++pass.planned;
      if (handled_.insert(item.pod.uid).second) {
        base::logInfo("dry run: would force-delete pod",
                      {{"pod", podName(item.pod)}, {"node", item.node}, {"reason", reason}});
      }
      continue;
    }
    // Guard 1: the API, read again right before the delete (nodes once per pass).
    if (!fresh_nodes) {
      auto read = readNodes();
      if (!read) {
        pass.errors.push_back(read.error().wrap("read before force-deleting " + podName(item.pod)));
        break;
      }
      fresh_nodes = std::move(*read);
    }
    if (std::string why = recheck(item, *fresh_nodes); !why.empty()) {
      ++pass.skipped;
      pass.text += fmt::format("skip {} on {}: {}\n", podName(item.pod), item.node, why);
      base::logInfo("not force-deleting pod",
                    {{"pod", podName(item.pod)}, {"node", item.node}, {"reason", why}});
      {
        std::lock_guard lock(mu_);
        last_skip_ = podName(item.pod) + ": " + why;
      }
      if (stormActive()) break;
      continue;
    }
    // Guard 2: still the leader (fencing).
    if (!options_.effects.leaderFresh()) {
      {
        std::lock_guard lock(mu_);
        last_skip_ = podName(item.pod) + ": this agent is no longer a fresh leader";
      }
      return Error("not a fresh leader: stopped before force-deleting " + podName(item.pod) +
                       " on " + item.node,
                   ErrorCode::kUnavailable);
    }
    auto done = forceDelete(item);
    if (!done) {
      pass.errors.push_back(done.error());
      continue;
    }
    if (!*done) {
      pass.text += fmt::format("gone already {} on {}\n", podName(item.pod), item.node);
      continue;
    }
    ++pass.deleted;
    pass.text += fmt::format("force-deleted {} on {}: {}\n", podName(item.pod), item.node, reason);
  }
  return pass;
}

base::Result<ReconcileResult> ClearNodesController::summarize(const ClearPlan& plan, ClearPass pass,
                                                              base::WallTime end) const {
  ReconcileResult result;
  for (const PodToClear& item : plan.pending) {
    pass.text += fmt::format("wait {} on {} until {} ({})\n", podName(item.pod), item.node,
                             when(item.due), inHowLong(item.due, end));
  }
  if (plan.next) {
    // Measured from the end of this run, as the manager counts it.
    const auto remaining = std::chrono::ceil<milliseconds>(*plan.next - end);
    result.requeue_after = std::max(milliseconds(0), remaining);
  }
  result.plan = pass.text;
  if (!pass.errors.empty()) {
    std::string message = pass.errors.front().message();
    if (pass.errors.size() > 1)
      message += fmt::format(" (and {} more failed deletes)", pass.errors.size() - 1);
    return Error(message, pass.errors.front().code());
  }
  if (options_.effects.dry_run) {
    result.summary = fmt::format("dry run: would force-delete {} pods", pass.planned);
  } else {
    result.summary = fmt::format("force-deleted {} pods", pass.deleted);
    if (pass.skipped > 0) result.summary += fmt::format(", skipped {}", pass.skipped);
  }
  result.summary += fmt::format("; {} dead nodes", plan.dead_nodes.size());
  if (plan.next) {
    result.summary +=
        fmt::format("; next threshold {} ({})", when(*plan.next), inHowLong(*plan.next, end));
  }
  return result;
}

base::Result<std::vector<kube::NodeRecord>> ClearNodesController::readNodes() {
  if (callbacks_.read_nodes) return callbacks_.read_nodes();
  return agent::readNodes(client_);
}

base::Result<std::optional<kube::PodRecord>> ClearNodesController::readPod(std::string_view ns,
                                                                           std::string_view name) {
  if (callbacks_.read_pod) return callbacks_.read_pod(ns, name);
  // A list narrowed to the one name, not a GET: the agent's RBAC grants list on pods, not get
  // (deploy/10-rbac.yaml), and every resource supports the metadata.name field selector.
  auto list = client_.list(kube::resources::kPods, ns,
                           {.field_selector = "metadata.name=" + std::string(name)});
  if (!list) return std::move(list).error();
  for (const auto& item : list->value("items", nlohmann::json::array())) {
    auto record = kube::projectPod(item);
    if (!record) return std::move(record).error();
    if (record->name == name) return std::optional<kube::PodRecord>(std::move(*record));
  }
  return std::optional<kube::PodRecord>();
}

std::string ClearNodesController::recheck(const PodToClear& item,
                                          const std::vector<kube::NodeRecord>& nodes) {
  auto read = readPod(item.pod.ns.view(), item.pod.name);
  if (!read) return "cannot read the pod from the API: " + read.error().message();
  if (!*read) return "the pod is gone";
  const kube::PodRecord& pod = **read;
  if (pod.uid != item.pod.uid) return "the pod was replaced (another uid)";
  const base::WallTime now = clock_.wallNow();
  const ClearPlan fresh = planClear(nodes, {pod}, now, options_.rules);
  if (fresh.storm.active) {
    noteStorm(fresh.storm);
    return "storm guard: " + fresh.storm.reason;
  }
  for (const PodToClear& d : fresh.due) {
    if (d.pod.uid == item.pod.uid && d.node == item.node) return "";
  }
  if (!pod.terminating()) return "the pod is no longer terminating";
  if (pod.node_name != item.node) return "the pod is no longer on " + item.node;
  if (pod.deletion_grace_period_seconds && *pod.deletion_grace_period_seconds == 0) {
    return "the pod was already force-deleted";
  }
  auto node = std::find_if(nodes.begin(), nodes.end(),
                           [&](const kube::NodeRecord& n) { return n.name == item.node; });
  if (node == nodes.end()) return "node " + item.node + " is gone";
  if (!isDead(*node, now, options_.rules.node_unreachable_toleration)) {
    return "node " + item.node + " is no longer dead";
  }
  return "the pod has not been terminating for " +
         base::formatDuration(options_.rules.pod_deletion_grace) + " yet";
}

void ClearNodesController::noteStorm(const StormAssessment& storm) {
  bool started = false;
  bool ended = false;
  {
    std::lock_guard lock(mu_);
    started = storm.active && !storm_active_;
    ended = !storm.active && storm_active_;
    storm_active_ = storm.active;
    storm_ = storm;
    if (started) storm_since_ = clock_.wallNow();
    if (ended) storm_since_.reset();
  }
  if (callbacks_.on_storm) callbacks_.on_storm(storm.active);
  if (!started && !ended) return;
  std::string nodes;
  for (const std::string& n : storm.unreachable_nodes) nodes += (nodes.empty() ? "" : ",") + n;
  const std::string message =
      started
          ? "Storm guard active: " + storm.reason +
                "; clear-nodes and purge act on no node until it passes"
          : fmt::format("Storm guard lifted: {} of {} nodes unreachable (storm_guard_percent {}%)",
                        storm.unreachable, storm.total, storm.percent);
  if (started) {
    base::logWarn("storm guard active: clearing and purging nothing",
                  {{"reason", storm.reason}, {"unreachable", nodes.empty() ? "-" : nodes}});
  } else {
    base::logInfo("storm guard lifted",
                  {{"unreachable", storm.unreachable}, {"total", storm.total}});
  }
  if (options_.effects.dry_run) return;
  options_.effects.event(
      {.involved_resource = kube::resources::kLeases,
       .involved_namespace = options_.lease_namespace,
       .involved_name = options_.lease_name,
       .reason = started ? "StormGuardActive" : "StormGuardCleared",
       .message =
           started ? message + " (see docs/features/clear-nodes.md#the-storm-guard)" : message,
       .type = started ? "Warning" : "Normal"});
}

base::Result<bool> ClearNodesController::forceDelete(const PodToClear& item) {
  const std::string name = podName(item.pod);
  const std::string reason = clearReason(item, options_.rules);
  auto removed = client_.remove(kube::resources::kPods, item.pod.ns.view(), item.pod.name,
                                {.grace_period_seconds = 0, .precondition_uid = item.pod.uid});
  if (!removed) {
    const ErrorCode code = removed.error().code();
    if (code == ErrorCode::kNotFound || code == ErrorCode::kConflict) {
      // Gone already, or a re-created namesake (uid precondition): nothing to clear.
      handled_.insert(item.pod.uid);
      base::logInfo("pod to force-delete is already gone",
                    {{"pod", name}, {"node", item.node}, {"detail", removed.error().message()}});
      return false;
    }
    return removed.error().wrap("force-deleting pod " + name + " on dead node " + item.node);
  }
  handled_.insert(item.pod.uid);
  base::logInfo("force-deleted pod", {{"pod", name}, {"node", item.node}, {"reason", reason}});
  options_.effects.count("pod_force_deleted");
  options_.effects.event({.involved_resource = kube::resources::kPods,
                          .involved_namespace = item.pod.ns.str(),
                          .involved_name = item.pod.name,
                          .involved_uid = item.pod.uid,
                          .reason = "ForceDeleted",
                          .message = "Force-deleted by ekco (clear-nodes): " + reason,
                          .type = "Warning"});
  std::lock_guard lock(mu_);
  ++force_deleted_total_;
  deleted_.push_front({.pod = name, .node = item.node, .reason = reason, .at = clock_.wallNow()});
  while (deleted_.size() > options_.history) deleted_.pop_back();
  return true;
}

bool ClearNodesController::stormActive() const {
  std::lock_guard lock(mu_);
  return storm_active_;
}

json ClearNodesController::status() const {
  std::lock_guard lock(mu_);
  const ClearRules& r = options_.rules;
  auto items = [&](const std::vector<PodToClear>& list) {
    json out = json::array();
    for (const PodToClear& i : list) {
      out.push_back({{"pod", podName(i.pod)},
                     {"node", i.node},
                     {"node_dead_at", when(i.node_dead_at)},
                     {"grace_passed_at", when(i.grace_passed_at)},
                     {"due", when(i.due)}});
    }
    return out;
  };
  json deleted = json::array();
  for (const Deleted& d : deleted_) {
    deleted.push_back({{"pod", d.pod}, {"node", d.node}, {"at", when(d.at)}, {"reason", d.reason}});
  }
  return {{"dry_run", options_.effects.dry_run},
          {"node_unreachable_toleration", base::formatDuration(r.node_unreachable_toleration)},
          {"clear_pod_deletion_grace", base::formatDuration(r.pod_deletion_grace)},
          {"storm_guard_percent", r.storm_guard_percent},
          {"synced", synced_},
          {"evaluated_at", kube::rfc3339OrNull(evaluated_at_)},
          {"storm_guard",
           {{"active", storm_active_},
            {"since", kube::rfc3339OrNull(storm_since_)},
            {"unreachable", storm_.unreachable},
            {"total", storm_.total},
            {"unreachable_nodes", storm_.unreachable_nodes},
            {"reason", storm_.reason}}},
          {"dead_nodes", last_plan_.dead_nodes},
          {"due", items(last_plan_.due)},
          {"pending", items(last_plan_.pending)},
          {"held_by_finalizers", last_plan_.held},
          {"next_threshold", kube::rfc3339OrNull(last_plan_.next)},
          {"force_deleted_total", force_deleted_total_},
          {"last_force_deleted", deleted},
          {"last_skip", last_skip_}};
}

void ClearNodesController::leadershipChanged(bool leading) {
  if (!leading && callbacks_.on_storm) callbacks_.on_storm(false);
}

ControllerSpec clearNodesSpec() {
  return {
      .name = "clear-nodes",
      .scope = Scope::kLeader,
      .status_key = "clear_nodes",
      .enabled = [](const Config& c) { return c.clear_dead_nodes; },
      .watches = {clusterNodesWatch(), unhealthyNodePodsWatch()},
      .pauses_in_maintenance = true,  // force-deletes pods
      .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
        auto nodes = observeClusterNodes(d.watches);
        if (!nodes) return std::move(nodes).error();
        auto pods = unhealthyNodePods(d.watches);
        if (!pods) return std::move(pods).error();
        const Config& c = d.config;
        auto storm = d.metrics.gauge("ekco_storm_guard",
                                     "1 while the storm guard holds: too many nodes "
                                     "unreachable, nothing is cleared or purged");
        if (!storm) return storm.error();
        const Gauge* gauge = *storm;
        return std::make_shared<ClearNodesController>(
            std::move(*nodes), [pods = std::move(*pods)] { return pods->pods(); }, d.client,
            d.clock,
            ClearNodesOptions{.rules = clearRules(c),
                              .lease_namespace = c.leader_election_namespace,
                              .lease_name = "ekco-leader",
                              .effects = d.effects()},
            ClearNodesCallbacks{.on_storm = [gauge](bool active) { gauge->set(active ? 1 : 0); }});
      }};
}

}  // namespace ekco::agent
