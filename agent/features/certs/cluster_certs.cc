#include "agent/features/certs/cluster_certs.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

nlohmann::json stateJson(const ClusterSecretState& s) {
  nlohmann::json j = {
      {"name", s.name}, {"secret", s.secret}, {"present", s.present}, {"due", s.due}};
  if (s.cert) {
    j["expires"] = kube::formatRfc3339(s.cert->not_after);
    j["days_left"] = std::chrono::floor<std::chrono::days>(s.left).count();
  }
  if (!s.note.empty()) j["note"] = s.note;
  if (!s.problem.empty()) j["problem"] = s.problem;
  return j;
}

}  // namespace

ClusterCerts::ClusterCerts(kube::KubeClient& kube, const hostfs::HostFs& fs,
                           const base::Clock& clock, ClusterCertsControllerOptions options)
    : kube_(kube), fs_(fs), clock_(clock), o_(std::move(options)) {}

base::Result<ReconcileResult> ClusterCerts::reconcile() {
  ClusterCertsOptions options = o_.secrets;
  options.now = clock_.wallNow();
  ReconcileResult result;
  result.requeue_after = o_.check_interval;
  auto has_ca_key = fs_.exists(options.certificates_dir + "/ca.key");
  if (!has_ca_key) return std::move(has_ca_key).error();
  if (!*has_ca_key) {
    std::lock_guard lock(mu_);
    status_ = {{"control_plane", false}, {"checked_at", kube::formatRfc3339(options.now)}};
    result.summary = "not a control-plane node (no cluster CA key)";
    return result;
  }
  const auto states = inspectClusterSecrets(kube_, fs_, options);
  exportExpiry(states);
  nlohmann::json secrets = nlohmann::json::array();
  std::vector<std::string> due;
  std::vector<std::string> problems;
  for (const ClusterSecretState& s : states) {
    secrets.push_back(stateJson(s));
    if (s.due) due.push_back(s.name);
    if (!s.problem.empty()) problems.push_back(s.problem);
    // Look again when the next one enters the TTL.
    if (s.cert && s.left > options.ttl) {
      const auto at = duration_cast<milliseconds>(s.left - options.ttl);
      if (at < *result.requeue_after) result.requeue_after = at;
    }
  }
  nlohmann::json last = nullptr;
  if (!due.empty() && o_.renew) {
    ClusterCertsReport report = renewClusterSecrets(
        kube_, fs_, options, states, secretEventRecorder(kube_, [this](const std::string& error) {
          if (o_.report) o_.report("certificate Event", error);
        }));
    for (const std::string& line : report.lines) result.plan += line + "\n";
    last = {{"at", kube::formatRfc3339(options.now)},
            {"lines", report.lines},
            {"errors", report.errors}};
    setFailing(!report.errors.empty());
    if (!report.errors.empty()) {
      {
        std::lock_guard lock(mu_);
        status_ = {{"control_plane", true},
                   {"checked_at", kube::formatRfc3339(options.now)},
                   {"secrets", secrets},
                   {"last", last}};
      }
      return base::Error(fmt::format("cluster certificates: {}", fmt::join(report.errors, "; ")));
    }
    result.summary = options.dry_run ? fmt::format("dry run: would renew {}", fmt::join(due, ", "))
                                     : fmt::format("renewed {}", fmt::join(due, ", "));
    if (!options.dry_run) result.requeue_after = milliseconds(0);  // show the new ones
  } else if (!due.empty()) {
    setFailing(false);
    result.summary =
        fmt::format("inside rotate_certs_ttl (rotate_certs is off): {}", fmt::join(due, ", "));
  } else {
    setFailing(false);
    result.summary = problems.empty() ? "no cluster certificate inside rotate_certs_ttl"
                                      : fmt::format("unreadable: {}", fmt::join(problems, "; "));
  }
  std::lock_guard lock(mu_);
  status_ = {{"control_plane", true},
             {"checked_at", kube::formatRfc3339(options.now)},
             {"secrets", secrets},
             {"last", last}};
  return result;
}

void ClusterCerts::exportExpiry(const std::vector<ClusterSecretState>& states) {
  if (o_.expiry == nullptr) return;
  std::set<std::pair<std::string, std::string>> now_exported;
  for (const ClusterSecretState& s : states) {
    if (!s.cert) continue;
    const auto at =
        std::chrono::duration_cast<std::chrono::seconds>(s.cert->not_after.time_since_epoch());
    o_.expiry->set({s.name, s.secret}, static_cast<double>(at.count()));
    now_exported.emplace(s.name, s.secret);
  }
  for (const auto& [name, secret] : exported_) {
    if (!now_exported.contains({name, secret})) o_.expiry->remove({name, secret});
  }
  exported_ = std::move(now_exported);
}

void ClusterCerts::setFailing(bool failing) {
  if (o_.failing != nullptr) o_.failing->set({o_.node_name}, failing ? 1 : 0);
}

nlohmann::json ClusterCerts::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

ControllerSpec clusterCertsSpec() {
  return {.name = "cluster-certificates",
          .scope = Scope::kNode,
          .status_key = "cluster_certificates",
          .enabled = [](const Config&) { return true; },
          // Its secret writes: an operator's pause includes the add-ons' TLS (kURL replaces
          // them during upgrades and migrations).
          .pauses_in_maintenance = true,
          // It acts only on a host with the cluster CA's key (a control-plane node), with
          // secret writes that the worker account does not hold.
          .candidates_only = true,
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            ClusterCertsControllerOptions o;
            o.secrets = clusterCertsOptions(d.config);
            o.secrets.dry_run = d.dry_run;
            o.secrets.may_write = d.may_act;
            o.renew = d.config.rotate_certs;
            o.check_interval = duration_cast<milliseconds>(d.config.rotate_certs_check_interval);
            o.report = d.report;
            o.node_name = d.node_name;
            auto expiry = d.metrics.gauge(
                "ekco_cluster_certificate_expiry_timestamp_seconds",
                "When each add-on TLS secret ekco watches expires, in Unix seconds (every "
                "control-plane agent reports the same value)",
                {"name", "secret"});
            if (!expiry) return std::move(expiry).error();
            auto failing = d.metrics.gauge(
                "ekco_cluster_certificate_renewal_failing",
                "1 while the last renewal of the add-ons' TLS secrets from this node failed",
                {"node"});
            if (!failing) return std::move(failing).error();
            o.expiry = *expiry;
            o.failing = *failing;
            return std::make_shared<ClusterCerts>(d.client, d.host_fs, d.clock, std::move(o));
          }};
}

}  // namespace ekco::agent
