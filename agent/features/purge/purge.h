// Purging a node: the guards (pure) and the steps, in EKCO's order (../shared/reference/ekco.md
// §3.2), each one safe to run again so a crash or a new leader resumes a purge:
//   1. Rook (maintain_rook_storage_nodes): agent/purge_rook.h;
//   2. a control-plane node: its kubeadm-config ClusterStatus entry (agent/purge_kubeadm.h);
//   3. its etcd member, through etcd's JSON gateway with the healthcheck client certificate
//      (etcd/), only when the remaining members keep quorum; automatically only when the member
//      is not healthy;
//   4. the Node object.
// Progress is recorded on the Node (annotations ekco.kurl.sh/purge-started,
// ekco.kurl.sh/purge-step) so /status and the next leader can see a purge under way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"
#include "etcd/client.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"
#include "kube/decode/records.h"
#include "kube/exec.h"

namespace ekco::agent {

inline constexpr std::string_view kPurgeStartedAnnotation = "ekco.kurl.sh/purge-started";
inline constexpr std::string_view kPurgeStepAnnotation = "ekco.kurl.sh/purge-step";

struct PurgeGuardInput {
  std::vector<kube::NodeRecord> nodes{};  // every node
  std::string target{};
  // The node this process runs on (the leader's, or the CLI's when known); never purged.
  std::string self{};
  bool automatic = false;  // the leader's purge of dead nodes (else `ekco purge-node`)
  std::int64_t min_ready_master_nodes = 2;
  std::int64_t min_ready_worker_nodes = 0;
  // Automatic purges only:
  base::WallTime now{};
  base::Duration node_unreachable_toleration{};
  std::int64_t storm_guard_percent = 55;
};

// Why the purge must not happen, or nullopt. Readiness is agent/node_health.h's isReady.
//   - never the node this process runs on;
//   - automatic: only a dead node, not during a storm, and (EKCO's rule, an else-if chain) not
//     when it is a control-plane node and ready masters < min_ready_master_nodes, else not when
//     ready workers < min_ready_worker_nodes;
//   - manual (EKCO's refusal): a Ready target when ready nodes of its role <= the minimum
//     ("cannot purge master: 2 ready masters"). An absent target passes (nothing to count).
std::optional<std::string> purgeRefusal(const PurgeGuardInput& input);

struct PurgeOptions {
  std::string certificates_dir = "/etc/kubernetes/pki";
  bool maintain_rook_storage_nodes = false;
  bool dry_run = false;
  // A manual purge may remove a healthy etcd member (still only if quorum holds); an automatic
  // one never does.
  bool allow_healthy_etcd_member = false;
  // Checked before each step (the Lease, for the leader); false stops the purge.
  std::function<bool()> may_continue{};
  // Also before each step: re-reads from the API (never a cache) what the guards depend on and
  // evaluates them again on it; a reason stops the purge (kCancelled, the Node left in place so
  // nothing half-done is hidden). The leader's automatic purge sets it (agent/purge_dead_nodes).
  std::function<std::optional<std::string>()> recheck{};
  // An Event on the Node for each step done (reason, message).
  std::function<void(const std::string&, const std::string&)> event{};
};

struct PurgeDeps {
  kube::KubeClient& client;
  kube::PodExecutor& exec;
  const hostfs::HostFs& fs;  // the host's certificates_dir
  const base::Clock& clock;
  std::function<std::unique_ptr<etcd::EtcdClient>(etcd::ClientOptions)> etcd_factory{};
};

struct PurgeReport {
  std::vector<std::string> actions{};   // done, or planned under dry_run
  std::vector<std::string> warnings{};  // steps that failed without stopping the purge (Rook)
  bool node_deleted = false;
};

// Runs (or plans) the purge of `name`. Stops at the first step that must not be skipped (an
// unsafe etcd removal, an API error), leaving the Node in place so it can be resumed; a failed
// Rook step is a warning (as in EKCO: the OSD Deployment remains and tells what to clean).
base::Result<PurgeReport> purgeNode(const PurgeDeps& deps, std::string_view name,
                                    const PurgeOptions& options);

}  // namespace ekco::agent
