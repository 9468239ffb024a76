// Fast recovery after a planned shutdown (leader controller `node-recovery`, config
// `shutdown_out_of_service`, issue 20): a node that went down through `ekco shutdown` carries a
// beacon (agent/features/reboot/shutdown_beacon.h). As soon as it stops reporting, the leader
// applies node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (Kubernetes ≥ 1.28, KEP-2268),
// so the pod garbage collector deletes its pods without grace and the attach-detach controller
// releases their volumes at once: stateful pods move within seconds instead of the
// 5 m 40 s + clear_pod_deletion_grace of the unplanned path (clear-nodes). On older clusters it
// force-deletes the node's remaining pods instead. With the taint it force-deletes them too, right
// after tainting, rather than wait up to 20 s for the pod GC's next pass: the taint is what makes
// the attach-detach controller release their volumes at once.
//
// The decision (planRecovery, pure), per node:
//   - The out-of-service taint without ekco's marker (ekco.kurl.sh/out-of-service-by: ekco) is a
//     person's: never touched.
//   - ekco's taint and Ready True: the kubelet is back. Remove the taint, the marker and the
//     beacon ("untaint"). When the boot id (status.nodeInfo.bootID) is the beacon's, the node
//     never rebooted: a partition (or an aborted power-off), logged as such. Normally
//     `ekco startup` removes the taint first, on the proof of a new boot id.
//   - ekco's taint, not Ready: "tainted" (listed in /status, since the taint's timeAdded).
//   - A beacon and nothing else:
//       stale when the kubelet reports another boot id than the beacon's (it booted since), or
//       its Lease was renewed more than kBeaconWindow after the beacon (the node kept running):
//       never acted on;
//       Ready True: "shutting-down" (the node still reports);
//       Ready Unknown or False: "waiting" until its heartbeat Lease (kube-node-lease/<node>) has
//       not been renewed for shutdown_out_of_service_grace (silent since renewTime, or since the
//       beacon without a Lease), then "due": taint (or force-delete, before 1.28).
//   - No beacon: not this controller's (the unplanned path, clear-nodes, stays conservative).
//
// Guards, for every write (irreversible: the taint makes the pod GC force-delete):
//   - the storm guard (storm_guard_percent) blocks tainting and force deletes;
//   - right before the write, the Node and its Lease are read again from the API (not the
//     cache) and the decision is made again on them, and on the nodes as listed for the storm;
//   - is_leader_fresh right before each call (fencing; false also in maintenance mode);
//   - the patch carries the Node's resourceVersion, so a change in between (a person's taint) is
//     a conflict, not an overwrite;
//   - dry_run: the plan is logged, nothing is written.
// Each action is logged with its reason and recorded as an Event on the Node.
//
// Event-driven: woken by every Node or node Lease change (caches kClusterNodes, kNodeLeases) and,
// while a node waits for its grace, at the exact moment the grace passes (requeue_after).
#pragma once

#include <atomic>
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
#include "agent/features/reboot/shutdown_beacon.h"
#include "agent/policy/node_health.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/records.h"

namespace ekco::agent {

// A beacon is stale once the node's Lease was renewed this long after it: the node kept running
// (a shutdown that never powered off). ekco-reboot.service stops before the kubelet, which stops
// seconds later; ten minutes leaves room for slow shutdowns and clock skew.
inline constexpr std::chrono::minutes kBeaconWindow{10};
inline constexpr std::string_view kNodeLeaseNamespace = "kube-node-lease";

struct RecoveryRules {
  base::Duration lease_grace = std::chrono::seconds(15);
  base::Duration beacon_window = kBeaconWindow;
  std::int64_t storm_guard_percent = 55;
};
RecoveryRules recoveryRules(const Config& config);

enum class RecoveryState {
  kShuttingDown,  // beacon, the node still reports Ready
  kWaiting,       // beacon, not Ready, the Lease grace not passed yet
  kDue,           // beacon, not Ready, the Lease silent for the grace: taint now
  kStaleBeacon,   // beacon that proves nothing any more
  kTainted,       // ekco's taint, not Ready
  kUntaintDue,    // ekco's taint, Ready again
  kPersonsTaint,  // the out-of-service taint is not ekco's: left alone
};
std::string_view recoveryStateName(RecoveryState state);  // "shutting-down", "due", ...

struct NodeRecovery {
  std::string node{};
  RecoveryState state = RecoveryState::kShuttingDown;
  std::optional<Beacon> beacon{};
  std::optional<base::WallTime> lease_renewed{};
  std::optional<base::WallTime> due{};         // kWaiting, kDue: when the grace passes
  std::optional<base::WallTime> tainted_at{};  // the taint's timeAdded
  bool partition = false;                      // kUntaintDue: the boot id did not change
  std::string reason{};
};

struct RecoveryPlan {
  StormAssessment storm{};
  std::vector<NodeRecovery> nodes{};     // those with a beacon or an out-of-service taint, by name
  std::optional<base::WallTime> next{};  // the earliest kWaiting due
};

RecoveryPlan planRecovery(const std::vector<kube::NodeRecord>& nodes,
                          const std::vector<NodeLease>& leases, base::WallTime now,
                          const RecoveryRules& rules);

// True for a server version.Info of Kubernetes 1.28 or later (major/minor, "28+" accepted;
// else gitVersion "v1.28.3"); an error when neither can be read.
base::Result<bool> supportsOutOfService(const nlohmann::json& version_info);

struct NodeRecoveryOptions {
  RecoveryRules rules{};
  std::size_t history = 20;
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

struct NodeRecoveryCallbacks {
  // The server's version.Info; unset: KubeClient::serverVersion (GET /version).
  std::function<base::Result<nlohmann::json>()> server_version{};
};

class NodeRecoveryController : public Controller {
 public:
  NodeRecoveryController(std::function<ObservedNodes()> observe_nodes,
                         std::function<ObservedNodeLeases()> observe_leases,
                         kube::KubeClient& client, const base::Clock& clock,
                         NodeRecoveryOptions options, NodeRecoveryCallbacks callbacks);

  std::string name() const override { return "node-recovery"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;
  void leadershipChanged(bool leading) override;

 private:
  struct Action {
    std::string node{};
    std::string what{};
    std::string reason{};
    base::WallTime at{};
    bool dry_run = false;
  };
  // The Node as the API has it now (its JSON, for the patch's base and resourceVersion).
  struct Fresh {
    nlohmann::json object{};
    kube::NodeRecord record{};
    std::optional<NodeLease> lease{};
  };

  base::Result<bool> outOfServiceSupported();
  base::Result<Fresh> readFresh(const std::string& node);
  // Decides again on the API's state; the node's fresh decision, or why not to act.
  base::Result<NodeRecovery> recheck(const NodeRecovery& item, Fresh& fresh, std::string& why_not);
  // (a) taint, (b) untaint, (c) force-delete the node's pods (before 1.28). Return what was done.
  base::Result<std::string> act(const NodeRecovery& item);
  base::Result<std::string> taint(const NodeRecovery& item, const Fresh& fresh);
  base::Result<std::string> untaint(const NodeRecovery& item, const Fresh& fresh);
  base::Result<std::string> forceDeletePods(const NodeRecovery& item);
  bool leaderFresh() const;
  void event(const kube::NodeRecord& node, std::string_view reason, const std::string& message,
             std::string_view type);
  void remember(const std::string& node, const std::string& what, const std::string& reason);

  std::function<ObservedNodes()> observe_nodes_;
  std::function<ObservedNodeLeases()> observe_leases_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  NodeRecoveryOptions options_;
  NodeRecoveryCallbacks callbacks_;

  // Reconcile's thread only.
  std::optional<bool> oos_supported_{};    // asked once per leadership
  std::atomic<bool> version_stale_{true};  // set when a term starts
  std::set<std::string> logged_;           // "node/state/at" already logged (dry run, stale)
  // Before 1.28: "node/beacon time" whose pods were force-deleted (once per shutdown: a
  // DaemonSet pod re-created on the node is not chased).
  std::set<std::string> cleared_;

  mutable std::mutex mu_;
  bool synced_ = false;
  std::string server_version_{};
  RecoveryPlan last_plan_{};
  std::optional<base::WallTime> evaluated_at_{};
  std::deque<Action> actions_{};
  std::string last_skip_{};
};

ControllerSpec nodeRecoverySpec();

}  // namespace ekco::agent
