#include "agent/features/host_checks/host_checks.h"

#include <memory>

#include "base/duration.h"
#include "kube/decode/timestamp.h"
#include "pki/certificate.h"

namespace ekco::agent {

namespace {

std::string ago(base::WallTime since, base::WallTime now) {
  return base::formatDuration(std::chrono::duration_cast<std::chrono::seconds>(now - since));
}

}  // namespace

std::vector<HostCheck> evaluateHostChecks(const std::string& node_name,
                                          const ObservedNode& observed,
                                          bool kubelet_kubeconfig_present,
                                          const std::optional<std::string>& apiserver_cert_pem,
                                          const HostChecksOptions& options, base::WallTime now) {
  std::vector<HostCheck> out;
  if (!observed.synced) {
    out.push_back({"node-registered", false, "the node cache has not synced yet"});
  } else if (!observed.node) {
    out.push_back({"node-registered", false, "Node " + node_name + " does not exist in the API"});
  } else {
    out.push_back({"node-registered", true, "Node " + node_name + " exists"});
    const kube::ConditionRecord* ready = observed.node->condition("Ready");
    if (ready == nullptr) {
      out.push_back({"node-ready", false, "the Node has no Ready condition"});
    } else {
      std::string since;
      if (ready->last_transition_time) {
        since = " for " + ago(*ready->last_transition_time, now);
      }
      out.push_back(
          {"node-ready", ready->status == "True", "Ready=" + ready->status.str() + since});
    }
  }
  out.push_back({"kubelet-kubeconfig", kubelet_kubeconfig_present,
                 kubelet_kubeconfig_present ? "/etc/kubernetes/kubelet.conf present"
                                            : "/etc/kubernetes/kubelet.conf missing: the node "
                                              "has not joined"});
  if (apiserver_cert_pem) {
    const std::string file = options.certificates_dir + "/apiserver.crt";
    auto cert = pki::parseCertificate(*apiserver_cert_pem, file);
    const std::optional<base::WallTime> expiry =
        cert ? std::optional<base::WallTime>(cert->not_after) : std::nullopt;
    if (!cert) {
      out.push_back({"apiserver-certificate", false, cert.error().message()});
    } else if (*expiry <= now) {
      out.push_back(
          {"apiserver-certificate", false, file + " expired " + kube::formatRfc3339(*expiry)});
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::seconds>(*expiry - now);
      std::string message = file + " expires " + kube::formatRfc3339(*expiry) + " (in " +
                            base::formatDuration(left) + ")";
      if (left < options.certificate_warning) message += ", within rotate_certs_ttl";
      out.push_back({"apiserver-certificate", true, message});
    }
  }
  return out;
}

HostChecks::HostChecks(std::string node_name, const hostfs::HostFs& host, const base::Clock& clock,
                       std::function<ObservedNode()> observe, HostChecksOptions options)
    : node_name_(std::move(node_name)),
      host_(host),
      clock_(clock),
      observe_(std::move(observe)),
      options_(std::move(options)) {}

base::Result<ReconcileResult> HostChecks::reconcile() {
  auto kubelet = host_.exists("/etc/kubernetes/kubelet.conf");
  if (!kubelet) return std::move(kubelet).error();
  std::optional<std::string> cert;
  const std::string cert_path = options_.certificates_dir + "/apiserver.crt";
  auto cert_present = host_.exists(cert_path);
  if (!cert_present) return std::move(cert_present).error();
  if (*cert_present) {
    auto text = host_.read(cert_path);
    if (!text) return std::move(text).error();
    cert = std::move(*text);
  }
  auto checks =
      evaluateHostChecks(node_name_, observe_(), *kubelet, cert, options_, clock_.wallNow());
  std::size_t failing = 0;
  std::string first_failure;
  for (const auto& c : checks) {
    if (!c.ok && failing++ == 0) first_failure = c.name + ": " + c.message;
  }
  ReconcileResult result;
  result.summary = failing == 0 ? std::to_string(checks.size()) + " checks ok"
                                : std::to_string(failing) + " of " + std::to_string(checks.size()) +
                                      " checks failing (" + first_failure + ")";
  for (const auto& c : checks) {
    result.plan += (c.ok ? "ok   " : "FAIL ") + c.name + ": " + c.message + "\n";
  }
  result.requeue_after = options_.interval;
  {
    std::lock_guard lock(mu_);
    results_ = std::move(checks);
  }
  return result;
}

std::vector<HostCheck> HostChecks::results() const {
  std::lock_guard lock(mu_);
  return results_;
}

nlohmann::json HostChecks::status() const {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : results()) {
    checks.push_back({{"name", c.name}, {"ok", c.ok}, {"message", c.message}});
  }
  return checks;
}

ControllerSpec hostChecksSpec() {
  return {.name = "host-checks",
          .scope = Scope::kNode,
          .status_key = "host_checks",
          .enabled = [](const Config&) { return true; },
          .watches = {ownNodeWatch()},
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            auto node = observeOwnNode(d.watches);
            if (!node) return std::move(node).error();
            const Config& c = d.config;
            return std::make_shared<HostChecks>(
                d.node_name, d.host_fs, d.clock, std::move(*node),
                HostChecksOptions{
                    .certificates_dir = c.certificates_dir,
                    .certificate_warning =
                        std::chrono::duration_cast<std::chrono::seconds>(c.rotate_certs_ttl),
                    .interval = std::chrono::duration_cast<std::chrono::milliseconds>(
                        c.reconcile_interval)});
          }};
}

}  // namespace ekco::agent
