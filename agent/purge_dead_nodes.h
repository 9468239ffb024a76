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

#include "agent/clear_nodes.h"
#include "agent/manager.h"
#include "agent/purge.h"

namespace ekco::agent {

struct PurgeDeadNodesOptions {
  std::string self{};  // the leader's node
  base::Duration node_unreachable_toleration = std::chrono::minutes(5);
  std::int64_t min_ready_master_nodes = 2;
  std::int64_t min_ready_worker_nodes = 0;
  std::int64_t storm_guard_percent = 55;
  PurgeOptions purge{};  // certificates_dir, maintain_rook_storage_nodes, dry_run, callbacks
};

class PurgeDeadNodesController : public Controller {
 public:
  // `purge` runs one purge (purgeNode with the real dependencies; tests pass their own).
  using PurgeFn = std::function<base::Result<PurgeReport>(const std::string& node,
                                                          const PurgeOptions& options)>;
  // The nodes as the API has them now (agent/node_health.h readNodes).
  using ReadNodesFn = std::function<base::Result<std::vector<kube::NodeRecord>>()>;
  static constexpr std::chrono::seconds kRecheckAfter{10};
  static constexpr std::chrono::seconds kAfterPurge{1};

  PurgeDeadNodesController(std::function<ObservedNodes()> observe, ReadNodesFn read_nodes,
                           PurgeFn purge, const base::Clock& clock, PurgeDeadNodesOptions options);

  std::string name() const override { return "purge-dead-nodes"; }
  base::Result<ReconcileResult> reconcile() override;

  // For /status: nodes held back and why, the last purges.
  nlohmann::json status() const;

 private:
  PurgeGuardInput guardInput(std::vector<kube::NodeRecord> nodes, const std::string& target) const;
  // Why `target` must not be purged on a fresh read from the API, or nullopt.
  std::optional<std::string> freshRefusal(const std::string& target) const;

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

}  // namespace ekco::agent
