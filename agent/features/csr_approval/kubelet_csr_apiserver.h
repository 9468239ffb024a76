// The API server's names and addresses, which kubelet-serving CSR approval never grants a node
// (rule `apiserver`, agent/features/csr_approval/kubelet_csr_rules.h), read from the two places a
// kubeadm cluster states them:
//   - Service default/kubernetes: spec.clusterIP and spec.clusterIPs (kube-apiserver keeps it);
//   - ConfigMap kube-system/kubeadm-config, key ClusterConfiguration (YAML, kubeadm's v1beta2 to
//     v1beta4): networking.serviceSubnet (one CIDR, or two comma-separated for dual stack; the
//     first address of each is the Service's IP, as kubeadm puts it in the apiserver's
//     certificate; default 10.96.0.0/12), networking.dnsDomain (default cluster.local) for
//     kubernetes.default.svc.<dnsDomain>, controlPlaneEndpoint's host and apiServer.certSANs.
// Both must be read: when either cannot be (absent, forbidden, malformed), the caller approves
// nothing (fail closed), since a SAN could then name the API server unseen.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "agent/features/csr_approval/kubelet_csr_rules.h"
#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

// From the Service object (JSON) and the ClusterConfiguration text. Errors are one line naming
// the object and field.
[[nodiscard]] base::Result<ApiServerNames> apiServerNamesFrom(
    const nlohmann::json& kubernetes_service, std::string_view cluster_configuration);

// Two GETs: Service default/kubernetes and ConfigMap kube-system/kubeadm-config.
[[nodiscard]] base::Result<ApiServerNames> readApiServerNames(kube::KubeClient& client);

}  // namespace ekco::agent
