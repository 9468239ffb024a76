// Purge step 1 (maintain_rook_storage_nodes): take a dead node's Ceph OSDs out of the Rook
// cluster. EKCO's pkg/cluster/purge_node.go purgeCephOsd, with its bugs fixed:
//   - every OSD Deployment on the host is handled (EKCO stopped at the first), and OSD ids of any
//     number of digits (EKCO's pattern matched one);
//   - the order makes a resumed purge (a crash, a new leader) finish without knowing what the
//     first attempt did: the CephCluster entry first (so the operator does not re-create the
//     OSDs), then per OSD `ceph osd down` and `ceph osd purge` while its Deployment still says
//     which id it had, then the Deployments, then `ceph osd crush rm <host>`. Every step is a
//     no-op when already done (ceph answers 0 for an OSD or host that is gone).
// The `ceph` commands run in the rook-ceph-tools pod (label app=rook-ceph-tools; the operator
// pod for Rook < 1.4, which had no tools pod) through pods/exec.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kube/client.h"
#include "kube/exec.h"

namespace ekco::rook {

inline constexpr std::string_view kNamespace = "rook-ceph";
inline constexpr std::string_view kClusterName = "rook-ceph";

// The pod that runs `ceph`: a Running rook-ceph-tools pod (not terminating), else (Rook < 1.4)
// the operator. kNotFound when there is neither.
base::Result<std::string> cephPod(kube::KubeClient& client, const std::string& ns);

struct OsdDeployment {
  std::string name{};
  std::string osd_id{};  // decimal digits

  friend bool operator==(const OsdDeployment&, const OsdDeployment&) = default;
};

// The Deployments of a list (app=rook-ceph-osd) whose pod template selects the host
// (nodeSelector kubernetes.io/hostname). A matching Deployment whose ceph-osd-id label is not
// all digits is a kParse error naming it (never spliced into a ceph command).
base::Result<std::vector<OsdDeployment>> osdDeploymentsOnHost(const nlohmann::json& list,
                                                              std::string_view hostname);

// The JSON patch that removes `node` from a CephCluster's spec.storage.nodes, guarded by a
// "test" of the current list (a concurrent change fails the patch instead of being lost);
// nullopt when there is nothing to remove (useAllNodes, no list, not listed).
std::optional<nlohmann::json> storageNodesPatch(const nlohmann::json& ceph_cluster,
                                                std::string_view node);

// `ceph osd down <id>` and `ceph osd purge <id> --yes-i-really-mean-it` for one OSD.
std::vector<std::vector<std::string>> cephOsdPurgeCommands(std::string_view osd_id);
// `ceph osd crush rm <host>`.
std::vector<std::string> cephCrushRemoveCommand(std::string_view hostname);

struct PurgeOptions {
  bool dry_run = false;
  std::string ns = std::string(kNamespace);
  std::string cluster = std::string(kClusterName);
};

struct PurgeResult {
  std::vector<std::string> actions{};  // done (or, in a dry run, planned), one line each
  std::vector<OsdDeployment> osds{};
  bool rook_present = true;  // false: no CephCluster, nothing to do
};

// Runs (or plans) the step for `node` whose kubernetes.io/hostname label is `hostname` (EKCO
// used the node name; they differ when kubelet's --hostname-override is set). Errors name the
// object or the command; a ceph command that exits non-zero is an error with its stderr.
base::Result<PurgeResult> purgeNode(kube::KubeClient& client, kube::PodExecutor& exec,
                                    std::string_view node, std::string_view hostname,
                                    const PurgeOptions& options = PurgeOptions{});

}  // namespace ekco::rook
