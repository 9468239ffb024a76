// The rules a kubelet-serving CertificateSigningRequest must pass before ekco approves it
// (controller `kubelet-csr-approval`, agent/controllers/kubelet_csr_approval.h). A pure
// function over the CSR and the Nodes, so the table in
// tests/agent/controllers/kubelet_csr_approval_test.cc covers every rule.
//
// Why: EKCO approved every kubelet-serving CSR unseen, so anyone allowed to create a CSR got a
// certificate from the cluster CA for any name, the apiserver's included (GHSA-x7j5-fww5-mqmv;
// ../shared/reference/ekco.md §6). kube-controller-manager never approves these
// (kubernetes/kubernetes#73356); kubelet-csr-approver (peers.md §1.12) checks the requester,
// CN and SANs. ekco approves only when ALL of these hold, in this order (the first that fails
// is the rule named in the Event):
//   requester   spec.username is system:node:<n> and spec.groups contains system:nodes
//   request     spec.request is a PEM certificate request whose self-signature verifies
//   subject     the subject is exactly O=system:nodes and CN=system:node:<n>, nothing else,
//               for the same <n> as the requester
//   usages      spec.usages is exactly kube-controller-manager's kubelet-serving set (below)
//   sans        at least one DNS or IP SAN; no email, URI or any other kind of SAN
//   node        Node <n> exists
//   addresses   every DNS SAN is one of the Node's Hostname / InternalDNS / ExternalDNS
//               addresses (case-insensitively), every IP SAN one of its InternalIP /
//               ExternalIP addresses (compared in canonical form)
// A CSR for another signer, or one already approved, denied, failed or issued, is ignored.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "kube/objects.h"
#include "kube/records.h"

namespace ekco::agent {

inline constexpr std::string_view kKubeletServingSigner = "kubernetes.io/kubelet-serving";

struct KubeletCsrVerdict {
  enum class Kind { kIgnore, kApprove, kRefuse };
  Kind kind = Kind::kIgnore;
  std::string rule{};    // the failed rule's name (kRefuse), see above
  std::string reason{};  // one line: why it is ignored, refused, or what passed
  std::string node{};    // <n> of system:node:<n>, when the username names one
};

// The node of that name, or null (the caller's cache or a fresh read).
using NodeLookup = std::function<const kube::NodeRecord*(std::string_view name)>;

KubeletCsrVerdict decideKubeletServingCsr(const kube::CertificateSigningRequest& csr,
                                          const NodeLookup& node);

}  // namespace ekco::agent
