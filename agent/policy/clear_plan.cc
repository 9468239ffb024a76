#include "agent/policy/clear_plan.h"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "base/strings.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent {

namespace {

std::string podName(const kube::PodRecord& pod) { return pod.ns.str() + "/" + pod.name; }

base::WallTime plus(base::WallTime t, base::Duration d) { return base::saturatingAdd(t, d); }

std::string when(base::WallTime t) { return kube::formatRfc3339(t); }

bool byDue(const PodToClear& a, const PodToClear& b) {
  return std::tie(a.due, a.pod.ns.str(), a.pod.name) < std::tie(b.due, b.pod.ns.str(), b.pod.name);
}

}  // namespace

ClearRules clearRules(const Config& config) {
  return {.node_unreachable_toleration = config.node_unreachable_toleration,
          .pod_deletion_grace = config.clear_pod_deletion_grace,
          .storm_guard_percent = config.storm_guard_percent};
}

ClearPlan planClear(const std::vector<kube::NodeRecord>& nodes,
                    const std::vector<kube::PodRecord>& pods, base::WallTime now,
                    const ClearRules& rules) {
  ClearPlan plan;
  plan.storm = assessStorm(nodes, rules.storm_guard_percent);
  std::map<std::string_view, const kube::NodeRecord*> by_name;
  for (const kube::NodeRecord& n : nodes) {
    by_name.emplace(n.name.view(), &n);
    if (isDead(n, now, rules.node_unreachable_toleration)) plan.dead_nodes.push_back(n.name.str());
  }
  std::sort(plan.dead_nodes.begin(), plan.dead_nodes.end());
  for (const kube::PodRecord& pod : pods) {
    if (!pod.terminating()) continue;
    auto it = by_name.find(pod.node_name.view());
    if (it == by_name.end()) continue;
    const auto since = unreachableSince(*it->second);
    if (!since) continue;
    if (pod.deletion_grace_period_seconds && *pod.deletion_grace_period_seconds == 0) {
      plan.held.push_back(podName(pod));
      continue;
    }
    PodToClear item{.pod = pod,
                    .node = it->second->name.str(),
                    .unreachable_since = *since,
                    .node_dead_at = plus(*since, rules.node_unreachable_toleration),
                    .deletion_timestamp = *pod.deletion_timestamp,
                    .grace_passed_at = plus(*pod.deletion_timestamp, rules.pod_deletion_grace)};
    item.due = std::max(item.node_dead_at, item.grace_passed_at);
    (now >= item.due ? plan.due : plan.pending).push_back(std::move(item));
  }
  std::sort(plan.due.begin(), plan.due.end(), byDue);
  std::sort(plan.pending.begin(), plan.pending.end(), byDue);
  std::sort(plan.held.begin(), plan.held.end());
  if (!plan.pending.empty()) plan.next = plan.pending.front().due;
  return plan;
}

std::string clearReason(const PodToClear& item, const ClearRules& rules) {
  return fmt::format(
      "node {} unreachable since {} (dead after {}); pod terminating since {} (force-deleted "
      "after {})",
      item.node, when(item.unreachable_since),
      base::formatDuration(rules.node_unreachable_toleration), when(item.deletion_timestamp),
      base::formatDuration(rules.pod_deletion_grace));
}

}  // namespace ekco::agent
