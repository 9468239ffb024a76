// Purge step 2 (a control-plane node): its entry in kube-system/kubeadm-config's ClusterStatus
// (kubeadm < 1.22 keeps `apiEndpoints` there; later versions have no ClusterStatus key), and
// where the remaining etcd members are (EKCO's removeKubeadmEndpoint and the address search
// before removeEtcdPeer).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

struct ClusterStatusEdit {
  bool had_entry = false;                          // the node was in apiEndpoints
  std::string removed_address{};                   // its advertiseAddress
  std::vector<std::string> remaining_addresses{};  // the other entries' advertiseAddress, sorted
  // The ClusterStatus text to write back (canonical camelCase keys), or "" when unchanged.
  std::string rewritten{};
};

// Edits a ClusterStatus YAML document. Reads both kubeadm's keys (apiEndpoints,
// advertiseAddress, bindPort) and the lower-case ones an old EKCO wrote (ekco#107:
// apiendpoints, advertiseaddress, bindport) and always writes kubeadm's, so a malformed
// document is repaired even when the node is not in it. Errors (kParse) name the key.
base::Result<ClusterStatusEdit> removeApiEndpoint(std::string_view cluster_status_yaml,
                                                  std::string_view node);

struct KubeadmStepResult {
  std::vector<std::string> actions{};
  std::string removed_address{};  // "" when kubeadm-config did not know it
  std::vector<std::string> remaining_addresses{};
};

// Applies removeApiEndpoint to kube-system/kubeadm-config (an update with the object's
// resourceVersion: a concurrent change is a conflict, not a lost write). No ConfigMap or no
// ClusterStatus key: nothing to do. Dry run: plans only.
base::Result<KubeadmStepResult> removeFromKubeadmConfig(kube::KubeClient& client,
                                                        std::string_view node, bool dry_run);

// The addresses of the control plane's other members, when kubeadm-config no longer lists them
// (kubeadm >= 1.22): the kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint
// annotation of the kube-apiserver pods (component=kube-apiserver,tier=control-plane) on other
// nodes, host part only, sorted and de-duplicated.
base::Result<std::vector<std::string>> apiserverAddresses(kube::KubeClient& client,
                                                          std::string_view except_node);

}  // namespace ekco::agent
