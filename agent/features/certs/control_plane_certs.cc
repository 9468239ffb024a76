#include "agent/features/certs/control_plane_certs.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "base/duration.h"
#include "base/log/log.h"
#include "base/os/thread.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "pki/probe.h"
#include "pki/renew.h"

namespace ekco::agent {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

long long daysLeft(seconds left) { return std::chrono::floor<std::chrono::days>(left).count(); }

long long unixSeconds(base::WallTime t) {
  return std::chrono::floor<seconds>(t.time_since_epoch()).count();
}

std::string expiryText(const CertState& s) {
  if (s.left <= seconds(0)) return "expired " + kube::formatRfc3339(s.cert->not_after);
  return fmt::format("expires {}, {} days left", kube::formatRfc3339(s.cert->not_after),
                     daysLeft(s.left));
}

nlohmann::json stateJson(const CertState& s) {
  nlohmann::json j = {{"name", s.name}, {"file", s.file}, {"missing", s.missing}};
  if (!s.ca.empty()) j["ca"] = s.ca;
  if (s.cert) {
    j["expires"] = kube::formatRfc3339(s.cert->not_after);
    j["days_left"] = daysLeft(s.left);
  }
  j["external_ca"] = s.external_ca;
  j["due"] = s.due;
  if (!s.not_renewable.empty()) j["not_renewable"] = s.not_renewable;
  if (!s.problem.empty()) j["problem"] = s.problem;
  return j;
}

}  // namespace

CertsPlan planCertificates(const Inspection& in, const std::set<std::string>& warned, seconds ttl,
                           bool renew) {
  CertsPlan plan;
  for (const CertState& s : in.certificates) {
    if (!s.missing) plan.control_plane = true;
  }
  if (!plan.control_plane) return plan;
  auto ahead = [&plan](seconds left, seconds threshold) {
    if (left <= threshold) return;
    const auto in_ms = duration_cast<milliseconds>(left - threshold);
    if (!plan.next_crossing || in_ms < *plan.next_crossing) plan.next_crossing = in_ms;
  };
  auto consider = [&](const CertState& s, bool authority) {
    if (s.missing || !s.cert) return;
    std::optional<std::chrono::hours> crossed;
    for (const auto threshold : kCertWarningThresholds) {
      if (s.left <= threshold) crossed = threshold;
      ahead(s.left, threshold);
    }
    if (!authority) ahead(s.left, ttl);
    if (crossed) {
      const long long threshold_days = std::chrono::floor<std::chrono::days>(*crossed).count();
      std::string key =
          fmt::format("{}/{}d/{}", s.name, threshold_days, unixSeconds(s.cert->not_after));
      if (!warned.contains(key)) {
        std::string message;
        if (authority) {
          message = fmt::format(
              "CA {} ({}) {}: ekco does not renew CAs; renew it with kubeadm and redistribute it",
              s.name, s.file, expiryText(s));
        } else if (s.external_ca) {
          message = fmt::format("{} ({}) {}: its CA key is not on this host, ekco cannot renew it",
                                s.name, s.file, expiryText(s));
        } else if (!s.not_renewable.empty()) {
          message = fmt::format("{} ({}) {}: ekco cannot renew it: {}", s.name, s.file,
                                expiryText(s), s.not_renewable);
        } else if (!renew) {
          message = fmt::format("{} ({}) {}: rotate_certs is off", s.name, s.file, expiryText(s));
        } else {
          message = fmt::format("{} ({}) {}: ekco renews it inside rotate_certs_ttl ({}d)", s.name,
                                s.file, expiryText(s), daysLeft(ttl));
        }
        plan.warnings.push_back(
            {.key = std::move(key),
             .reason = authority ? "CertificateAuthorityExpiringSoon" : "CertificateExpiringSoon",
             .message = std::move(message)});
      }
    }
    if (authority) return;
    // A renewed certificate never outlives its CA (inspectCertificates: not_renewable): inside
    // the TTL, such a certificate is reported, not renewed at every check.
    if (s.due) {
      plan.due.push_back(s.name);
    } else if (!s.not_renewable.empty() && s.left < ttl) {
      plan.blocked.push_back(fmt::format("{}: {}", s.name, s.not_renewable));
    }
  };
  for (const CertState& s : in.certificates) consider(s, false);
  for (const CertState& s : in.authorities) consider(s, true);
  return plan;
}

struct ControlPlaneCerts::Job {
  std::vector<std::string> names{};
  base::WallTime started{};
  std::atomic<bool> done{false};
  std::optional<base::Result<CertRenewalReport>> result = std::nullopt;  // set before done
  std::thread thread{};
};

ControlPlaneCerts::ControlPlaneCerts(ControlPlaneCertsDeps deps, ControlPlaneCertsOptions options)
    : d_(std::move(deps)), o_(std::move(options)) {}

ControlPlaneCerts::~ControlPlaneCerts() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (job_ && job_->thread.joinable()) job_->thread.join();
}

bool ControlPlaneCerts::waitUnlessStopping(milliseconds d) {
  std::unique_lock lock(mu_);
  return !stop_cv_.wait_for(lock, d, [this] { return stopping_; });
}

base::Result<ReconcileResult> ControlPlaneCerts::reconcile() {
  if (job_) {
    if (!job_->done.load()) {
      return ReconcileResult{.summary = fmt::format("renewing {}", fmt::join(job_->names, ", ")),
                             .requeue_after = o_.poll};
    }
    return collect();
  }
  InspectOptions inspect = o_.inspect;
  inspect.now = d_.clock.wallNow();
  const Inspection in = inspectCertificates(d_.fs, inspect);
  const CertsPlan plan = planCertificates(in, warned_, inspect.ttl, o_.renew);
  exportMetrics(in);
  recordWarnings(plan.warnings);

  ReconcileResult result;
  result.requeue_after = o_.check_interval;
  if (plan.next_crossing && *plan.next_crossing < *result.requeue_after) {
    result.requeue_after = *plan.next_crossing;
  }
  {
    std::lock_guard lock(mu_);
    inspected_ = {{"control_plane", plan.control_plane},
                  {"checked_at", kube::formatRfc3339(inspect.now)},
                  {"certificates", nlohmann::json::array()},
                  {"authorities", nlohmann::json::array()},
                  {"not_renewable", plan.blocked}};
    if (plan.control_plane) {
      for (const CertState& s : in.certificates) inspected_["certificates"].push_back(stateJson(s));
      for (const CertState& s : in.authorities) inspected_["authorities"].push_back(stateJson(s));
    }
  }
  if (!plan.control_plane) {
    result.summary = "not a control-plane node (no kubeadm certificates)";
    return result;
  }
  for (const std::string& b : plan.blocked) result.plan += "not renewed: " + b + "\n";
  // A renewal or restore interrupted by a crash (a journal in the backup directory) leaves a pair
  // kube-apiserver cannot load at its next restart: repaired now by a renewal run, which repairs
  // first, whether or not anything is due (after a failed run, once its backoff has passed).
  auto interrupted = findInterruptedRenewals(d_.fs, inspect);
  if (!interrupted) {
    return std::move(interrupted).error().wrap("certificates: look for an interrupted renewal");
  }
  if (!interrupted->empty()) {
    std::vector<std::string> names;
    for (const InterruptedRenewal& r : *interrupted) names.push_back(r.name + " (" + r.why + ")");
    result.plan +=
        "repair an interrupted renewal: " + fmt::to_string(fmt::join(names, ", ")) + "\n";
    const bool backing_off = retry_at_ && d_.clock.monoNow() < *retry_at_;
    if (!o_.dry_run && !backing_off) {
      base::logWarn(
          "certificates: repairing an interrupted renewal",
          {{"node", o_.node_name}, {"certificates", fmt::to_string(fmt::join(names, ", "))}});
      start(plan.due);
      return ReconcileResult{
          .summary = fmt::format("repairing an interrupted renewal: {}", fmt::join(names, ", ")),
          .plan = result.plan,
          .requeue_after = o_.poll};
    }
  }
  if (plan.due.empty()) {
    result.summary = plan.blocked.empty() ? "no certificate inside rotate_certs_ttl"
                                          : fmt::format("{} inside rotate_certs_ttl, not renewable",
                                                        plan.blocked.size());
    return result;
  }
  if (!o_.renew) {
    result.summary =
        fmt::format("inside rotate_certs_ttl (rotate_certs is off): {}", fmt::join(plan.due, ", "));
    return result;
  }
  if (retry_at_ && d_.clock.monoNow() < *retry_at_) {
    const auto wait = duration_cast<milliseconds>(*retry_at_ - d_.clock.monoNow());
    result.summary = fmt::format("the last renewal failed; the next attempt in {}",
                                 base::formatDuration(duration_cast<seconds>(wait)));
    result.requeue_after = std::min(*result.requeue_after, wait);
    return result;
  }
  start(plan.due);
  return ReconcileResult{
      .summary = fmt::format("renewing {}", fmt::join(plan.due, ", ")),
      .plan = result.plan + "renew: " + fmt::to_string(fmt::join(plan.due, ", ")) + "\n",
      .requeue_after = o_.poll};
}

void ControlPlaneCerts::start(const std::vector<std::string>& due) {
  CertRenewalOptions options;
  options.inspect = o_.inspect;
  options.inspect.now = d_.clock.wallNow();
  options.names = due;
  options.dry_run = o_.dry_run;
  options.node_name = o_.node_name;
  options.lease_namespace = o_.lease_namespace;
  base::logInfo("certificates: renewal started",
                {{"node", o_.node_name},
                 {"certificates", fmt::to_string(fmt::join(due, ", "))},
                 {"dry_run", o_.dry_run}});
  auto job = std::make_unique<Job>();
  job->names = due;
  job->started = options.inspect.now;
  Job* j = job.get();
  {
    std::lock_guard lock(mu_);
    renewal_ = {
        {"state", "running"}, {"since", kube::formatRfc3339(j->started)}, {"certificates", due}};
    job_ = std::move(job);
  }
  j->thread = base::startThread("certs-renewal", [this, j, options = std::move(options)] {
    try {
      j->result = d_.run_renewal(options, [this](milliseconds d) { return waitUnlessStopping(d); });
    } catch (const std::exception& e) {
      // A bug, recovered: the renewal's journal makes the next run finish or undo what this one
      // left, exactly as after a crash; this run is reported failed.
      j->result = base::Error(std::string("internal error: the renewal threw: ") + e.what(),
                              base::ErrorCode::kUnknown);
    }
    j->done.store(true);
  });
}

base::Result<ReconcileResult> ControlPlaneCerts::collect() {
  job_->thread.join();
  base::Result<CertRenewalReport> outcome = std::move(*job_->result);
  const std::vector<std::string> names = job_->names;
  const base::WallTime started = job_->started;
  const base::WallTime now = d_.clock.wallNow();
  if (!outcome) {
    ++failures_;
    milliseconds backoff = o_.retry_initial;
    for (int i = 1; i < failures_ && backoff < o_.check_interval; ++i) backoff *= 2;
    backoff = std::min(backoff, o_.check_interval);
    retry_at_ = d_.clock.monoNow() + backoff;
    if (d_.failing) d_.failing->set({o_.node_name}, 1);
    const std::string next = kube::formatRfc3339(now + backoff);
    {
      std::lock_guard lock(mu_);
      job_.reset();
      renewal_ = {{"state", "failed"},
                  {"since", kube::formatRfc3339(started)},
                  {"certificates", names},
                  {"message", outcome.error().message()},
                  {"next_attempt", next}};
    }
    base::logError("certificates: renewal failed",
                   {{"node", o_.node_name},
                    {"certificates", fmt::to_string(fmt::join(names, ", "))},
                    {"error", outcome.error().message()},
                    {"next_attempt", next}});
    return std::move(outcome).error().wrap("renew " + fmt::to_string(fmt::join(names, ", ")) +
                                           " (next attempt " + next + ")");
  }
  failures_ = 0;
  retry_at_.reset();
  if (d_.failing) d_.failing->set({o_.node_name}, 0);
  std::vector<std::string> renewed;
  for (const RenewedCert& r : outcome->renewed) renewed.push_back(r.name);
  ReconcileResult result;
  for (const std::string& line : outcome->lines) result.plan += line + "\n";
  result.summary =
      o_.dry_run ? fmt::format("dry run: would renew {}", fmt::join(names, ", "))
                 : "renewed " + fmt::to_string(fmt::join(renewed, ", ")) +
                       (outcome->restarted.empty()
                            ? std::string()
                            : fmt::format("; restarted {}", fmt::join(outcome->restarted, ", ")));
  // Look again at once: the metrics and /status then show the new certificates.
  result.requeue_after = milliseconds(0);
  std::lock_guard lock(mu_);
  job_.reset();
  renewal_ = {{"state", o_.dry_run ? "dry-run" : "succeeded"},
              {"since", kube::formatRfc3339(started)},
              {"finished", kube::formatRfc3339(now)},
              {"certificates", o_.dry_run ? names : renewed},
              {"restarted", outcome->restarted}};
  return result;
}

void ControlPlaneCerts::recordWarnings(const std::vector<CertWarning>& warnings) {
  for (const CertWarning& w : warnings) {
    base::logWarn("certificates: expiring", {{"node", o_.node_name}, {"message", w.message}});
    auto recorded = d_.kube.recordEvent({.involved_resource = kube::resources::kNodes,
                                         .involved_name = o_.node_name,
                                         .reason = w.reason,
                                         .message = w.message,
                                         .type = "Warning"});
    if (!recorded) {
      // Not marked: the next check records it.
      if (d_.report) d_.report("certificate Event", recorded.error().message());
      continue;
    }
    warned_.insert(w.key);
  }
}

void ControlPlaneCerts::exportMetrics(const Inspection& in) {
  if (!d_.expiry) return;
  std::set<std::string> now_exported;
  auto put = [&](const CertState& s) {
    if (s.missing || !s.cert) return;
    d_.expiry->set({s.name, o_.node_name}, static_cast<double>(unixSeconds(s.cert->not_after)));
    now_exported.insert(s.name);
  };
  for (const CertState& s : in.certificates) put(s);
  for (const CertState& s : in.authorities) put(s);
  for (const std::string& gone : exported_) {
    if (!now_exported.contains(gone)) d_.expiry->remove({gone, o_.node_name});
  }
  exported_ = std::move(now_exported);
}

nlohmann::json ControlPlaneCerts::status() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = inspected_;
  out["renewal"] = renewal_;
  return out;
}

ControllerSpec controlPlaneCertsSpec() {
  return {
      .name = "control-plane-certificates",
      .scope = Scope::kNode,
      .status_key = "certificates",
      .enabled = [](const Config&) { return true; },
      .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
        const Config& c = d.config;
        auto expiry = d.metrics.gauge(
            "ekco_certificate_expiry_timestamp_seconds",
            "When each certificate and CA ekco watches expires, in Unix seconds", {"name", "node"});
        if (!expiry) return std::move(expiry).error();
        auto failing =
            d.metrics.gauge("ekco_certificate_renewal_failing",
                            "1 while the last certificate renewal on this node failed", {"node"});
        if (!failing) return std::move(failing).error();
        CertRenewalRunner runner = [&fs = d.host_fs, &kube = d.client, &clock = d.clock](
                                       const CertRenewalOptions& options,
                                       const std::function<bool(milliseconds)>& wait) {
          return runCertRenewal(options, {.fs = fs,
                                          .kube = kube,
                                          .clock = clock,
                                          .probe =
                                              [&clock](const std::string& host, int port) {
                                                return pki::presentedCertificate(host, port,
                                                                                 seconds(5), clock);
                                              },
                                          .wait = wait});
        };
        ControlPlaneCertsOptions options;
        options.inspect.certificates_dir = c.certificates_dir;
        options.inspect.ttl = duration_cast<seconds>(c.rotate_certs_ttl);
        options.node_name = d.node_name;
        options.renew = c.rotate_certs;
        options.dry_run = d.dry_run;
        options.lease_namespace = c.leader_election_namespace;
        options.check_interval = duration_cast<milliseconds>(c.rotate_certs_check_interval);
        return std::make_shared<ControlPlaneCerts>(
            ControlPlaneCertsDeps{.fs = d.host_fs,
                                  .kube = d.client,
                                  .clock = d.clock,
                                  .run_renewal = std::move(runner),
                                  .expiry = *expiry,
                                  .failing = *failing,
                                  .report = d.report},
            std::move(options));
      }};
}

}  // namespace ekco::agent
