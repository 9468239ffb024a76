// What the leader controllers (clear-nodes, purge) mean by an unreachable, dead and ready node,
// and the storm guard they share. Pure: records in, answers out; `now` is passed in.
//
// Unreachable: the node lifecycle controller has lost the kubelet. The node carries the
//   `node.kubernetes.io/unreachable` taint, or its Ready condition is Unknown, and Ready is not
//   True (a node whose kubelet reports Ready again is reachable, even while the taint is still
//   being removed).
// Unreachable since: the earliest `timeAdded` of its unreachable taints (the NoExecute one has
//   it; the NoSchedule one does not), else — when Ready is Unknown — the Ready condition's
//   `lastTransitionTime`. Unknown (nullopt) when neither gives a time: such a node is never dead,
//   since how long it has been gone cannot be shown.
// Dead: unreachable since at least `node_unreachable_toleration` (the threshold moment itself
//   counts as dead, so a wake-up scheduled for it acts).
// Ready (the min-ready guards, as EKCO's NodeIsReady): none of the taints
//   `node.kubernetes.io/not-ready`, `/unreachable`, `/network-unavailable`, `/unschedulable`;
//   and, stricter than EKCO, not cordoned (`spec.unschedulable`, which the unschedulable taint
//   follows a moment later) and a Ready condition that is True. **A cordoned node counts as not
//   ready**: it is usually being drained or rebooted (`ekco shutdown` cordons), so a guard must
//   not count on it.
// Storm: more than `percent` % of all nodes are unreachable at once (5 of 9 = 55.6 % > 55):
//   the cluster cannot tell dead nodes from a partition of itself, so nothing is cleared or
//   purged (the node lifecycle controller's unhealthy-zone threshold, NHC's minHealthy).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/records.h"

namespace ekco::agent {

inline constexpr std::string_view kTaintUnreachable = "node.kubernetes.io/unreachable";
inline constexpr std::string_view kTaintNotReady = "node.kubernetes.io/not-ready";
inline constexpr std::string_view kTaintNetworkUnavailable =
    "node.kubernetes.io/network-unavailable";
inline constexpr std::string_view kTaintUnschedulable = "node.kubernetes.io/unschedulable";

bool isUnreachable(const kube::NodeRecord& node);
// nullopt: reachable, or unreachable without a known start.
std::optional<base::WallTime> unreachableSince(const kube::NodeRecord& node);
// The moment the node is (or was) dead: unreachableSince + toleration; nullopt when never.
std::optional<base::WallTime> deadAt(const kube::NodeRecord& node, base::Duration toleration);
bool isDead(const kube::NodeRecord& node, base::WallTime now, base::Duration toleration);
bool isReady(const kube::NodeRecord& node);

// The nodes as the API server has them now: a (paged) list, never a cache. What an irreversible
// action re-reads right before it acts.
base::Result<std::vector<kube::NodeRecord>> readNodes(kube::KubeClient& client);
// The pods bound to `node` as the API server has them now (a list narrowed by spec.nodeName).
base::Result<std::vector<kube::PodRecord>> readPodsOnNode(kube::KubeClient& client,
                                                          const std::string& node);

struct StormAssessment {
  bool active = false;
  std::int64_t unreachable = 0;
  std::int64_t total = 0;
  std::int64_t percent = 0;                      // the configured threshold
  std::vector<std::string> unreachable_nodes{};  // sorted
  // "5 of 9 nodes (55.6%) are unreachable, more than storm_guard_percent 55%", or "".
  std::string reason{};
};

// Active when unreachable * 100 > percent * total (never with no nodes).
StormAssessment assessStorm(const std::vector<kube::NodeRecord>& nodes, std::int64_t percent);

}  // namespace ekco::agent
