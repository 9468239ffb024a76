#include "agent/host_checks.h"

#include <openssl/asn1.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

#include "base/duration.h"
#include "kube/timestamp.h"

namespace ekco::agent {

namespace {

// notAfter of the first certificate in the PEM text, or nullopt when it does not parse.
std::optional<base::WallTime> notAfter(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                &BIO_free);
  if (!bio) return std::nullopt;
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (!cert) return std::nullopt;
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(cert.get()), &tm) != 1) return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string ago(base::WallTime since, base::WallTime now) {
  return base::formatDuration(std::chrono::duration_cast<std::chrono::seconds>(now - since));
}

}  // namespace

std::vector<HostCheck> evaluateHostChecks(const std::string& node_name, const ObservedNode& observed,
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
      out.push_back({"node-ready", ready->status == "True", "Ready=" + ready->status.str() + since});
    }
  }
  out.push_back({"kubelet-kubeconfig", kubelet_kubeconfig_present,
                 kubelet_kubeconfig_present ? "/etc/kubernetes/kubelet.conf present"
                                            : "/etc/kubernetes/kubelet.conf missing: the node "
                                              "has not joined"});
  if (apiserver_cert_pem) {
    const std::string file = options.certificates_dir + "/apiserver.crt";
    auto expiry = notAfter(*apiserver_cert_pem);
    if (!expiry) {
      out.push_back({"apiserver-certificate", false, file + ": not a PEM certificate"});
    } else if (*expiry <= now) {
      out.push_back({"apiserver-certificate", false,
                     file + " expired " + kube::formatRfc3339(*expiry)});
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
  auto checks = evaluateHostChecks(node_name_, observe_(), *kubelet, cert, options_, clock_.wallNow());
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

}  // namespace ekco::agent
