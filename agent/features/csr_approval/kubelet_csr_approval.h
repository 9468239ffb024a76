// Kubelet-serving CSR approval (leader controller `kubelet-csr-approval`, config
// `auto_approve_kubelet_csrs`, on by default as in kURL). Kubelets with serverTLSBootstrap ask
// for their serving certificate with a CertificateSigningRequest for signer
// kubernetes.io/kubelet-serving, which kube-controller-manager never approves
// (kubernetes/kubernetes#73356). EKCO approved them all unseen (GHSA-x7j5-fww5-mqmv); ekco
// approves one only when every rule of agent/features/csr_approval/kubelet_csr_rules.h holds.
//
// Reads two leader caches: the kubelet-serving CSRs (one informer with the field selector
// spec.signerName=kubernetes.io/kubelet-serving: a storm of CSRs is watched, never re-listed per
// CSR) and every Node. Woken when either changes, so a CSR that names a Node not yet seen is
// approved once the Node appears.
//
// A pass with a pending CSR first reads the API server's names (Service default/kubernetes and
// kube-system/kubeadm-config, agent/features/csr_approval/kubelet_csr_apiserver.h) and the record
// of approved SANs (ConfigMap <ns>/ekco-kubelet-serving-addresses, kubelet_csr_record.h) from the
// API. When either cannot be read the pass approves nothing and fails with the reason (fail closed:
// /status last_error, the log, the manager's backoff).
//
// For each pending CSR the rules decide on the caches. Then:
//   - refused: it stays pending, logged, with ONE Warning Event `KubeletCSRNotApproved` on it
//     naming the failed rule (one per CSR while this agent leads, not one per pass; /status
//     shows the current reason);
//   - approved:
//     (1) re-read the CSR, its Node and the record from the API (not the caches) and decide
//         again: a changed CSR, Node or record is decided on what the API has now (the other
//         Nodes come from the cache);
//     (2) under --dry-run: logged once and shown in /status, nothing written;
//     (3) ask is_leader_fresh; no approval without a fresh Lease;
//     (4) when the node's approved SANs differ from its record entry: write the record
//         (conditional on its resourceVersion; a concurrent write is looked at again in a
//         second), log, and an Event on the Node: Normal `KubeletServingAddressesRecorded` for
//         its first entry, Warning `KubeletServingAddressesChanged` (old and new SANs) for a
//         change. Written before the approval, so an approval never outruns its record (a
//         record whose approval then fails only refuses more);
//     (5) PUT certificatesigningrequests/NAME/approval with the re-read object (its
//         resourceVersion: a concurrent change is the API's 409, looked at again in a second)
//         plus an Approved condition, reason EkcoAutoApproved;
//     (6) log, a Normal Event `KubeletCSRApproved`,
//     ekco_actions_total{kind="kubelet_csr_approved"}.
// At most kMaxApprovalsPerPass approvals per pass, then the next pass follows at once, so a storm
// does not hold the leader's worker.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/controller/watch.h"
#include "agent/features/csr_approval/kubelet_csr_record.h"
#include "agent/features/csr_approval/kubelet_csr_rules.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent {

// The CertificateSigningRequests for signer kubernetes.io/kubelet-serving (the leader's watch).
struct ObservedCsrs {
  bool synced = false;  // listed at least once, or the API serves no certificates.k8s.io/v1
  std::vector<kube::CertificateSigningRequest> csrs{};
};

// "kubelet-serving-csrs" (leader scope): only the kubelet-serving signer's requests, through the
// field selector kube-apiserver supports for CSRs, so a cluster's other CSRs cost nothing here.
WatchSpec kubeletServingCsrsWatch();

struct KubeletCsrApprovalOptions {
  std::string ns = "kurl";  // the record's namespace (leader_election_namespace)
  std::vector<base::IpPrefix> allowed_ip_prefixes{};  // kubelet_csr_allowed_ip_prefixes
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class KubeletCsrApprovalController : public Controller {
 public:
  static constexpr std::chrono::seconds kAfterConflict{1};
  static constexpr int kMaxApprovalsPerPass = 50;
  static constexpr std::string_view kApprovedReason = "EkcoAutoApproved";
  static constexpr std::string_view kRecordedReason = "KubeletServingAddressesRecorded";
  static constexpr std::string_view kChangedReason = "KubeletServingAddressesChanged";

  KubeletCsrApprovalController(std::function<ObservedNodes()> observe_nodes,
                               std::function<ObservedCsrs()> observe_csrs, kube::KubeClient& client,
                               const base::Clock& clock, KubeletCsrApprovalOptions options);

  std::string name() const override { return "kubelet-csr-approval"; }
  base::Result<ReconcileResult> reconcile() override;
  // For /status: the pending CSRs and why each is not approved, the last decisions.
  nlohmann::json status() const override;
  void leadershipChanged(bool leading) override;

 private:
  enum class Outcome { kApproved, kRefused, kSkipped, kConflict };
  base::Result<Outcome> approve(const std::string& name, const ApiServerNames& apiserver,
                                const std::vector<kube::NodeRecord>& nodes, std::string& line);
  // Step (4): the node's record entry set to `sans`, with its log line and Event.
  base::Result<Outcome> recordSans(const ApprovedSans& current, const kube::NodeRecord& node,
                                   const std::vector<std::string>& sans,
                                   const std::vector<kube::NodeRecord>& nodes,
                                   const std::string& csr);
  void refused(const kube::CertificateSigningRequest& csr, const KubeletCsrVerdict& verdict);
  void remember(const std::string& csr, const std::string& decision, const std::string& reason);

  std::function<ObservedNodes()> observe_nodes_;
  std::function<ObservedCsrs()> observe_csrs_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  KubeletCsrApprovalOptions options_;
  std::set<std::string> planned_;  // dry run: approvals already logged (by uid)

  mutable std::mutex mu_;
  std::map<std::string, std::string> noted_;    // uid -> the rule its Event named
  std::map<std::string, std::string> pending_;  // CSR name -> why it is not approved
  std::vector<nlohmann::json> history_;
};

ControllerSpec kubeletCsrApprovalSpec();

}  // namespace ekco::agent
