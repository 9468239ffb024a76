// Rook/Ceph management (leader controller `rook-ceph`; ../shared/reference/ekco.md §3.3). Acts
// only while CephCluster rook-ceph/rook-ceph exists. Each pass, in this order:
//   1. Ceph CSI resources (reconcile_ceph_csi_resources): at >= 3 nodes (ready or not, as EKCO),
//      the CSI_*_RESOURCE keys of rook-ceph/rook-ceph-operator-config get EKCO's
//      requests/limits (a merge patch, only when a key differs).
//   2. MDS placement (reconcile_rook_mds_placement): at > 1 node, a CephFilesystem
//      `ceph_filesystem` still carrying kURL's single-node placement (exactly two preferred
//      anti-affinity terms) gets required anti-affinity on kubernetes.io/hostname plus preferred
//      on topology.kubernetes.io/zone.
//   3. With maintain_rook_storage_nodes:
//      a. storage nodes: each Ready node (with rook_storage_nodes_label when set) missing from
//         spec.storage.nodes is appended; never removed (the purge does that); nothing while the
//         cluster uses all nodes or the user manages the list (rook_storage_nodes set);
//      b. `ceph osd tree -f json` in the rook-ceph-tools pod: the hosts with an up OSD (any OSD
//         id), factor = clamp(hosts, min_ceph_pool_replication, max_ceph_pool_replication);
//      c. mon count 1 -> 3 at >= 3 hosts, mgr count 1 -> 2 at >= 2; never lowered (ekco#26);
//      d. pool sizes: CephBlockPool `ceph_block_pool` follows the factor; the CephFilesystem's
//         and CephObjectStore's pools are only raised; the built-in `.mgr` (Ceph 17+) or
//         `device_health_metrics` pool follows through `ceph osd pool set` (size, then min_size:
//         1 for size 1, else 2). A decrease waits until the lower count has lasted longer than
//         ceph_pool_replication_hold_down (rook::HoldDown), never happens while OSDs are down
//         but in, and, while OSDs are down, only once `ceph osd safe-to-destroy` says their data
//         has copies elsewhere; when Ceph says no, a Warning Event (ReplicationDecreaseRefused)
//         says so, once per refusal.
// Every change is logged with its reason and recorded as an Event on the object (the CephCluster
// for the built-in pool); right before each write the leader's fencing is asked
// (is_leader_fresh); under dry_run the plan is shown in /status and logged once, nothing written.
// Woken by the cluster node cache; also runs every `interval` (reconcile_interval), which is how
// OSDs coming up and hold-downs passing are seen.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/exec.h"
#include "rook/ceph_policy.h"

namespace ekco::agent {

struct RookCephOptions {
  std::string ns = "rook-ceph";
  std::string cluster = "rook-ceph";
  bool maintain_storage = false;      // maintain_rook_storage_nodes: steps 3a-3d
  bool user_managed_nodes = false;    // rook_storage_nodes is set: step 3a leaves the list alone
  std::string storage_nodes_label{};  // "key=value", or "" for every Ready node
  bool mds_placement = true;
  bool csi_resources = true;
  std::string block_pool = "replicapool";
  std::string filesystem = "rook-shared-fs";
  std::string object_store = "rook-ceph-store";
  std::int64_t min_replication = 1;
  std::int64_t max_replication = 3;
  base::Duration hold_down = std::chrono::minutes(10);
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  std::chrono::milliseconds exec_timeout{std::chrono::seconds(60)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class RookCephController : public Controller {
 public:
  RookCephController(std::function<ObservedNodes()> observe, kube::KubeClient& client,
                     kube::PodExecutor& exec, const base::Clock& clock, RookCephOptions options);

  std::string name() const override { return "rook-ceph"; }
  base::Result<ReconcileResult> reconcile() override;
  // The last pass: hosts, factor, hold-down, each pool's size and decision, the last changes.
  nlohmann::json status() const override;

 private:
  // One pass's bookkeeping: plan lines, and whether anything changed (or would).
  struct Pass {
    std::vector<std::string> lines{};
    bool changed = false;
    bool conflict = false;  // an object changed between the read and the patch
    nlohmann::json pools = nlohmann::json::object();
  };

  base::Status csiResources(Pass& pass, std::size_t nodes);
  base::Status mdsPlacement(Pass& pass, std::size_t nodes);
  base::Status storageNodes(Pass& pass, const nlohmann::json& cluster,
                            const std::vector<kube::NodeRecord>& nodes);
  base::Status monMgrCounts(Pass& pass, const nlohmann::json& cluster, std::int64_t up_hosts);
  base::Status blockPool(Pass& pass, const rook::OsdTree& tree, std::int64_t factor);
  base::Status raiseOnlyPools(Pass& pass, const kube::Resource& resource, const std::string& name,
                              std::int64_t factor);
  base::Status builtinPool(Pass& pass, const rook::OsdTree& tree, std::int64_t factor);
  // Whether a decrease may go ahead: while OSDs are down, `ceph osd safe-to-destroy` must say
  // their data lives elsewhere. A "no" records a Warning Event on `involved` (once per answer).
  base::Result<bool> decreaseAllowed(Pass& pass, const rook::OsdTree& tree,
                                     const kube::EventSpec& involved, const std::string& what);

  // `ceph ARGS...` in the tools pod: how it ended, or (ceph) its stdout, a non-zero exit being an
  // Error with its stderr.
  base::Result<kube::ExecResult> cephRun(const std::vector<std::string>& args);
  base::Result<std::string> ceph(const std::vector<std::string>& args);
  // A patch of one object after mayWrite; a failed test of its resourceVersion (or a conflict)
  // is not an error: the pass notes it and the next pass, a second later, decides again.
  base::Status patchObject(Pass& pass, const kube::Resource& resource, const std::string& name,
                           kube::PatchType type, const nlohmann::json& patch,
                           const std::vector<kube::EventSpec>& events, const std::string& line);
  // The write gate: false (and a plan line) under dry_run; an Error when leadership is stale.
  base::Result<bool> mayWrite(Pass& pass, const std::string& line);
  void changed(Pass& pass, kube::EventSpec event, const std::string& line);

  std::function<ObservedNodes()> observe_;
  kube::KubeClient& client_;
  kube::PodExecutor& exec_;
  const base::Clock& clock_;
  RookCephOptions options_;
  rook::HoldDown hold_down_;
  std::set<std::string> planned_;  // dry run: plan lines already logged
  std::set<std::string> refused_;  // refusals already recorded as Events

  mutable std::mutex mu_;
  nlohmann::json status_ = nlohmann::json::object();
  std::vector<nlohmann::json> history_;
};

ControllerSpec rookCephSpec();

}  // namespace ekco::agent
