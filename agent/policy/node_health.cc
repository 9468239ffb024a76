#include "agent/policy/node_health.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kube/resource.h"

namespace ekco::agent {

namespace {

bool readyIs(const kube::NodeRecord& node, std::string_view status) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  return ready != nullptr && ready->status == status;
}

bool hasTaint(const kube::NodeRecord& node, std::string_view key) {
  return std::any_of(node.taints.begin(), node.taints.end(),
                     [&](const kube::TaintRecord& t) { return t.key == key; });
}

}  // namespace

bool isUnreachable(const kube::NodeRecord& node) {
  if (readyIs(node, "True")) return false;
  return hasTaint(node, kTaintUnreachable) || readyIs(node, "Unknown");
}

std::optional<base::WallTime> unreachableSince(const kube::NodeRecord& node) {
  if (!isUnreachable(node)) return std::nullopt;
  std::optional<base::WallTime> since;
  for (const kube::TaintRecord& t : node.taints) {
    if (t.key != kTaintUnreachable || !t.time_added) continue;
    if (!since || *t.time_added < *since) since = t.time_added;
  }
  if (since) return since;
  const kube::ConditionRecord* ready = node.condition("Ready");
  if (ready != nullptr && ready->status == "Unknown") return ready->last_transition_time;
  return std::nullopt;
}

std::optional<base::WallTime> deadAt(const kube::NodeRecord& node, base::Duration toleration) {
  auto since = unreachableSince(node);
  if (!since) return std::nullopt;
  return base::saturatingAdd(*since, toleration);
}

bool isDead(const kube::NodeRecord& node, base::WallTime now, base::Duration toleration) {
  auto at = deadAt(node, toleration);
  return at && now >= *at;
}

bool isReady(const kube::NodeRecord& node) {
  for (std::string_view key :
       {kTaintNotReady, kTaintUnreachable, kTaintNetworkUnavailable, kTaintUnschedulable}) {
    if (hasTaint(node, key)) return false;
  }
  return !node.unschedulable && readyIs(node, "True");
}

base::Result<std::vector<kube::NodeRecord>> readNodes(kube::KubeClient& client) {
  auto list = client.listAll(kube::resources::kNodes, "", {.limit = 500});
  if (!list) return std::move(list).error();  // "list nodes: ..." from the client
  std::vector<kube::NodeRecord> out;
  for (const auto& item : list->value("items", nlohmann::json::array())) {
    auto record = kube::projectNode(item);
    if (!record) return std::move(record).error().wrap("list nodes");
    out.push_back(std::move(*record));
  }
  return out;
}

base::Result<std::vector<kube::PodRecord>> readPodsOnNode(kube::KubeClient& client,
                                                          const std::string& node) {
  auto list = client.listAll(kube::resources::kPods, "",
                             {.field_selector = "spec.nodeName=" + node, .limit = 500});
  if (!list) return std::move(list).error().wrap("list pods on " + node);
  std::vector<kube::PodRecord> out;
  for (const auto& item : list->value("items", nlohmann::json::array())) {
    auto record = kube::projectPod(item);
    if (!record) return std::move(record).error().wrap("list pods on " + node);
    out.push_back(std::move(*record));
  }
  return out;
}

StormAssessment assessStorm(const std::vector<kube::NodeRecord>& nodes, std::int64_t percent) {
  StormAssessment out{.total = static_cast<std::int64_t>(nodes.size()), .percent = percent};
  for (const kube::NodeRecord& n : nodes) {
    if (!isUnreachable(n)) continue;
    ++out.unreachable;
    out.unreachable_nodes.push_back(n.name.str());
  }
  std::sort(out.unreachable_nodes.begin(), out.unreachable_nodes.end());
  out.active = out.total > 0 && out.unreachable * 100 > percent * out.total;
  if (out.active) {
    out.reason = fmt::format(
        "{} of {} nodes ({:.1f}%) are unreachable, more than storm_guard_percent {}%",
        out.unreachable, out.total,
        100.0 * static_cast<double>(out.unreachable) / static_cast<double>(out.total), percent);
  }
  return out;
}

}  // namespace ekco::agent
