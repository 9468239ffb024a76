// The rules a kubelet-serving CertificateSigningRequest must pass before ekco approves it
// (controller `kubelet-csr-approval`, agent/features/csr_approval/kubelet_csr_approval.h). A pure
// function over the CSR and the Nodes, so the table in
// tests/agent/features/csr_approval/kubelet_csr_approval_test.cc covers every rule.
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
//   sans        at least one DNS or IP SAN; no email, URI or any other kind of SAN; every DNS
//               SAN a host name (letters, digits, '-', '_', '.'; no wildcard '*')
//   node        Node <n> exists
//   apiserver   no SAN names the API server (ApiServerNames below): never its Service's IPs or
//               the kubernetes[.default[.svc[.<dnsDomain>]]] names; controlPlaneEndpoint's host
//               and apiServer.certSANs only for a control-plane node, as its own address
//   other-node  no SAN is another Node's name, one of another Node's status.addresses (unless
//               it was last approved for <n>), or last approved for another Node (SanClaims)
//   ip-prefixes every IP SAN is inside kubelet_csr_allowed_ip_prefixes (when that is set)
//   addresses   every DNS SAN is one of the Node's Hostname / InternalDNS / ExternalDNS
//               addresses (case-insensitively), every IP SAN one of its InternalIP /
//               ExternalIP addresses (compared in canonical form)
// A CSR for another signer, or one already approved, denied, failed or issued, is ignored.
//
// Why the apiserver and other-node rules (issue 34): `addresses` alone trusts status.addresses,
// which the node itself writes (NodeRestriction lets a kubelet update its own Node's status):
// with only its kubelet credentials a node added kubernetes.default.svc, 10.96.0.1 and another
// node's IP to its status and had a cluster-CA certificate approved for them. So a SAN is
// compared as a TLS client would match it (SanKey: DNS names in lower case without a trailing
// dot, IPs in canonical form with ::ffff:a.b.c.d taken for a.b.c.d, as Go's net.IP.Equal does;
// wildcards refused outright) against what the node cannot write: the API server's names read
// from kube-system/kubeadm-config and default/kubernetes, the other Nodes, and the record of
// what ekco approved before (written by ekco's leader only;
// agent/features/csr_approval/kubelet_csr_record.h). The control-plane exception: kubeadm clusters
// often name a primary's own address as controlPlaneEndpoint (a single primary) and list the
// primaries' addresses in certSANs, and that primary's kubelet needs a certificate for its own
// address; the node-role labels that make a node control-plane cannot be set by the node itself
// (NodeRestriction forbids kubelets the kubernetes.io label domain), and another node claiming that
// address fails
// `other-node`.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/ip_address.h"
#include "kube/decode/objects.h"
#include "kube/decode/records.h"

namespace ekco::agent {

inline constexpr std::string_view kKubeletServingSigner = "kubernetes.io/kubelet-serving";

struct KubeletCsrVerdict {
  enum class Kind { kIgnore, kApprove, kRefuse };
  Kind kind = Kind::kIgnore;
  std::string rule{};    // the failed rule's name (kRefuse), see above
  std::string reason{};  // one line: why it is ignored, refused, or what passed
  std::string node{};    // <n> of system:node:<n>, when the username names one
  // kApprove: the SANs approved, as sanKey()s, sorted and unique (what the record keeps).
  std::vector<std::string> sans{};
};

// The node of that name, or null (the caller's cache or a fresh read).
using NodeLookup = std::function<const kube::NodeRecord*(std::string_view name)>;

// How a TLS client matches a name or address, so equal ones compare equal: an IP (also one
// written as a DNS name) in canonical text with ::ffff:a.b.c.d as a.b.c.d; a DNS name in lower
// case without one trailing dot.
std::string sanKey(std::string_view san);

// What the API server is reached by, each sanKey() with where it was read (for messages).
struct ApiServerNames {
  // Only the API server's: the kubernetes Service's cluster IPs, the first IP of each kubeadm
  // serviceSubnet, kubernetes, kubernetes.default, kubernetes.default.svc and
  // kubernetes.default.svc.<dnsDomain>. Refused for every node.
  std::map<std::string, std::string> service{};
  // How clients reach the API servers, which may be a control-plane node's own address:
  // controlPlaneEndpoint's host and apiServer.certSANs.
  std::map<std::string, std::string> endpoint{};
};

// Who holds each name and address (sanKey -> node names).
struct SanClaims {
  std::map<std::string, std::set<std::string>> names{};      // a Node's metadata.name
  std::map<std::string, std::set<std::string>> addresses{};  // in a Node's status.addresses
  std::map<std::string, std::set<std::string>> approved{};   // last approved for that node
};

// Claims from the Nodes and the record of approved SANs (node -> sanKeys). A record entry of a
// node that is not among `nodes` is left out: a deleted Node no longer holds its addresses.
SanClaims sanClaims(const std::vector<kube::NodeRecord>& nodes,
                    const std::map<std::string, std::vector<std::string>>& approved);

struct KubeletCsrPolicy {
  NodeLookup node{};
  // Null when they could not be read: then nothing is approved (rule apiserver).
  const ApiServerNames* apiserver = nullptr;
  const SanClaims* claims = nullptr;                  // null: no other node claims anything
  std::vector<base::IpPrefix> allowed_ip_prefixes{};  // empty: every IP
};

KubeletCsrVerdict decideKubeletServingCsr(const kube::CertificateSigningRequest& csr,
                                          const KubeletCsrPolicy& policy);

}  // namespace ekco::agent
