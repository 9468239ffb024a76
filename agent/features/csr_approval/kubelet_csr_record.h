// The record of what kubelet-serving CSR approval approved, per node: ConfigMap
// `ekco-kubelet-serving-addresses` in ekco's namespace (leader_election_namespace, kurl),
//
//   data:
//     node-a: "10.0.0.1,node-a"        # the sanKey()s of its last approved CSR, sorted
//     node-b: "10.0.0.2,node-b"
//
// written only by ekco's leader, right before an approval (kubelet_csr_approval.h). The rules
// refuse a SAN that is last approved for another node (`other-node`), so a node that adds another's
// address to its status cannot take it, even while that node's status no longer shows it (a
// NotReady node, an address that moved); and a node whose own address another node squats in its
// status keeps it.
//
// Why a ConfigMap in ekco's namespace and not an annotation on each Node: NodeRestriction lets a
// kubelet modify its own Node object, annotations included, so a node could rewrite its own
// "last approved" record; nodes cannot write ConfigMaps in kurl. (The ConfigMap is as
// trustworthy as ekco's ServiceAccount.) An entry of a Node that no longer exists is ignored and
// dropped at the next write: a deleted Node no longer holds its addresses.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kKubeletServingAddressesConfigMap =
    "ekco-kubelet-serving-addresses";

struct ApprovedSans {
  bool present = false;  // the ConfigMap exists
  std::string resource_version{};
  std::map<std::string, std::vector<std::string>> by_node{};  // node -> sanKeys, sorted
};

// "10.0.0.1,node-a" -> {"10.0.0.1", "node-a"}; empty items are skipped.
std::vector<std::string> parseSanList(std::string_view text);
// {"10.0.0.1", "node-a"} -> "10.0.0.1,node-a".
std::string formatSanList(const std::vector<std::string>& sans);

// The record in a ConfigMap object.
ApprovedSans parseApprovedSans(const nlohmann::json& configmap);

// A GET from the API; an absent ConfigMap is the empty record.
[[nodiscard]] base::Result<ApprovedSans> readApprovedSans(kube::KubeClient& client,
                                                          std::string_view ns);

// Writes `by_node` as the whole record: a create when `current` is absent, else an update
// conditional on current.resource_version (kConflict, or kAlreadyExists for a create, when
// somebody wrote it meanwhile). Returns the record written.
[[nodiscard]] base::Result<ApprovedSans> writeApprovedSans(
    kube::KubeClient& client, std::string_view ns, const ApprovedSans& current,
    const std::map<std::string, std::vector<std::string>>& by_node);

}  // namespace ekco::agent
