// The agent's answers: /healthz, /readyz, /status, /metrics, and what systemd is told.
#include <systemd/sd-daemon.h>

#include <set>
#include <string>

#include "agent/runtime/agent_impl.h"
#include "base/memory_budget.h"
#include "base/version_info.h"
#include "kube/decode/timestamp.h"
#include "kube/transport/system_trust.h"

namespace ekco::agent {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

Health Agent::Impl::healthz() const {
  // A reconcile may legitimately run up to reconcile_timeout; a loop that has not turned for
  // 30 s while idle is stuck.
  const auto max_reconcile = std::chrono::duration_cast<milliseconds>(
      options_.config.reconcile_timeout + std::chrono::minutes(1));
  if (!manager_->alive(seconds(30), max_reconcile)) {
    return {.ok = false, .reason = "the controller manager loop is not running"};
  }
  return {.ok = true};
}

Health Agent::Impl::readyz() const {
  const auto node_stats = own_node_->stats().value_or(kube::InformerStats{});
  const auto pod_stats = own_pods_->stats().value_or(kube::InformerStats{});
  if (!node_stats.synced) {
    return {.ok = false, .reason = "the node cache has not synced: " + node_stats.last_error};
  }
  if (!pod_stats.synced) {
    return {.ok = false, .reason = "the pod cache has not synced: " + pod_stats.last_error};
  }
  if (!node_stats.connected) {
    return {.ok = false, .reason = "the Kubernetes API is unreachable: " + node_stats.last_error};
  }
  if (!pod_stats.connected) {
    return {.ok = false,
            .reason = "the Kubernetes API is unreachable (pod cache): " + pod_stats.last_error};
  }
  // An API that accepts connections and answers nothing leaves open watches looking healthy
  // until their idle bound: the elector notices first (the leader's renewals; a candidate's
  // watched renewals or, with its watch silent, its own read of the Lease). A candidate whose
  // Lease watch still delivers counts the API as answering even if its new requests would hang:
  // it acts on nothing cluster-wide until it leads, and leading takes a read and a write. An
  // agent that may not lead reads the Lease itself once neither its reads nor its watch have
  // answered for a lease duration (+ up to 1.2 retry periods), within the candidate's limit.
  const auto now = clock_.monoNow();
  const auto silent_since = elector_->lastAnswer().value_or(started_at_);
  if (now - silent_since > (elector_->isLeader() ? api_silence_limit_ : candidate_silence_limit_)) {
    const auto lease = elector_->status();
    return {.ok = false,
            .reason = "the Kubernetes API has not answered for " +
                      base::formatDuration(
                          std::chrono::duration_cast<std::chrono::seconds>(now - silent_since)) +
                      (lease.last_error.empty() ? "" : ": " + lease.last_error)};
  }
  // The other watches that stand for the API's reachability (the leader's node watch): once
  // listed, a lost connection. (This node's and its pods' were checked above.)
  Health unreachable{.ok = true};
  watches_->forEachReachabilityStats([&](const std::string& label, const kube::InformerStats& s) {
    if (!unreachable.ok || !s.synced || s.connected) return;
    unreachable = {
        .ok = false,
        .reason = "the Kubernetes API is unreachable (" + label + " cache): " + s.last_error};
  });
  return unreachable;
}

json Agent::Impl::status() const {
  json out;
  out["node"] = options_.node_name;
  out["version"] = std::string(EKCO_VERSION) + " (" + EKCO_GIT_SHA + ")";
  const auto lease = elector_->status();
  out["leader"] = leaseHolderNode(lease.holder);
  out["is_leader"] = lease.is_leader;
  // false: this agent never leads (leader_election_candidate); "leader" is who does.
  out["leader_candidate"] = options_.config.leader_election_candidate;
  out["lease"] = {{"name", options_.config.leader_election_namespace + "/ekco-leader"},
                  {"holder", lease.holder},
                  {"identity", options_.holder_identity},
                  {"renew_time", kube::rfc3339OrNull(lease.renew_time)},
                  {"acquire_time", kube::rfc3339OrNull(lease.acquire_time)},
                  {"transitions", lease.transitions},
                  {"fresh", lease.is_fresh},
                  {"last_error", lease.last_error}};
  const Health ready = readyz();
  out["ready"] = ready.ok;
  out["ready_reason"] = ready.reason;
  out["api_reachable"] = own_node_->stats().value_or(kube::InformerStats{}).connected;
  out["dry_run"] = options_.dry_run;
  // kube/transport/system_trust.h: ca_bundle and source null when none was found; problem "" when
  // fine.
  const kube::SystemTrust& trust = kube::processSystemTrust();
  out["system_trust"] = {{"ca_bundle", trust.ca_file.empty() ? json(nullptr) : json(trust.ca_file)},
                         {"source", trust.source.empty() ? json(nullptr) : json(trust.source)},
                         {"problem", trust.problem}};
  // Each service's object under its spec's key (null while off).
  for (const ServiceSpec& spec : serviceSpecs()) out[std::string(spec.status_key)] = nullptr;
  for (const RunningService& s : services_) {
    out[std::string(s.spec->status_key)] = s.service->status();
  }
  json caches = json::array();
  watches_->forEachStats([&](const std::string& name, const kube::InformerStats& s) {
    caches.push_back({{"name", name},
                      {"synced", s.synced},
                      {"objects", s.objects},
                      {"resource_version", s.resource_version},
                      {"last_sync", kube::rfc3339OrNull(s.last_sync)},
                      {"last_error", s.last_error}});
  });
  out["caches"] = caches;
  json controllers = json::array();
  for (const auto& s : manager_->status()) {
    controllers.push_back({{"name", s.name},
                           {"scope", std::string(scopeName(s.scope))},
                           {"active", s.active},
                           {"last_run", kube::rfc3339OrNull(s.last_run)},
                           {"last_result", s.last_result},
                           {"last_error", s.last_error},
                           {"next_run", kube::rfc3339OrNull(s.next_run)},
                           {"last_plan", s.last_plan},
                           {"runs", s.runs},
                           {"errors", s.errors},
                           {"pauses_in_maintenance", s.pausable},
                           {"paused", s.paused.empty() ? json(nullptr) : json(s.paused)},
                           {"closing", s.closing.empty() ? json(nullptr) : json(s.closing)}});
  }
  out["controllers"] = controllers;
  out["maintenance"] = maintenanceJson(maintenance_->state(), clock_.wallNow());
  out["maintenance"]["synced"] = maintenance_->synced();
  // Each controller's own object, under its spec's key (null while disabled).
  for (const Built& b : controllers_) {
    if (b.spec->status_key.empty()) continue;
    out[std::string(b.spec->status_key)] = b.controller ? b.controller->status() : json(nullptr);
  }
  return out;
}

std::string Agent::Impl::metricsText() const {
  // The leader's caches come and go: series of caches that are gone are removed.
  std::set<std::string> current;
  watches_->forEachStats([&](const std::string& name, const kube::InformerStats& s) {
    cache_objects_->set({name}, static_cast<double>(s.objects));
    cache_synced_->set({name}, s.synced ? 1 : 0);
    current.insert(name);
  });
  {
    std::lock_guard lock(mu_);
    for (const std::string& name : exported_leader_caches_) {
      if (current.count(name) != 0) continue;
      cache_objects_->remove({name});
      cache_synced_->remove({name});
    }
    exported_leader_caches_ = std::move(current);
  }
  api_gauge_->set(own_node_->stats().value_or(kube::InformerStats{}).connected ? 1 : 0);
  const base::MemoryBudget& budget = base::processBufferBudget();
  buffer_bytes_->set({"in_use"}, static_cast<double>(budget.used()));
  buffer_bytes_->set({"peak"}, static_cast<double>(budget.peak()));
  buffer_bytes_->set({"budget"}, static_cast<double>(budget.limit()));
  {
    std::lock_guard lock(mu_);  // two renders at once would both add the difference
    buffer_refusals_->inc({}, static_cast<double>(budget.refusals()) - buffer_refusals_->value());
  }
  return metrics_.render();
}

// READY=1 means "started" (the health socket is up and the loops run), not "the API answers":
// with Type=notify, systemd kills a service that withholds READY=1 past TimeoutStartSec and
// Restart=always makes that a loop for as long as the API is down (a rebooting control plane).
// Readiness is reported through STATUS=, /readyz and `ekco status` instead.
void Agent::Impl::notifySystemd(const Health& ready, bool watchdog) {
  const auto lease = elector_->status();
  std::string state =
      "node " + options_.node_name + ", " +
      (lease.is_leader
           ? std::string("leader")
           : "leader " + (lease.holder.empty() ? std::string("-") : leaseHolderNode(lease.holder)));
  state += ready.ok ? ", ready" : ", not ready: " + ready.reason;
  std::replace(state.begin(), state.end(), '\n', ' ');
  std::string message;
  if (!systemd_ready_sent_) {
    message += "READY=1\n";
    systemd_ready_sent_ = true;
  }
  if (state != last_status_) {
    message += "STATUS=" + state + "\n";
    last_status_ = state;
  }
  if (watchdog && healthz().ok) message += "WATCHDOG=1\n";
  if (!message.empty()) sd_notify(0, message.c_str());
}

}  // namespace ekco::agent
