// The `host-checks` node reconciler: read-only checks of this node that `/status` reports
// (`host_checks`) and `ekco status` prints, so an operator sees at a glance what is wrong with a
// host. It changes nothing. Checks:
//   node-registered        this node's Node object exists in the API
//   node-ready             its Ready condition is True (else the status and since when)
//   kubelet-kubeconfig     /etc/kubernetes/kubelet.conf exists (the node has joined)
//   apiserver-certificate  on a control-plane node (pki/apiserver.crt present): not expired,
//                          and not expiring within rotate_certs_ttl (a warning, still ok)
// A failing check is a finding, not a reconcile error: the reconcile fails only when it cannot
// look (a filesystem error other than "absent").
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "hostfs/host_fs.h"
#include "kube/decode/records.h"

namespace ekco::agent {

struct HostCheck {
  std::string name{};
  bool ok = false;
  std::string message{};
  bool operator==(const HostCheck&) const = default;
};

struct HostChecksOptions {
  std::string certificates_dir = "/etc/kubernetes/pki";
  std::chrono::seconds certificate_warning{std::chrono::hours(720)};  // rotate_certs_ttl
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
};

// The node as the agent's own-node informer sees it: nullopt while it is not (yet) known,

// Pure: the checks from what was observed. `apiserver_cert_pem` is nullopt when the file is
// absent (not a control-plane node).
std::vector<HostCheck> evaluateHostChecks(const std::string& node_name,
                                          const ObservedNode& observed,
                                          bool kubelet_kubeconfig_present,
                                          const std::optional<std::string>& apiserver_cert_pem,
                                          const HostChecksOptions& options, base::WallTime now);

class HostChecks final : public Controller {
 public:
  HostChecks(std::string node_name, const hostfs::HostFs& host, const base::Clock& clock,
             std::function<ObservedNode()> observe, HostChecksOptions options = {});
  std::string name() const override { return "host-checks"; }
  base::Result<ReconcileResult> reconcile() override;
  // The findings of the last reconcile (empty before the first).
  std::vector<HostCheck> results() const;
  // For /status ("host_checks"): [{name, ok, message}].
  nlohmann::json status() const override;

 private:
  std::string node_name_;
  const hostfs::HostFs& host_;
  const base::Clock& clock_;
  std::function<ObservedNode()> observe_;
  HostChecksOptions options_;
  mutable std::mutex mu_;
  std::vector<HostCheck> results_;
};

ControllerSpec hostChecksSpec();

}  // namespace ekco::agent
