// The leader's automatic purge (purge_dead_nodes, off by default): each dead node that passes
// the guards of agent/purge.h (dead, not this node, no storm, EKCO's min-ready rules) is purged
// with purgeNode, one node per reconcile. The controller wakes at the moment the next
// unreachable node turns dead, so a purge starts within a second of the threshold.
//
// The node cache only chooses a candidate. A cache can be stale (a watch that stalled without an
// error), so before anything is touched the nodes are read again from the API (`read_nodes`, a
// list, not the cache) and every guard is evaluated on that read; the purge then re-reads and
// re-evaluates before each of its steps (PurgeOptions::recheck), and checks the Lease. A node
// the fresh read refuses is held (shown in /status) and looked at again after kRecheckAfter or
// when the cache changes; after a purge the controller looks again after kAfterPurge. Nothing
// is requeued at once, so a cache that disagrees with the API cannot make it spin.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/purge/purge.h"
#include "agent/policy/clear_plan.h"
#include "agent/policy/node_watches.h"

namespace ekco::agent {

struct PurgeDeadNodesOptions {
  std::string self{};  // the leader's node
  base::Duration node_unreachable_toleration = std::chrono::minutes(5);
  std::int64_t min_ready_master_nodes = 2;
  std::int64_t min_ready_worker_nodes = 0;
  std::int64_t storm_guard_percent = 55;
  PurgeOptions purge{};  // certificates_dir, maintain_rook_storage_nodes, dry_run, callbacks
  // Order with clear-nodes, as data rather than a call: while clear_dead_nodes is on, a dead
  // node is held while pods stuck on it are due for clear-nodes' force delete (EKCO purged, then
  // cleared; here the clearing goes first because once the Node is gone clear-nodes no longer
  // sees its pods). The two run
  // on the leader's worker; clear-nodes' deletes change the pod cache, which wakes this
  // controller again. nullopt: clear-nodes is off. Not applied under dry_run (nothing is
  // cleared then, and the plan should still show).
  std::optional<ClearRules> clear_first = std::nullopt;
  std::function<std::vector<kube::PodRecord>()> observe_pods{};  // the unhealthy nodes' pods
  // Whether observe_pods has listed the pods on a node yet. A new leader starts those caches
  // when it takes over; until one has synced, "no pods due" is not known and the node is held
  // (a leader killed mid-clear was succeeded by one that purged before clearing the rest).
  std::function<bool(const std::string& node)> pods_listed_on{};
  // The pods on a node as the API has them now (agent/node_health.h readPodsOnNode). With
  // clear_first, the fresh read before the purge and before each of its steps asks it too: the
  // cache of pods on a node that has only just been seen unhealthy (a new leader, a node that
  // was dead when it appeared) may not have listed yet, and an empty cache is not "nothing is
  // stuck on it". Unset: the cache alone decides.
  std::function<base::Result<std::vector<kube::PodRecord>>(const std::string& node)> read_pods{};
};

class PurgeDeadNodesController : public Controller {
 public:
  // `purge` runs one purge (purgeNode with the real dependencies; tests pass their own).
  using PurgeFn = std::function<base::Result<PurgeReport>(const std::string& node,
                                                          const PurgeOptions& options)>;
  // The nodes as the API has them now (agent/node_health.h readNodes).
  using ReadNodesFn = std::function<base::Result<std::vector<kube::NodeRecord>>()>;
  static constexpr std::chrono::seconds kRecheckAfter{10};
  // How soon a node held until its pods are listed is looked at again (a list takes a moment).
  static constexpr std::chrono::milliseconds kListedRecheck{250};
  static constexpr std::chrono::seconds kAfterPurge{1};

  PurgeDeadNodesController(std::function<ObservedNodes()> observe, ReadNodesFn read_nodes,
                           PurgeFn purge, const base::Clock& clock, PurgeDeadNodesOptions options);

  std::string name() const override { return "purge-dead-nodes"; }
  base::Result<ReconcileResult> reconcile() override;

  // For /status: nodes held back and why, the last purges.
  nlohmann::json status() const override;

 private:
  // The first dead node (in the cache) that passes the guards, why the others are held, and
  // when the next unreachable node will count as dead.
  struct DeadNodeChoice {
    std::map<std::string, std::string> held{};
    std::optional<std::string> chosen{};
    std::optional<base::WallTime> next_dead{};
    bool recheck_soon = false;  // a node waits for its pods to be listed
  };
  DeadNodeChoice chooseDeadNode(const ObservedNodes& observed, base::WallTime now) const;
  // Checks the guards on the API's answer, then purges `node` and records it in the history.
  base::Result<ReconcileResult> purgeChosen(const std::string& node, ReconcileResult result);
  PurgeGuardInput guardInput(std::vector<kube::NodeRecord> nodes, const std::string& target) const;
  // Why `target` must not be purged on a fresh read from the API, or nullopt.
  struct Refusal {
    std::string reason{};
    bool clear_first = false;  // pods stuck on it are due for clear-nodes, which acts in a moment
  };
  std::optional<Refusal> freshRefusal(const std::string& target) const;

  std::function<ObservedNodes()> observe_;
  ReadNodesFn read_nodes_;
  PurgeFn purge_;
  const base::Clock& clock_;
  PurgeDeadNodesOptions options_;
  std::set<std::string> planned_;  // dry run: plans already logged

  mutable std::mutex mu_;
  std::map<std::string, std::string> held_;  // dead node -> why it is not purged
  std::vector<nlohmann::json> history_;
};

ControllerSpec purgeDeadNodesSpec();

}  // namespace ekco::agent
