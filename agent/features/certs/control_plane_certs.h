// The `control-plane-certificates` node reconciler. On a control-plane node (its
// pki/apiserver.crt or another kubeadm leaf certificate is present) it inspects every kubeadm
// certificate and CA (agent/features/certs/certs.h) at start and every rotate_certs_check_interval,
// and:
//   - exports ekco_certificate_expiry_timestamp_seconds{name,node} for each, and
//     ekco_certificate_renewal_failing{node} (1 while the last renewal failed);
//   - records one Warning Event on the Node when a certificate or CA comes within 30 and again
//     within 7 days of its expiry (CertificateExpiringSoon, CertificateAuthorityExpiringSoon);
//   - with rotate_certs on, renews the certificates inside rotate_certs_ttl by the same run as
//     `ekco certs renew` (certs_renewal.h: the disruption Lease, backups, the static pods
//     restarted, the result verified, the old pairs restored when it is not).
//
// A renewal waits for the Lease and for the restarted components (minutes), and node
// reconcilers share one worker thread, so it runs on a thread of its own: one reconcile starts
// it, later ones (every `poll` while it runs) collect it. The files are not inspected while it
// runs. A failed renewal is tried again after retry_initial, doubling up to check_interval: each
// try may restart an apiserver, so never in a tight loop. When the agent stops, a renewal still
// waiting for the Lease gives up at once (nothing written yet); one past that point finishes its
// verification (at most its verify_timeout) before the agent exits.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/certs/certs.h"
#include "agent/features/certs/certs_renewal.h"
#include "agent/serve/metrics.h"
#include "base/clock.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"

namespace ekco::agent {

// The thresholds of the expiry Events, largest first.
inline const std::vector<std::chrono::hours> kCertWarningThresholds = {std::chrono::hours(24 * 30),
                                                                       std::chrono::hours(24 * 7)};

struct CertWarning {
  std::string key{};  // name/threshold-days/expiry: recorded once per certificate and threshold
  std::string reason{};
  std::string message{};
};

struct CertsPlan {
  bool control_plane = false;
  std::vector<std::string> due{};  // inside the TTL, renewable, and renewing gains time
  // Inside the TTL but not renewed: their CA expires before a renewal would gain anything.
  std::vector<std::string> blocked{};
  std::vector<CertWarning> warnings{};
  // When the next threshold (a warning, the TTL) is crossed, if sooner than the next check.
  std::optional<std::chrono::milliseconds> next_crossing = std::nullopt;
};

// Pure: what the inspection calls for. `warned` holds the keys of the Events already recorded;
// `renew` is rotate_certs (it changes only the Events' wording: `due` is what would be renewed).
CertsPlan planCertificates(const Inspection& inspection, const std::set<std::string>& warned,
                           std::chrono::seconds ttl, bool renew);

struct ControlPlaneCertsOptions {
  InspectOptions inspect{};  // `now` is set at each check
  std::string node_name{};
  bool renew = true;  // rotate_certs
  bool dry_run = false;
  std::string lease_namespace = "kurl";
  std::chrono::milliseconds check_interval{std::chrono::hours(24)};
  std::chrono::milliseconds poll{std::chrono::seconds(5)};
  std::chrono::milliseconds retry_initial{std::chrono::minutes(10)};
};

// Runs one renewal (runCertRenewal in production); `wait` sleeps between tries for the Lease
// and returns false when the controller is stopping.
using CertRenewalRunner = std::function<base::Result<CertRenewalReport>(
    const CertRenewalOptions& options, const std::function<bool(std::chrono::milliseconds)>& wait)>;

struct ControlPlaneCertsDeps {
  const hostfs::HostFs& fs;
  kube::KubeClient& kube;
  const base::Clock& clock;
  CertRenewalRunner run_renewal;
  const Gauge* expiry = nullptr;   // {name, node}
  const Gauge* failing = nullptr;  // {node}
  std::function<void(std::string_view what, const std::string& message)> report{};
};

class ControlPlaneCerts final : public Controller {
 public:
  ControlPlaneCerts(ControlPlaneCertsDeps deps, ControlPlaneCertsOptions options);
  ~ControlPlaneCerts() override;  // stops and joins a running renewal
  ControlPlaneCerts(const ControlPlaneCerts&) = delete;
  ControlPlaneCerts& operator=(const ControlPlaneCerts&) = delete;

  std::string name() const override { return "control-plane-certificates"; }
  base::Result<ReconcileResult> reconcile() override;
  // {"control_plane", "checked_at", "certificates": [...], "authorities": [...],
  //  "renewal": {"state", "since", "message", "renewed", "next_attempt"}}
  nlohmann::json status() const override;

 private:
  struct Job;
  base::Result<ReconcileResult> collect();
  void start(const std::vector<std::string>& due);
  bool waitUnlessStopping(std::chrono::milliseconds d);
  void recordWarnings(const std::vector<CertWarning>& warnings);
  void exportMetrics(const Inspection& inspection);

  ControlPlaneCertsDeps d_;
  ControlPlaneCertsOptions o_;
  std::set<std::string> warned_;
  std::set<std::string> exported_;  // names with an expiry series
  int failures_ = 0;
  std::optional<base::MonoTime> retry_at_ = std::nullopt;

  mutable std::mutex mu_;  // guards what status() reads, and stopping_
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::unique_ptr<Job> job_;
  nlohmann::json inspected_ = nlohmann::json::object();
  nlohmann::json renewal_ = {{"state", "idle"}};
};

ControllerSpec controlPlaneCertsSpec();

}  // namespace ekco::agent
