#include "agent/runtime/agent.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cctype>

#include "agent/runtime/agent_impl.h"
#include "base/os/thread.h"
#include "base/version_info.h"
#include "kube/decode/timestamp.h"
#include "kube/transport/system_trust.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::string healthSocketPath(const std::string& host_root, const std::string& configured) {
  if (host_root.empty() || host_root == "/") return configured;
  std::string root = host_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + configured;
}

base::Status Agent::Impl::registerMetrics() {
  auto leader = metrics_.gauge("ekco_leader", "1 while this agent holds the ekco-leader Lease");
  auto api = metrics_.gauge("ekco_api_reachable", "1 while the Kubernetes API answers");
  auto objects = metrics_.gauge("ekco_cache_objects", "Objects in each informer cache", {"cache"});
  auto synced = metrics_.gauge("ekco_cache_synced", "1 once the cache has listed", {"cache"});
  auto runs = metrics_.counter("ekco_reconcile_total", "Reconciles run, by controller and result",
                               {"controller", "result"});
  auto errs = metrics_.counter("ekco_reconcile_errors_total", "Failed reconciles, by controller",
                               {"controller"});
  auto seconds_h = metrics_.histogram("ekco_reconcile_duration_seconds", "Time each reconcile took",
                                      {"controller"}, kReconcileDurationBuckets);
  auto actions = metrics_.counter("ekco_actions_total", "Changes ekco made, by kind", {"kind"});
  auto maintenance =
      metrics_.gauge("ekco_maintenance_mode", "1 while maintenance mode is on (ekco-maintenance)");
  if (!maintenance) return std::move(maintenance).error();
  maintenance_gauge_ = *maintenance;
  auto buffered = metrics_.gauge(
      "ekco_buffer_bytes",
      "API data buffered (response bodies being received, watch lines waiting for their end): "
      "now (in_use), the most at once (peak) and the bound on both (budget)",
      {"state"});
  if (!buffered) return std::move(buffered).error();
  buffer_bytes_ = *buffered;
  auto refused = metrics_.counter("ekco_buffer_refusals_total",
                                  "Responses and watch lines dropped because the buffer budget "
                                  "could not hold them (the call is retried)");
  if (!refused) return std::move(refused).error();
  buffer_refusals_ = *refused;
  for (const Error* e :
       {leader ? nullptr : &leader.error(), api ? nullptr : &api.error(),
        objects ? nullptr : &objects.error(), synced ? nullptr : &synced.error(),
        runs ? nullptr : &runs.error(), errs ? nullptr : &errs.error(),
        seconds_h ? nullptr : &seconds_h.error(), actions ? nullptr : &actions.error()}) {
    if (e != nullptr) return *e;
  }
  leader_gauge_ = *leader;
  api_gauge_ = *api;
  cache_objects_ = *objects;
  cache_synced_ = *synced;
  reconciles_ = *runs;
  reconcile_errors_ = *errs;
  reconcile_seconds_ = *seconds_h;
  actions_ = *actions;
  return base::ok();
}

void Agent::Impl::onWatchError(const WatchSpec& watch, std::string_view what, const Error& e) {
  errors_.report(what, e.message());
  // The watches readiness depends on stand for the API's reachability (logged once each way;
  // "api reachable" when the agent is ready again).
  if (!watch.reachability) return;
  if (e.code() == ErrorCode::kParse) return;  // bad data, not an outage
  std::lock_guard lock(mu_);
  if (api_down_) return;
  api_down_ = true;
  base::logWarn("api unreachable", {{"api", platform_.connection.server}, {"error", e.message()}});
}

base::Status Agent::Impl::init() {
  EKCO_TRY(registerMetrics());
  EKCO_TRY(initClient());    // (1)
  EKCO_TRY(initElection());  // (2)
  EKCO_TRY(initWatches());   // (3)
  // The features' services that the config leaves on (started in run()).
  const ServiceDeps deps{.config = options_.config,
                         .node_name = options_.node_name,
                         .host_root = options_.host_root,
                         .kubeconfig = options_.kubeconfig,
                         .env = options_.env,
                         .working_dir = options_.working_dir,
                         .dry_run = options_.dry_run,
                         .clock = clock_,
                         .host_fs = *platform_.host_fs};
  for (const ServiceSpec& spec : serviceSpecs()) {
    if (auto service = spec.build(deps)) {
      services_.push_back({.spec = &spec, .service = std::move(service), .thread = {}});
    }
  }
  // (4) The controllers, from the table.
  return initControllers();
}

base::Status Agent::Impl::initClient() {
  // (1) The side-effect edge, built as every command builds it.
  EKCO_TRY(buildClient(platform_,
                       {.host_root = options_.host_root,
                        .kubeconfig = options_.kubeconfig,
                        .connect_timeout = seconds(5),
                        .rest = kube::RestClientOptions{.request_timeout = seconds(30),
                                                        .reporting_instance = options_.node_name}},
                       options_.env, options_.working_dir, clock_));
  if (options_.socket_path.empty()) {
    options_.socket_path = healthSocketPath(options_.host_root, options_.config.health_socket);
    socket_root_ = options_.host_root;  // confined there; an explicit --socket is the operator's
  }
  exec_ = std::make_unique<kube::WebSocketExecutor>(platform_.connection);
  return base::ok();
}

base::Status Agent::Impl::initElection() {
  // (2) The Lease client, the manager and the elector.
  const Config& c = options_.config;
  const auto ms = [](base::Duration d) { return std::chrono::duration_cast<milliseconds>(d); };
  // The elector steps again every retry period, so its calls are not retried inside the client,
  // and each must answer well within the renew deadline.
  const auto lease_timeout =
      std::clamp(ms(c.leader_election_renew_deadline) / 2, milliseconds(1000), milliseconds(5000));
  lease_client_ = std::make_unique<kube::RestClient>(
      *platform_.transport, clock_,
      kube::RestClientOptions{.request_timeout = lease_timeout,
                              .retry = {.max_attempts = 1},
                              .reporting_instance = options_.node_name});

  manager_ = std::make_unique<Manager>(
      clock_, ManagerOptions{.on_reconciled = [this](const ControllerStatus& s, bool ok) {
        reconciles_->inc({s.name, ok ? "success" : "error"});
        reconcile_seconds_->observe({s.name},
                                    std::chrono::duration<double>(s.last_duration).count());
        if (!ok) {
          reconcile_errors_->inc({s.name});
          base::logWarn("reconcile failed", {{"controller", s.name},
                                             {"error", s.last_error},
                                             {"consecutive", s.consecutive_errors}});
        } else {
          base::logDebug("reconciled", {{"controller", s.name}, {"result", s.last_result}});
        }
      }});

  auto elector = LeaderElector::create(
      *lease_client_, clock_,
      {.ns = c.leader_election_namespace,
       .name = "ekco-leader",
       .identity = options_.holder_identity,
       .lease_duration = ms(c.leader_election_lease_duration),
       .renew_deadline = ms(c.leader_election_renew_deadline),
       .retry_period = ms(c.leader_election_retry_period),
       .candidate = c.leader_election_candidate},
      {.on_started_leading = [this] { onLeaderChange(true); },
       .on_stopped_leading = [this] { onLeaderChange(false); },
       .on_new_leader =
           [this](const std::string& holder) {
             base::logInfo("leader observed",
                           {{"leader", holder.empty() ? "-" : leaseHolderNode(holder)},
                            {"holder", holder.empty() ? "-" : holder},
                            {"lease", options_.config.leader_election_namespace + "/ekco-leader"}});
           },
       // A Lease that cannot be created (no `kurl` namespace, no RBAC) must say so in the log,
       // not only in /status: otherwise no agent leads and nothing says why.
       .on_step_error =
           [this](const Error& e) { errors_.report("leader election", e.message()); }});
  if (!elector) return std::move(elector).error();
  elector_ = std::move(*elector);
  // Every agent's elector hears from the API regularly: the leader renews every retry period;
  // a candidate sees those renewals on its Lease watch (observeWatched) and reads the Lease
  // itself once the watch has been silent for a lease duration (+ up to 1.2 retry periods of
  // jitter), or every 2.2 retry periods without a watch. Each call is bounded by lease_timeout:
  // longer than this without an answer means an API that is down or hangs, whatever the caches'
  // watches (silent for up to watch_idle_timeout) still say.
  api_silence_limit_ =
      std::max(ms(c.leader_election_lease_duration), 3 * ms(c.leader_election_retry_period)) +
      lease_timeout;
  candidate_silence_limit_ = ms(c.leader_election_lease_duration) +
                             ms(c.leader_election_retry_period) * 22 / 10 + lease_timeout;
  return base::ok();
}

base::Status Agent::Impl::initWatches() {
  const Config& c = options_.config;
  // (3) The watches: this node and its pods always (readiness); the rest as the controllers'
  // specs declare (initControllers).
  watches_ =
      std::make_unique<WatchRegistry>(*platform_.client, clock_, c, options_.node_name,
                                      [this](const WatchSpec& watch, std::string_view what,
                                             const Error& e) { onWatchError(watch, what, e); });
  auto own_node = watches_->require<InformerWatch<kube::NodeRecord>>(ownNodeWatch());
  if (!own_node) return std::move(own_node).error();
  own_node_ = std::move(*own_node);
  auto own_pods = watches_->require<InformerWatch<kube::PodRecord>>(ownPodsWatch());
  if (!own_pods) return std::move(own_pods).error();
  own_pods_ = std::move(*own_pods);

  // The elector learns every change of the Lease from this watch: a renewal restarts a
  // candidate's expiry wait (so idle candidates read nothing), and a released (holder "") or
  // deleted Lease makes it step now, so a clean hand-over takes one round trip, not up to 2.2
  // retry periods. The record is the whole Lease (a few hundred bytes), so every renewal is an
  // update.
  lease_watch_ = std::make_unique<kube::Informer<json>>(
      *platform_.client, clock_, kube::resources::kLeases, c.leader_election_namespace,
      kube::InformerOptions{.field_selector = "metadata.name=ekco-leader",
                            .max_backoff = kCacheMaxBackoff},
      [](const json& object) -> base::Result<json> { return object; },
      kube::InformerHandlers<json>{
          .on_add = [this](const json& lease) { elector_->observeWatched(lease); },
          .on_update = [this](const json&, const json& lease) { elector_->observeWatched(lease); },
          .on_delete = [this](const json&) { elector_->observeDeleted(); },
          .on_error = [this](const Error& e) { errors_.report("lease watch", e.message()); }});

  // Maintenance mode: the pausable controllers wait until the ConfigMap has been read.
  maintenance_ = std::make_unique<MaintenanceWatch>(
      *platform_.client, clock_, c.leader_election_namespace,
      [this](const MaintenanceChange& change) { onMaintenanceChange(change); },
      [this](const Error& e) { errors_.report("maintenance watch", e.message()); });
  manager_->setPaused(maintenance_->pauseReason());
  return base::ok();
}

base::Status Agent::Impl::initControllers() {
  const ControllerDeps deps{
      .config = options_.config,
      .node_name = options_.node_name,
      .host_root = options_.host_root,
      .units_bin = options_.units_bin,
      .dry_run = options_.dry_run,
      .in_pod = options_.env.contains("KUBERNETES_SERVICE_HOST"),
      .host_kubeconfig_server =
          platform_.connection.from_host_kubeconfig ? platform_.connection.server : "",
      .clock = clock_,
      .host_fs = *platform_.host_fs,
      .process_fs = *platform_.process_fs,
      .client = *platform_.client,
      .exec = *exec_,
      .watches = *watches_,
      .metrics = metrics_,
      .is_leader_fresh = [this] { return elector_->isLeaderFresh(); },
      .is_leader_fresh_to_close = [this] { return elector_->isLeaderFresh(); },
      .may_act = [] { return true; },
      .count_action = [this](std::string_view kind) { actions_->inc({std::string(kind)}); },
      .report = [this](std::string_view what,
                       const std::string& message) { errors_.report(what, message); },
      .restart_agent = [this](std::string why) { requestRestart(std::move(why)); }};
  // The specs that pause in maintenance get guards that answer false while it is on.
  ControllerDeps pausing = deps;
  pausing.is_leader_fresh = [this] { return elector_->isLeaderFresh() && maintenance_->mayAct(); };
  pausing.may_act = [this] { return maintenance_->mayAct(); };
  // An agent that may not lead builds neither the leader controllers nor the every-node ones
  // that need the control-plane account (ControllerSpec::candidates_only).
  const bool candidate = options_.config.leader_election_candidate;
  for (const ControllerSpec& spec : controllerSpecs()) {
    Built built{.spec = &spec};
    const bool runs_here = candidate || (spec.scope == Scope::kNode && !spec.candidates_only);
    if (runs_here && spec.enabled && spec.enabled(options_.config)) {
      // Its watches first: its build takes the readers of those it declared.
      for (const WatchSpec& watch : spec.watches) {
        watches_->declare(watch, [this, name = std::string(spec.name)] { manager_->wake(name); });
      }
      auto controller = spec.build(spec.pauses_in_maintenance ? pausing : deps);
      if (!controller) return std::move(controller).error().wrap(std::string(spec.name));
      built.controller = std::move(*controller);
      EKCO_TRY(manager_->add(spec.scope, built.controller, spec.pauses_in_maintenance));
    }
    controllers_.push_back(std::move(built));
  }
  return base::ok();
}

void Agent::Impl::onLeaderChange(bool leading) {
  // The elector's thread: record and hand over to the supervisor, which starts or stops the
  // leader watches (that may block) and the manager.
  manager_->setLeader(leading);
  leader_gauge_->set(leading ? 1 : 0);
  for (const Built& b : controllers_) {
    if (b.controller && b.spec->scope == Scope::kLeader) b.controller->leadershipChanged(leading);
  }
  actions_->inc({leading ? "lease_acquired" : "lease_lost"});
  base::logInfo(leading ? "became leader" : "stopped leading",
                {{"node", options_.node_name},
                 {"identity", options_.holder_identity},
                 {"lease", options_.config.leader_election_namespace + "/ekco-leader"}});
  std::lock_guard lock(mu_);
  leading_ = leading;
  leader_changed_ = true;
  if (!leading) lost_since_supervised_ = true;
  cv_.notify_all();
}

void Agent::Impl::onMaintenanceChange(const MaintenanceChange& change) {
  // (the maintenance watch's check(), one call at a time)
  manager_->setPaused(change.active ? "maintenance (" + change.state.reasonText() + ")" : "");
  maintenance_gauge_->set(change.active ? 1 : 0);
  const auto now = clock_.wallNow();
  if (change.initial && !change.active) return;  // the usual start: nothing to say
  base::logInfo(change.active    ? "maintenance mode on"
                : change.expired ? "maintenance mode expired"
                                 : "maintenance mode off",
                {{"maintenance", describeMaintenance(change.state, now)},
                 {"paused_controllers", change.active}});
  // An expiry is nobody's command, so nobody else records it: the leader does, once.
  if (change.expired && elector_->isLeader()) {
    auto recorded = recordMaintenanceEvent(
        *platform_.client, options_.config.leader_election_namespace, "MaintenanceExpired",
        "maintenance mode expired at " + kube::formatRfc3339(*change.state.until) + " (" +
            change.state.reasonText() + "); the paused controllers resume");
    if (!recorded) errors_.report("event", recorded.error().message());
  }
}

void Agent::Impl::superviseLeaderWatches() {
  bool leading = false;
  bool lost = false;
  {
    std::lock_guard lock(mu_);
    if (!leader_changed_) return;
    leader_changed_ = false;
    leading = leading_;
    lost = std::exchange(lost_since_supervised_, false);
  }
  // Lost and won again before this ran: the new term still begins from empty stores.
  if (lost && leading) watches_->setLeading(false);
  watches_->setLeading(leading);
  if (!leading) return;
  // As client-go's elector does: an Event on the Lease says who leads.
  auto recorded = platform_.client->recordEvent(
      {.involved_resource = kube::resources::kLeases,
       .involved_namespace = options_.config.leader_election_namespace,
       .involved_name = "ekco-leader",
       .reason = "LeaderElection",
       .message = options_.node_name + " became leader (" + options_.holder_identity + ")"});
  if (!recorded) errors_.report("event", recorded.error().message());
}

int Agent::Impl::run() {
  // Every thread started from here on (and every thread those start) stops this agent if an
  // exception escapes it, instead of std::terminate (base/os/thread.h).
  base::ThreadFailureScope on_thread_failure([this](std::string_view thread, std::string_view) {
    std::lock_guard lock(mu_);
    if (failed_thread_.empty()) failed_thread_ = std::string(thread);
    stop_requested_ = true;
    cv_.notify_all();
  });
  auto server = HealthServer::start({.socket_path = options_.socket_path,
                                     .host_root = socket_root_,
                                     .handlers = {.healthz = [this] { return healthz(); },
                                                  .readyz = [this] { return readyz(); },
                                                  .status = [this] { return status(); },
                                                  .metrics = [this] { return metricsText(); }},
                                     .metrics_address = options_.config.metrics_address});
  if (!server) {
    base::logError("cannot open the health socket", {{"error", server.error().message()}});
    return 1;
  }
  if (!options_.config.metrics_address.empty()) {
    base::logInfo("serving /metrics over HTTP", {{"address", options_.config.metrics_address},
                                                 {"port", (*server)->metricsPort()}});
  }
  base::logInfo("agent started", {{"node", options_.node_name},
                                  {"version", EKCO_VERSION},
                                  {"host_root", options_.host_root},
                                  {"config", options_.config_source},
                                  {"api", platform_.connection.server},
                                  {"credentials", platform_.connection.source},
                                  {"socket", options_.socket_path},
                                  {"leader_candidate", options_.config.leader_election_candidate},
                                  {"dry_run", options_.dry_run}});
  // The CA bundle of transfers without a CA of their own (kube/transport/system_trust.h): chosen
  // once, said once. Not found or not usable is a warning, not a stop: the API, etcd and the
  // webhook use their own CAs.
  if (const kube::SystemTrust& trust = kube::processSystemTrust(); trust.problem.empty()) {
    base::logInfo("system trust", {{"ca_bundle", trust.ca_file}, {"source", trust.source}});
  } else {
    base::logWarn("system trust",
                  {{"ca_bundle", trust.ca_file.empty() ? std::string("none") : trust.ca_file},
                   {"source", trust.source.empty() ? std::string("none") : trust.source},
                   {"problem", trust.problem}});
  }

  watches_->start();
  lease_watch_thread_ = base::startThread("lease-watch", [this] { lease_watch_->run(); });
  maintenance_->start();
  std::thread manager_thread = base::startThread("manager", [this] { manager_->run(); });
  std::thread elector_thread = base::startThread("elector", [this] { elector_->run(); });
  for (RunningService& s : services_) {
    AgentService* service = s.service.get();
    s.thread = base::startThread(std::string(s.spec->name), [service] { service->run(); });
  }

  std::uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  // Readiness and leadership changes show within half a second; the watchdog is pinged at
  // least twice per WatchdogSec.
  const milliseconds tick = watchdog ? std::clamp(milliseconds(watchdog_usec / 2000),
                                                  milliseconds(100), milliseconds(500))
                                     : milliseconds(500);
  notifySystemd(readyz(), watchdog);  // READY=1 now, whatever the API does
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, tick, [&] { return stop_requested_ || leader_changed_; });
      if (stop_requested_) break;
    }
    superviseLeaderWatches();
    maintenance_->check();  // an expiry, and the first state after the list
    watches_->supervise();
    const Health ready = readyz();
    bool recovered = false;
    if (ready.ok) {
      std::lock_guard lock(mu_);
      recovered = std::exchange(api_down_, false);
    }
    if (recovered) base::logInfo("api reachable", {{"api", platform_.connection.server}});
    if (ready.ok && !ready_logged_) {
      ready_logged_ = true;
      base::logInfo("agent ready", {{"node", options_.node_name}});
    }
    notifySystemd(ready, watchdog);
  }

  base::logInfo("agent stopping", {{"node", options_.node_name}});
  sd_notify(0, "STOPPING=1\nSTATUS=stopping");
  manager_->stop();
  elector_->stop();
  manager_thread.join();
  elector_thread.join();
  // Hand over at once instead of after the lease duration.
  const bool was_leader = elector_->isLeader();
  if (auto released = elector_->release(); !released) {
    base::logWarn("lease release failed", {{"error", released.error().message()}});
  } else if (was_leader) {
    actions_->inc({"lease_released"});
    base::logInfo("lease released",
                  {{"lease", options_.config.leader_election_namespace + "/ekco-leader"}});
  }
  lease_watch_->stop();
  if (lease_watch_thread_.joinable()) lease_watch_thread_.join();
  maintenance_->stop();
  // Last, in reverse order: what a service does while the host goes down (the reboot feature's
  // drain under logind's delay lock) finishes first.
  for (auto it = services_.rbegin(); it != services_.rend(); ++it) {
    it->service->stop();
    if (it->thread.joinable()) it->thread.join();
  }
  // The watches after the services: until then /readyz, /status and /metrics still describe
  // the API as the watches last saw it (a stopped watch has no statistics), not "not synced".
  watches_->stop();
  (*server)->stop();
  std::string failed;
  std::string restart;
  {
    std::lock_guard lock(mu_);
    failed = failed_thread_;
    restart = restart_reason_;
  }
  if (!failed.empty()) {
    base::logError("agent stopped after a thread failed",
                   {{"node", options_.node_name}, {"thread", failed}});
    return 1;
  }
  if (!restart.empty()) {
    base::logInfo("agent stopped to be started again",
                  {{"node", options_.node_name}, {"why", restart}});
    return 1;
  }
  base::logInfo("agent stopped", {{"node", options_.node_name}});
  return 0;
}

Agent::Impl::~Impl() {
  controllers_.clear();
  manager_.reset();  // its references were the last
}

void Agent::Impl::requestRestart(std::string why) {
  std::lock_guard lock(mu_);
  if (restart_reason_.empty()) restart_reason_ = std::move(why);
  stop_requested_ = true;
  cv_.notify_all();
}

void Agent::Impl::requestStop() {
  std::lock_guard lock(mu_);
  stop_requested_ = true;
  cv_.notify_all();
}

base::Result<std::unique_ptr<Agent>> Agent::create(AgentOptions options, const base::Clock& clock) {
  auto impl = std::make_unique<Impl>(std::move(options), clock);
  EKCO_TRY(impl->init());
  return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Agent::~Agent() = default;
int Agent::run() { return impl_->run(); }
void Agent::requestStop() { impl_->requestStop(); }
json Agent::status() const { return impl_->status(); }

}  // namespace ekco::agent
