// Clear dead nodes (leader controller `clear-nodes`, config `clear_dead_nodes`): force-delete
// (gracePeriodSeconds=0) the pods stuck terminating on a dead node, so their controllers may
// replace them and their volumes can be attached elsewhere (EKCO's pkg/cluster/clear_node.go).
//
// A pod is cleared once both thresholds have passed (the plan: agent/policy/clear_plan.h):
//   its node is dead:           unreachable since T  and  now >= T + node_unreachable_toleration
//   it has been terminating:    now >= deletionTimestamp + clear_pod_deletion_grace (30s)
// A pod already force-deleted (deletionGracePeriodSeconds 0, held only by finalizers) is left
// alone: another delete cannot help it.
//
// Event-driven: EKCO looked once a minute; this controller is woken by every change of a node or
// of a pod on an unhealthy node, and otherwise asks the manager to run it again at the exact
// moment the next pending pod crosses its threshold (requeue_after), so the delete follows the
// threshold within the manager's scheduling slack (milliseconds).
//
// Guards:
//   - Storm guard: when more than storm_guard_percent of the nodes are unreachable at once,
//     nothing is cleared; /status says why, one Event (StormGuardActive, Warning) goes on the
//     ekco-leader Lease when the storm starts and one (StormGuardCleared) when it ends, and the
//     on_storm callback drives the ekco_storm_guard gauge.
//   - The caches only choose candidates; a cache can be stale (a watch that stalled without an
//     error). Before each delete the API itself is read (callbacks read_nodes, once per pass
//     that has something due, and read_pod, right before that pod's delete) and the plan is
//     evaluated again on what it returned: the pod (same uid) must still be on a dead node,
//     still terminating beyond the grace, no storm; and this agent must still be a fresh leader
//     (is_leader_fresh, fencing). The delete carries a uid precondition, so a re-created
//     namesake is never deleted. A failed read deletes nothing and is returned as the error
//     (the manager backs off).
//   - dry_run: the plan is shown and logged (once per pod), nothing is deleted.
//
// Each force delete is logged with its reason, recorded as an Event on the Pod (ForceDeleted,
// Warning) and counted as "pod_force_deleted" (both through the options' Effects).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/policy/clear_plan.h"
#include "agent/policy/node_health.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/records.h"

namespace ekco::agent {

struct ClearNodesOptions {
  ClearRules rules{};
  // The Lease storm Events are recorded on.
  std::string lease_namespace = "kurl";
  std::string lease_name = "ekco-leader";
  // How many force deletes /status remembers.
  std::size_t history = 20;
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

struct ClearNodesCallbacks {
  // The nodes as the API has them now (not a cache). Unset: agent/node_health.h readNodes over
  // the controller's client.
  std::function<base::Result<std::vector<kube::NodeRecord>>()> read_nodes{};
  // One pod as the API has it now; nullopt when it is gone. Unset: a list through the client
  // narrowed by the field selector metadata.name.
  std::function<base::Result<std::optional<kube::PodRecord>>(std::string_view ns,
                                                             std::string_view name)>
      read_pod{};
  // After every storm assessment: true while the storm guard holds.
  std::function<void(bool active)> on_storm{};
};

class ClearNodesController : public Controller {
 public:
  ClearNodesController(std::function<ObservedNodes()> observe_nodes,
                       std::function<std::vector<kube::PodRecord>()> observe_pods,
                       kube::KubeClient& client, const base::Clock& clock,
                       ClearNodesOptions options, ClearNodesCallbacks callbacks);

  std::string name() const override { return "clear-nodes"; }
  base::Result<ReconcileResult> reconcile() override;

  // For /status: the rules, the storm guard, dead nodes, pods waiting (and until when), the
  // last force deletes.
  nlohmann::json status() const override;
  bool stormActive() const;
  // A follower guards nothing: on losing the Lease the storm gauge goes to 0 (on_storm(false));
  // the next leader reports its own.
  void leadershipChanged(bool leading) override;

 private:
  struct Deleted {
    std::string pod{};
    std::string node{};
    std::string reason{};
    base::WallTime at{};
    bool dry_run = false;
  };

  // What one pass over the due pods did: the plan's lines, the counts, the failed deletes.
  struct ClearPass {
    std::string text{};
    int deleted = 0;
    int planned = 0;  // dry run
    int skipped = 0;
    std::vector<base::Error> errors{};
  };

  // Forgets the handled uids of pods no longer seen.
  void forgetGone(const std::vector<kube::PodRecord>& pods);
  // Force-deletes (in a dry run: lists) the due pods, each after its guards; an error when this
  // agent is no longer a fresh leader.
  base::Result<ClearPass> clearDue(const ClearPlan& plan);
  // The result of a pass: its plan (with the pending pods), summary and wake-up, measured from
  // `end`; the first failed delete as the error.
  base::Result<ReconcileResult> summarize(const ClearPlan& plan, ClearPass pass,
                                          base::WallTime end) const;
  // Reads the pod from the API and tells, on it and on `nodes` (read from the API this pass),
  // why `item` must not be deleted now, or "" when it may.
  std::string recheck(const PodToClear& item, const std::vector<kube::NodeRecord>& nodes);
  base::Result<std::vector<kube::NodeRecord>> readNodes();
  base::Result<std::optional<kube::PodRecord>> readPod(std::string_view ns, std::string_view name);
  void noteStorm(const StormAssessment& storm);
  // True when deleted; false when the pod was already gone or replaced (uid precondition).
  base::Result<bool> forceDelete(const PodToClear& item);

  std::function<ObservedNodes()> observe_nodes_;
  std::function<std::vector<kube::PodRecord>()> observe_pods_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  ClearNodesOptions options_;
  ClearNodesCallbacks callbacks_;

  // Reconcile's thread only: uids force-deleted (or, in a dry run, planned and logged), kept
  // while the pod is still seen, so a delete the cache has not caught up with is not repeated.
  std::set<std::string> handled_;

  mutable std::mutex mu_;
  bool synced_ = false;
  bool storm_active_ = false;
  StormAssessment storm_{};
  std::optional<base::WallTime> storm_since_{};
  ClearPlan last_plan_{};
  std::optional<base::WallTime> evaluated_at_{};
  std::deque<Deleted> deleted_{};
  std::uint64_t force_deleted_total_ = 0;
  std::string last_skip_{};  // why the last re-check refused a delete
};

ControllerSpec clearNodesSpec();

}  // namespace ekco::agent
