// Which pods stuck terminating on dead nodes are due to be force-deleted, and when the others
// will be: the clear-nodes decision (agent/features/clear/clear_nodes.h acts on it), pure. It is
// here, below the features, because the purge reads it too: it holds a dead node until no pod
// on it is still due for clearing (EKCO purged, then cleared, in one pass over a node; here the
// clearing goes first because once the Node is gone clear-nodes no longer sees its pods).
//
// A pod is due once both thresholds have passed (node_health.h for "dead"):
//   its node is dead:           unreachable since T  and  now >= T + node_unreachable_toleration
//   it has been terminating:    now >= deletionTimestamp + clear_pod_deletion_grace (30s)
// A pod already force-deleted (deletionGracePeriodSeconds 0, held only by finalizers) is left
// alone: another delete cannot help it. Nothing is due during a storm (storm_guard_percent).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/policy/node_health.h"
#include "base/clock.h"
#include "base/duration.h"
#include "kube/decode/records.h"

namespace ekco::agent {

struct ClearRules {
  base::Duration node_unreachable_toleration = std::chrono::minutes(5);
  base::Duration pod_deletion_grace = std::chrono::seconds(30);
  std::int64_t storm_guard_percent = 55;
};
// node_unreachable_toleration, clear_pod_deletion_grace and storm_guard_percent of the config.
ClearRules clearRules(const Config& config);

// A terminating pod on an unreachable node, and when it may be force-deleted.
struct PodToClear {
  kube::PodRecord pod{};
  std::string node{};
  base::WallTime unreachable_since{};
  base::WallTime node_dead_at{};
  base::WallTime deletion_timestamp{};
  base::WallTime grace_passed_at{};
  base::WallTime due{};  // max(node_dead_at, grace_passed_at)
};

struct ClearPlan {
  StormAssessment storm{};
  std::vector<std::string> dead_nodes{};  // sorted
  // Both thresholds passed, by due time. Listed during a storm too (and then not acted on).
  std::vector<PodToClear> due{};
  // Terminating pods on unreachable nodes whose threshold is still ahead, by due time.
  std::vector<PodToClear> pending{};
  // Already force-deleted, held by finalizers: "ns/name".
  std::vector<std::string> held{};
  std::optional<base::WallTime> next{};  // pending.front().due
};

// The decision, pure. `pods` may include pods of any node; those of nodes not in `nodes` are
// ignored.
ClearPlan planClear(const std::vector<kube::NodeRecord>& nodes,
                    const std::vector<kube::PodRecord>& pods, base::WallTime now,
                    const ClearRules& rules);

// "node node-b unreachable since 2026-11-22T10:00:00Z (dead after 5m); pod terminating since
// 2026-11-22T10:04:00Z (force-deleted after 30s)"
std::string clearReason(const PodToClear& item, const ClearRules& rules);

}  // namespace ekco::agent
