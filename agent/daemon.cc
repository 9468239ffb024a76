#include "agent/daemon.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <thread>

#include "agent/clear_nodes.h"
#include "agent/health_server.h"
#include "agent/host_checks.h"
#include "agent/host_units.h"
#include "agent/purge_dead_nodes.h"
#include "kube/exec.h"
#include "agent/internal_lb.h"
#include "agent/leader_election.h"
#include "agent/manager.h"
#include "agent/metrics.h"
#include "base/log.h"
#include "hostfs/local_host_fs.h"
#include "kube/curl_transport.h"
#include "kube/informer.h"
#include "kube/objects.h"
#include "kube/records.h"
#include "kube/rest_client.h"
#include "kube/timestamp.h"
#include "base/version_info.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

bool isNodeName(const std::string& name) {
  // An RFC 1123 subdomain, as Node names are.
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && label > 0)) return false;
    if (++label > 63) return false;
  }
  return name.back() != '-' && name.back() != '.';
}

// Not Ready, or tainted by the node lifecycle controller as unreachable or not ready: the nodes
// whose pods the leader watches (clearing and purging decide on them).
bool nodeUnhealthy(const kube::NodeRecord& node) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  if (ready == nullptr || ready->status != "True") return true;
  return node.taint("node.kubernetes.io/unreachable") != nullptr ||
         node.taint("node.kubernetes.io/not-ready") != nullptr;
}

json timeJson(const std::optional<base::WallTime>& t) {
  return t ? json(kube::formatRfc3339(*t)) : json(nullptr);
}

// Handlers that call `wake` on any add, update or delete, and `on_error` on failures.
template <typename Record>
kube::InformerHandlers<Record> wakeOnChange(std::function<void()> wake,
                                            std::function<void(const Error&)> on_error) {
  return {.on_add = [wake](const Record&) { wake(); },
          .on_update = [wake](const Record&, const Record&) { wake(); },
          .on_delete = [wake](const Record&) { wake(); },
          .on_error = std::move(on_error)};
}

// Runs an informer on its own thread; stop() stops and joins it.
template <typename Record>
struct RunningInformer {
  std::unique_ptr<kube::Informer<Record>> informer;
  std::thread thread;

  void start() {
    thread = std::thread([this] { informer->run(); });
  }
  void stop() {
    if (informer) informer->stop();
    if (thread.joinable()) thread.join();
  }
};

// Logs an informer's or the elector's failures once per distinct message per minute, so an
// API outage is one line, not one per retry.
class ErrorLog {
 public:
  explicit ErrorLog(const base::Clock& clock) : clock_(clock) {}
  void report(std::string_view what, const std::string& message) {
    std::lock_guard lock(mu_);
    const auto now = clock_.monoNow();
    auto& last = last_[std::string(what)];
    if (last.message == message && now - last.at < std::chrono::minutes(1)) return;
    last = {message, now};
    base::logWarn("api call failed", {{"source", what}, {"error", message}});
  }

 private:
  struct Last {
    std::string message;
    base::MonoTime at{};
  };
  const base::Clock& clock_;
  std::mutex mu_;
  std::map<std::string, Last> last_;
};

}  // namespace

base::Result<std::string> resolveNodeName(const std::string& flag, const std::string& env_value,
                                          const std::string& hostname) {
  std::string name = !flag.empty() ? flag : !env_value.empty() ? env_value : hostname;
  const char* from = !flag.empty() ? "--node-name" : !env_value.empty() ? "NODE_NAME" : "the host name";
  std::string lowered = name;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // kubelet lower-cases the host name it registers; a flag or env value must already be exact.
  if (flag.empty() && env_value.empty()) name = lowered;
  if (!isNodeName(name)) {
    return Error("node name from " + std::string(from) + ": \"" + name +
                     "\" is not a valid Node name (RFC 1123 subdomain)",
                 ErrorCode::kInvalidArgument);
  }
  return name;
}

std::string healthSocketPath(const std::string& host_root, const std::string& configured) {
  if (host_root.empty() || host_root == "/") return configured;
  std::string root = host_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + configured;
}

class Agent::Impl {
 public:
  Impl(AgentOptions options, const base::Clock& clock)
      : options_(std::move(options)), clock_(clock), errors_(clock), started_at_(clock.monoNow()) {}

  base::Status init();
  int run();
  void requestStop();
  json status() const;

 private:
  base::Status registerMetrics();
  void onLeaderChange(bool leading);
  void superviseLeaderCaches();
  void superviseUnhealthyNodePods();
  Health healthz() const;
  Health readyz() const;
  std::string metricsText() const;
  void notifySystemd(const Health& ready, bool first_ready, bool watchdog);
  void initInternalLb();
  void initClearNodes();
  void initPurgeDeadNodes();
  // The leader's node cache, for the leader controllers (not synced while not leading).
  ObservedNodes observeClusterNodes() const;
  ObservedApiservers observeApiservers() const;
  // f(name, RunningInformer&) for each internal load balancer cache (none when disabled);
  // Self is Impl or const Impl.
  template <typename Self, typename F>
  static void forEachLbCache(Self& self, F&& f);

  AgentOptions options_;
  const base::Clock& clock_;
  ErrorLog errors_;
  base::MonoTime started_at_;
  // /readyz: how long the API may go without answering the elector (set in init()).
  std::chrono::milliseconds api_silence_limit_{std::chrono::seconds(20)};

  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<hostfs::LocalHostFs> host_fs_;
  kube::Connection connection_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kube::RestClient> lease_client_;

  std::unique_ptr<Manager> manager_;
  std::unique_ptr<LeaderElector> elector_;
  std::shared_ptr<HostChecks> host_checks_;
  // The internal load balancer (enable_internal_load_balancer): the apiserver sources and the
  // node controller that keeps haproxy.cfg and the static pod.
  using EndpointList = std::vector<haproxy::Endpoint>;
  RunningInformer<EndpointList> lb_slices_;
  RunningInformer<EndpointList> lb_endpoints_;
  RunningInformer<kube::NodeRecord> lb_control_plane_nodes_;
  RunningInformer<kube::NodeRecord> lb_master_nodes_;
  std::atomic<bool> lb_slices_absent_{false};     // the API has no discovery.k8s.io/v1
  std::atomic<bool> lb_endpoints_absent_{false};
  std::unique_ptr<HaproxyReloader> lb_reloader_;
  std::shared_ptr<InternalLoadBalancer> internal_lb_;
  std::shared_ptr<HostUnitsController> host_units_;
  // Leader: force-deletes pods stuck terminating on dead nodes (clear_dead_nodes).
  std::shared_ptr<ClearNodesController> clear_nodes_;
  // Leader: purges dead nodes (purge_dead_nodes); exec runs ceph in the Rook tools pod.
  std::unique_ptr<kube::WebSocketExecutor> exec_;
  std::shared_ptr<PurgeDeadNodesController> purge_dead_nodes_;
  RunningInformer<kube::NodeRecord> own_node_;
  RunningInformer<kube::PodRecord> own_pods_;
  // The Lease's holder, watched so that a released Lease is taken over at once (nudge).
  RunningInformer<std::string> lease_holder_;
  mutable std::mutex leader_caches_mu_;
  RunningInformer<kube::NodeRecord> all_nodes_;  // while leading
  // While leading: the pods of each unhealthy node, one narrow informer per node.
  std::map<std::string, std::unique_ptr<RunningInformer<kube::PodRecord>>> unhealthy_pods_;
  mutable std::set<std::string> exported_leader_caches_;  // cache labels last sent to /metrics

  MetricsRegistry metrics_;
  const Gauge* leader_gauge_ = nullptr;
  const Gauge* api_gauge_ = nullptr;
  const Gauge* cache_objects_ = nullptr;
  const Gauge* cache_synced_ = nullptr;
  const Counter* reconciles_ = nullptr;
  const Counter* reconcile_errors_ = nullptr;
  const Histogram* reconcile_seconds_ = nullptr;
  const Counter* actions_ = nullptr;
  const Gauge* storm_gauge_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool leading_ = false;        // as the elector last said
  bool leader_changed_ = false;  // the supervisor has a leadership change to act on
  bool api_down_ = false;  // "api unreachable" was logged and recovery not yet
  bool ready_sent_ = false;
  std::string last_status_;  // the last STATUS= sent to systemd
};

base::Status Agent::Impl::registerMetrics() {
  auto leader = metrics_.gauge("ekco_leader", "1 while this agent holds the ekco-leader Lease");
  auto api = metrics_.gauge("ekco_api_reachable", "1 while the Kubernetes API answers");
  auto objects = metrics_.gauge("ekco_cache_objects", "Objects in each informer cache", {"cache"});
  auto synced = metrics_.gauge("ekco_cache_synced", "1 once the cache has listed", {"cache"});
  auto runs = metrics_.counter("ekco_reconcile_total", "Reconciles run, by controller and result",
                               {"controller", "result"});
  auto errs = metrics_.counter("ekco_reconcile_errors_total", "Failed reconciles, by controller",
                               {"controller"});
  auto seconds_h = metrics_.histogram("ekco_reconcile_duration_seconds",
                                      "Time each reconcile took", {"controller"},
                                      kReconcileDurationBuckets);
  auto actions = metrics_.counter("ekco_actions_total", "Changes ekco made, by kind", {"kind"});
  for (const Error* e : {leader ? nullptr : &leader.error(), api ? nullptr : &api.error(),
                         objects ? nullptr : &objects.error(), synced ? nullptr : &synced.error(),
                         runs ? nullptr : &runs.error(), errs ? nullptr : &errs.error(),
                         seconds_h ? nullptr : &seconds_h.error(),
                         actions ? nullptr : &actions.error()}) {
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
  auto storm = metrics_.gauge(
      "ekco_storm_guard",
      "1 while the storm guard holds: too many nodes unreachable, nothing is cleared or purged");
  if (!storm) return storm.error();
  storm_gauge_ = *storm;
  return base::ok();
}

base::Status Agent::Impl::init() {
  EKCO_TRY(registerMetrics());
  auto process_fs = hostfs::LocalHostFs::open("/", clock_);
  if (!process_fs) return std::move(process_fs).error();
  process_fs_ = std::move(*process_fs);
  auto host_fs = hostfs::LocalHostFs::open(options_.host_root, clock_);
  if (!host_fs) return std::move(host_fs).error().wrap("--host-root " + options_.host_root);
  host_fs_ = std::move(*host_fs);
  if (options_.socket_path.empty()) {
    options_.socket_path = healthSocketPath(options_.host_root, options_.config.health_socket);
  }

  auto connection = kube::loadConnection({.process_fs = *process_fs_,
                                          .host_fs = *host_fs_,
                                          .env = options_.env,
                                          .explicit_kubeconfig = options_.kubeconfig,
                                          .working_dir = options_.working_dir});
  if (!connection) return std::move(connection).error();
  connection_ = std::move(*connection);
  auto transport = kube::CurlTransport::create(connection_, process_fs_.get(), clock_,
                                               {.connect_timeout = seconds(5)});
  if (!transport) return std::move(transport).error();
  transport_ = std::move(*transport);
  client_ = std::make_unique<kube::RestClient>(
      *transport_, clock_,
      kube::RestClientOptions{.request_timeout = seconds(30), .reporting_instance = options_.node_name});

  const Config& c = options_.config;
  const auto ms = [](base::Duration d) { return std::chrono::duration_cast<milliseconds>(d); };
  // The elector steps again every retry period, so its calls are not retried inside the client,
  // and each must answer well within the renew deadline.
  const auto lease_timeout =
      std::clamp(ms(c.leader_election_renew_deadline) / 2, milliseconds(1000), milliseconds(5000));
  lease_client_ = std::make_unique<kube::RestClient>(
      *transport_, clock_,
      kube::RestClientOptions{.request_timeout = lease_timeout,
                              .retry = {.max_attempts = 1},
                              .reporting_instance = options_.node_name});

  manager_ = std::make_unique<Manager>(
      clock_, ManagerOptions{.on_reconciled = [this](const ControllerStatus& s, bool ok) {
        reconciles_->inc({s.name, ok ? "success" : "error"});
        reconcile_seconds_->observe(
            {s.name}, std::chrono::duration<double>(s.last_duration).count());
        if (!ok) {
          reconcile_errors_->inc({s.name});
          base::logWarn("reconcile failed",
                        {{"controller", s.name},
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
       .identity = options_.node_name,
       .lease_duration = ms(c.leader_election_lease_duration),
       .renew_deadline = ms(c.leader_election_renew_deadline),
       .retry_period = ms(c.leader_election_retry_period)},
      {.on_started_leading = [this] { onLeaderChange(true); },
       .on_stopped_leading = [this] { onLeaderChange(false); },
       .on_new_leader =
           [this](const std::string& holder) {
             base::logInfo("leader observed", {{"leader", holder.empty() ? "-" : holder},
                                               {"lease", options_.config.leader_election_namespace +
                                                             "/ekco-leader"}});
           }});
  if (!elector) return std::move(elector).error();
  elector_ = std::move(*elector);
  // Every agent's elector asks the API every retry period (up to 2.2 of them with jitter when not
  // leading), each call bounded by lease_timeout: longer than this without an answer means an
  // API that is down or hangs, whatever the caches' watches (silent for up to
  // watch_idle_timeout) still say.
  api_silence_limit_ = std::max(ms(c.leader_election_lease_duration),
                                3 * ms(c.leader_election_retry_period)) +
                       lease_timeout;

  // Node caches: this node, and the pods scheduled to it.
  auto wake_node = [this] { manager_->wakeAll(Scope::kNode); };
  own_node_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      *client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.field_selector = "metadata.name=" + options_.node_name},
      kube::projectNode,
      wakeOnChange<kube::NodeRecord>(
          wake_node,
              [this](const Error& e) {
                errors_.report("node cache", e.message());
                if (e.code() == ErrorCode::kParse) return;  // bad data, not an outage
                std::lock_guard lock(mu_);
                if (api_down_) return;
                api_down_ = true;
                base::logWarn("api unreachable", {{"api", connection_.server}, {"error", e.message()}});
              }));
  own_pods_.informer = std::make_unique<kube::Informer<kube::PodRecord>>(
      *client_, clock_, kube::resources::kPods, "",
      kube::InformerOptions{.field_selector = "spec.nodeName=" + options_.node_name},
      kube::projectPod,
      wakeOnChange<kube::PodRecord>(
          wake_node, [this](const Error& e) { errors_.report("pod cache", e.message()); }));

  // A released (holder "") or deleted Lease makes the elector step now: a clean hand-over then
  // takes one round trip, not up to 2.2 retry periods. Renewals change only renewTime, so the
  // projection (the holder) is unchanged and they call nothing.
  auto nudge = [this] { elector_->nudge(); };
  lease_holder_.informer = std::make_unique<kube::Informer<std::string>>(
      *client_, clock_, kube::resources::kLeases, c.leader_election_namespace,
      kube::InformerOptions{.field_selector = "metadata.name=ekco-leader"},
      [](const json& object) -> base::Result<std::string> {
        auto lease = kube::parseLease(object);
        if (!lease) return std::move(lease).error();
        return lease->holder_identity;
      },
      kube::InformerHandlers<std::string>{
          .on_add = [nudge](const std::string& holder) { if (holder.empty()) nudge(); },
          .on_update = [nudge](const std::string&,
                               const std::string& holder) { if (holder.empty()) nudge(); },
          .on_delete = [nudge](const std::string&) { nudge(); },
          .on_error = [this](const Error& e) { errors_.report("lease watch", e.message()); }});

  host_checks_ = std::make_shared<HostChecks>(
      options_.node_name, *host_fs_, clock_,
      [this] {
        ObservedNode observed;
        observed.synced = own_node_.informer->synced();
        observed.node = own_node_.informer->get("", options_.node_name);
        return observed;
      },
      HostChecksOptions{.certificates_dir = c.certificates_dir,
                        .certificate_warning =
                            std::chrono::duration_cast<seconds>(c.rotate_certs_ttl),
                        .interval = ms(c.reconcile_interval)});
  EKCO_TRY(manager_->add(Scope::kNode, host_checks_));
  // The node's systemd units (ekco-reboot.service, ekco-upgrade.timer), over the host's bus.
  host_units_ = std::make_shared<HostUnitsController>(
      *host_fs_,
      [root = options_.host_root] { return units::connectSystemd(units::systemBusAddress(root)); },
      HostUnitsControllerOptions{.units = hostUnitsOptions(c, options_.units_bin),
                                 .dry_run = options_.dry_run});
  EKCO_TRY(manager_->add(Scope::kNode, host_units_));
  if (c.enable_internal_load_balancer) {
    initInternalLb();
    EKCO_TRY(manager_->add(Scope::kNode, internal_lb_));
  }
  if (c.clear_dead_nodes) {
    initClearNodes();
    EKCO_TRY(manager_->add(Scope::kLeader, clear_nodes_));
  }
  if (c.purge_dead_nodes) {
    initPurgeDeadNodes();
    EKCO_TRY(manager_->add(Scope::kLeader, purge_dead_nodes_));
  }
  return base::ok();
}

ObservedNodes Agent::Impl::observeClusterNodes() const {
  ObservedNodes observed;
  std::lock_guard lock(leader_caches_mu_);
  if (!all_nodes_.informer) return observed;
  observed.synced = all_nodes_.informer->synced();
  observed.nodes = all_nodes_.informer->list();
  return observed;
}

void Agent::Impl::initPurgeDeadNodes() {
  const Config& c = options_.config;
  exec_ = std::make_unique<kube::WebSocketExecutor>(connection_);
  purge_dead_nodes_ = std::make_shared<PurgeDeadNodesController>(
      [this] { return observeClusterNodes(); }, [this] { return readNodes(*client_); },
      [this](const std::string& node, PurgeOptions options) {
        // Clear before purge (EKCO's order): both controllers wake at the same threshold and run
        // one at a time on the leader worker, in an order that depends on sub-millisecond timing.
        // Were the purge first, the Node would be gone before clear-nodes (which only looks at
        // existing nodes) force-deleted its stuck pods, and they would stay. Same worker thread:
        // never concurrent with the manager's own run of clear-nodes.
        if (clear_nodes_) {
          if (auto cleared = clear_nodes_->reconcile(); !cleared) {
            errors_.report("clear before purge", cleared.error().message());
          }
        }
        options.event = [this, node](const std::string& reason, const std::string& message) {
          auto recorded = client_->recordEvent({.involved_resource = kube::resources::kNodes,
                                                .involved_name = node,
                                                .reason = reason,
                                                .message = message});
          if (!recorded) errors_.report("event", recorded.error().message());
        };
        actions_->inc({"node_purge"});
        return purgeNode({.client = *client_, .exec = *exec_, .fs = *host_fs_, .clock = clock_},
                         node, options);
      },
      clock_,
      PurgeDeadNodesOptions{
          .self = options_.node_name,
          .node_unreachable_toleration = c.node_unreachable_toleration,
          .min_ready_master_nodes = c.min_ready_master_nodes,
          .min_ready_worker_nodes = c.min_ready_worker_nodes,
          .storm_guard_percent = c.storm_guard_percent,
          .purge = {.certificates_dir = c.certificates_dir,
                    .maintain_rook_storage_nodes = c.maintain_rook_storage_nodes,
                    .dry_run = options_.dry_run,
                    .allow_healthy_etcd_member = false,
                    .may_continue = [this] { return elector_->isLeaderFresh(); },
                    .event = {}}});
}

void Agent::Impl::initClearNodes() {
  const Config& c = options_.config;
  clear_nodes_ = std::make_shared<ClearNodesController>(
      [this] { return observeClusterNodes(); },
      [this] {
        std::vector<kube::PodRecord> pods;
        std::lock_guard lock(leader_caches_mu_);
        for (const auto& [name, running] : unhealthy_pods_) {
          running->informer->forEach([&](const kube::PodRecord& p) { pods.push_back(p); });
        }
        return pods;
      },
      *client_, clock_,
      ClearNodesOptions{.rules = {.node_unreachable_toleration = c.node_unreachable_toleration,
                                  .pod_deletion_grace = c.clear_pod_deletion_grace,
                                  .storm_guard_percent = c.storm_guard_percent},
                        .dry_run = options_.dry_run,
                        .lease_namespace = c.leader_election_namespace,
                        .lease_name = "ekco-leader"},
      ClearNodesCallbacks{
          .is_leader_fresh = [this] { return elector_->isLeaderFresh(); },
          .on_action = [this](std::string_view kind) { actions_->inc({std::string(kind)}); },
          .on_storm = [this](bool active) { storm_gauge_->set(active ? 1 : 0); }});
}

void Agent::Impl::initInternalLb() {
  const Config& c = options_.config;
  auto wake = [this] { manager_->wake("internal-lb"); };
  // A 404 on the resource means this cluster does not serve it (Kubernetes before 1.21 for
  // EndpointSlices): the source counts as listed and empty, and is not an API outage.
  auto on_error = [this](std::string what, std::atomic<bool>* absent) {
    return [this, what = std::move(what), absent](const Error& e) {
      if (absent != nullptr && e.code() == ErrorCode::kNotFound) {
        if (!absent->exchange(true)) manager_->wake("internal-lb");
        return;
      }
      errors_.report(what, e.message());
    };
  };
  lb_slices_.informer = std::make_unique<kube::Informer<EndpointList>>(
      *client_, clock_, kube::resources::kEndpointSlices, "default",
      kube::InformerOptions{.label_selector = "kubernetes.io/service-name=kubernetes"},
      endpointsOfSlice,
      wakeOnChange<EndpointList>(wake, on_error("apiserver endpointslices", &lb_slices_absent_)));
  lb_endpoints_.informer = std::make_unique<kube::Informer<EndpointList>>(
      *client_, clock_, kube::resources::kEndpoints, "default",
      kube::InformerOptions{.field_selector = "metadata.name=kubernetes"}, endpointsOfEndpoints,
      wakeOnChange<EndpointList>(wake, on_error("apiserver endpoints", &lb_endpoints_absent_)));
  // Label selectors cannot say "a or b": one narrow informer per role label.
  lb_control_plane_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      *client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.label_selector = "node-role.kubernetes.io/control-plane"},
      kube::projectNode,
      wakeOnChange<kube::NodeRecord>(wake, on_error("control-plane nodes", nullptr)));
  lb_master_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      *client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.label_selector = "node-role.kubernetes.io/master"}, kube::projectNode,
      wakeOnChange<kube::NodeRecord>(wake, on_error("master nodes", nullptr)));

  lb_reloader_ = makeProcReloader(host_fs_->realPath(kHaproxyConfigPath), clock_);
  // The default loopback bind also listens on [::1] when this network namespace has it (a
  // client resolving "localhost" may try ::1 first); binding [::1] without IPv6 would stop
  // HAProxy from starting.
  const bool ipv6_loopback =
      c.internal_load_balancer_bind.rfind("127.0.0.1:", 0) == 0 && hasIpv6Loopback(*process_fs_);
  internal_lb_ = std::make_shared<InternalLoadBalancer>(
      *host_fs_, [this] { return observeApiservers(); }, *lb_reloader_, clock_,
      InternalLbOptions{.image = c.internal_load_balancer_haproxy_image,
                        .bind = c.internal_load_balancer_bind,
                        .bind_ipv6_loopback = ipv6_loopback,
                        .dry_run = options_.dry_run});
}

ObservedApiservers Agent::Impl::observeApiservers() const {
  ObservedApiservers observed;
  auto gather = [](const kube::Informer<EndpointList>& informer, bool absent) {
    ApiserverSource source{.settled = absent || informer.synced()};
    if (absent) return source;
    informer.forEach([&](const EndpointList& list) {
      source.endpoints.insert(source.endpoints.end(), list.begin(), list.end());
    });
    return source;
  };
  observed.slices = gather(*lb_slices_.informer, lb_slices_absent_.load());
  observed.endpoints = gather(*lb_endpoints_.informer, lb_endpoints_absent_.load());
  observed.nodes.settled =
      lb_control_plane_nodes_.informer->synced() && lb_master_nodes_.informer->synced();
  std::vector<kube::NodeRecord> nodes = lb_control_plane_nodes_.informer->list();
  for (auto& n : lb_master_nodes_.informer->list()) nodes.push_back(std::move(n));
  observed.nodes.endpoints = endpointsOfNodes(nodes);
  return observed;
}

template <typename Self, typename F>
void Agent::Impl::forEachLbCache(Self& self, F&& f) {
  if (!self.internal_lb_) return;
  f("apiserver-endpointslices", self.lb_slices_);
  f("apiserver-endpoints", self.lb_endpoints_);
  f("control-plane-nodes", self.lb_control_plane_nodes_);
  f("master-nodes", self.lb_master_nodes_);
}

void Agent::Impl::onLeaderChange(bool leading) {
  // The elector's thread: record and hand over to the supervisor, which starts or stops the
  // leader caches (that may block) and the manager.
  manager_->setLeader(leading);
  leader_gauge_->set(leading ? 1 : 0);
  if (!leading) storm_gauge_->set(0);  // a follower guards nothing; the next leader reports
  actions_->inc({leading ? "lease_acquired" : "lease_lost"});
  base::logInfo(leading ? "became leader" : "stopped leading",
                {{"node", options_.node_name},
                 {"lease", options_.config.leader_election_namespace + "/ekco-leader"}});
  std::lock_guard lock(mu_);
  leading_ = leading;
  leader_changed_ = true;
  cv_.notify_all();
}

void Agent::Impl::superviseLeaderCaches() {
  bool leading = false;
  {
    std::lock_guard lock(mu_);
    if (!leader_changed_) return;
    leader_changed_ = false;
    leading = leading_;
  }
  std::lock_guard lock(leader_caches_mu_);
  if (leading && !all_nodes_.informer) {
    all_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
        *client_, clock_, kube::resources::kNodes, "", kube::InformerOptions{}, kube::projectNode,
        wakeOnChange<kube::NodeRecord>(
            [this] { manager_->wakeAll(Scope::kLeader); },
            [this](const Error& e) {
              errors_.report("cluster node cache", e.message());
              if (e.code() == ErrorCode::kParse) return;  // bad data, not an outage
              std::lock_guard api_lock(mu_);
              if (api_down_) return;
              api_down_ = true;
              base::logWarn("api unreachable", {{"api", connection_.server}, {"error", e.message()}});
            }));
    all_nodes_.start();
    // As client-go's elector does: an Event on the Lease says who leads.
    auto recorded = client_->recordEvent(
        {.involved_resource = kube::resources::kLeases,
         .involved_namespace = options_.config.leader_election_namespace,
         .involved_name = "ekco-leader",
         .reason = "LeaderElection",
         .message = options_.node_name + " became leader"});
    if (!recorded) errors_.report("event", recorded.error().message());
  } else if (!leading && all_nodes_.informer) {
    all_nodes_.stop();
    all_nodes_.informer.reset();
    for (auto& [name, running] : unhealthy_pods_) running->stop();
    unhealthy_pods_.clear();
  }
}

void Agent::Impl::superviseUnhealthyNodePods() {
  std::lock_guard lock(leader_caches_mu_);
  if (!all_nodes_.informer || !all_nodes_.informer->synced()) return;
  std::set<std::string> unhealthy;
  all_nodes_.informer->forEach([&](const kube::NodeRecord& n) {
    if (nodeUnhealthy(n)) unhealthy.insert(n.name.str());
  });
  for (auto it = unhealthy_pods_.begin(); it != unhealthy_pods_.end();) {
    if (unhealthy.count(it->first) == 0) {
      it->second->stop();
      it = unhealthy_pods_.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& name : unhealthy) {
    if (unhealthy_pods_.count(name) != 0) continue;
    auto running = std::make_unique<RunningInformer<kube::PodRecord>>();
    running->informer = std::make_unique<kube::Informer<kube::PodRecord>>(
        *client_, clock_, kube::resources::kPods, "",
        kube::InformerOptions{.field_selector = "spec.nodeName=" + name}, kube::projectPod,
        wakeOnChange<kube::PodRecord>(
            [this] { manager_->wakeAll(Scope::kLeader); },
            [this, name](const Error& e) { errors_.report("pods on " + name, e.message()); }));
    running->start();
    unhealthy_pods_.emplace(name, std::move(running));
  }
}

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
  if (!own_node_.informer->synced()) {
    return {.ok = false, .reason = "the node cache has not synced: " +
                                   own_node_.informer->stats().last_error};
  }
  if (!own_pods_.informer->synced()) {
    return {.ok = false, .reason = "the pod cache has not synced: " +
                                   own_pods_.informer->stats().last_error};
  }
  const auto node_stats = own_node_.informer->stats();
  if (!node_stats.connected) {
    return {.ok = false, .reason = "the Kubernetes API is unreachable: " + node_stats.last_error};
  }
  const auto pod_stats = own_pods_.informer->stats();
  if (!pod_stats.connected) {
    return {.ok = false,
            .reason = "the Kubernetes API is unreachable (pod cache): " + pod_stats.last_error};
  }
  // An API that accepts connections and answers nothing leaves open watches looking healthy
  // until their idle bound: the elector's round trips notice first.
  const auto now = clock_.monoNow();
  const auto silent_since = elector_->lastAnswer().value_or(started_at_);
  if (now - silent_since > api_silence_limit_) {
    const auto lease = elector_->status();
    return {.ok = false,
            .reason = "the Kubernetes API has not answered for " +
                      base::formatDuration(
                          std::chrono::duration_cast<std::chrono::seconds>(now - silent_since)) +
                      (lease.last_error.empty() ? "" : ": " + lease.last_error)};
  }
  {
    std::lock_guard lock(leader_caches_mu_);
    if (all_nodes_.informer && all_nodes_.informer->synced()) {
      const auto stats = all_nodes_.informer->stats();
      if (!stats.connected) {
        return {.ok = false, .reason = "the Kubernetes API is unreachable (cluster node cache): " +
                                       stats.last_error};
      }
    }
  }
  return {.ok = true};
}

json Agent::Impl::status() const {
  json out;
  out["node"] = options_.node_name;
  out["version"] = std::string(EKCO_VERSION) + " (" + EKCO_GIT_SHA + ")";
  const auto lease = elector_->status();
  out["leader"] = lease.holder;
  out["is_leader"] = lease.is_leader;
  out["lease"] = {{"name", options_.config.leader_election_namespace + "/ekco-leader"},
                  {"holder", lease.holder},
                  {"renew_time", timeJson(lease.renew_time)},
                  {"acquire_time", timeJson(lease.acquire_time)},
                  {"transitions", lease.transitions},
                  {"fresh", lease.is_fresh},
                  {"last_error", lease.last_error}};
  const Health ready = readyz();
  out["ready"] = ready.ok;
  out["ready_reason"] = ready.reason;
  out["api_reachable"] = own_node_.informer->stats().connected;
  out["dry_run"] = options_.dry_run;
  json caches = json::array();
  auto cache = [&](const std::string& name, const kube::InformerStats& s) {
    caches.push_back({{"name", name},
                      {"synced", s.synced},
                      {"objects", s.objects},
                      {"resource_version", s.resource_version},
                      {"last_sync", timeJson(s.last_sync)},
                      {"last_error", s.last_error}});
  };
  cache("node", own_node_.informer->stats());
  cache("pods", own_pods_.informer->stats());
  forEachLbCache(
      *this, [&](const char* name, const auto& running) { cache(name, running.informer->stats()); });
  {
    std::lock_guard lock(leader_caches_mu_);
    if (all_nodes_.informer) cache("cluster-nodes", all_nodes_.informer->stats());
    for (const auto& [name, running] : unhealthy_pods_) {
      cache("pods on " + name, running->informer->stats());
    }
  }
  out["caches"] = caches;
  json controllers = json::array();
  for (const auto& s : manager_->status()) {
    controllers.push_back({{"name", s.name},
                           {"scope", std::string(scopeName(s.scope))},
                           {"active", s.active},
                           {"last_run", timeJson(s.last_run)},
                           {"last_result", s.last_result},
                           {"last_error", s.last_error},
                           {"next_run", timeJson(s.next_run)},
                           {"last_plan", s.last_plan},
                           {"runs", s.runs},
                           {"errors", s.errors}});
  }
  out["controllers"] = controllers;
  json checks = json::array();
  for (const auto& c : host_checks_->results()) {
    checks.push_back({{"name", c.name}, {"ok", c.ok}, {"message", c.message}});
  }
  out["host_checks"] = checks;
  out["internal_load_balancer"] = internal_lb_ ? internal_lb_->status() : json(nullptr);
  out["host_units"] = host_units_->status();
  out["clear_nodes"] = clear_nodes_ ? clear_nodes_->status() : json(nullptr);
  out["purge_dead_nodes"] = purge_dead_nodes_ ? purge_dead_nodes_->status() : json(nullptr);
  return out;
}

std::string Agent::Impl::metricsText() const {
  auto export_cache = [&](const std::string& name, const kube::InformerStats& s) {
    cache_objects_->set({name}, static_cast<double>(s.objects));
    cache_synced_->set({name}, s.synced ? 1 : 0);
  };
  export_cache("node", own_node_.informer->stats());
  export_cache("pods", own_pods_.informer->stats());
  forEachLbCache(
      *this, [&](const char* name, const auto& running) { export_cache(name, running.informer->stats()); });
  {
    // The leader's caches come and go: series of caches that are gone are removed.
    std::lock_guard lock(leader_caches_mu_);
    std::set<std::string> current;
    if (all_nodes_.informer) {
      export_cache("cluster-nodes", all_nodes_.informer->stats());
      current.insert("cluster-nodes");
    }
    for (const auto& [name, running] : unhealthy_pods_) {
      export_cache("pods on " + name, running->informer->stats());
      current.insert("pods on " + name);
    }
    for (const std::string& name : exported_leader_caches_) {
      if (current.count(name) != 0) continue;
      cache_objects_->remove({name});
      cache_synced_->remove({name});
    }
    exported_leader_caches_ = std::move(current);
  }
  api_gauge_->set(own_node_.informer->stats().connected ? 1 : 0);
  return metrics_.render();
}

void Agent::Impl::notifySystemd(const Health& ready, bool first_ready, bool watchdog) {
  const auto lease = elector_->status();
  std::string state = "node " + options_.node_name + ", " +
                      (lease.is_leader ? std::string("leader")
                                       : "leader " + (lease.holder.empty() ? "-" : lease.holder));
  state += ready.ok ? ", ready" : ", not ready: " + ready.reason;
  std::replace(state.begin(), state.end(), '\n', ' ');
  std::string message;
  if (first_ready) message += "READY=1\n";
  if (state != last_status_) {
    message += "STATUS=" + state + "\n";
    last_status_ = state;
  }
  if (watchdog && healthz().ok) message += "WATCHDOG=1\n";
  if (!message.empty()) sd_notify(0, message.c_str());
}

int Agent::Impl::run() {
  auto server = HealthServer::start(
      {.socket_path = options_.socket_path,
       .handlers = {.healthz = [this] { return healthz(); },
                    .readyz = [this] { return readyz(); },
                    .status = [this] { return status(); },
                    .metrics = [this] { return metricsText(); }}});
  if (!server) {
    base::logError("cannot open the health socket", {{"error", server.error().message()}});
    return 1;
  }
  base::logInfo("agent started",
                {{"node", options_.node_name},
                 {"version", EKCO_VERSION},
                 {"host_root", options_.host_root},
                 {"config", options_.config_source},
                 {"api", connection_.server},
                 {"credentials", connection_.source},
                 {"socket", options_.socket_path},
                 {"dry_run", options_.dry_run}});

  own_node_.start();
  own_pods_.start();
  lease_holder_.start();
  forEachLbCache(*this, [](const char*, auto& running) { running.start(); });
  std::thread manager_thread([this] { manager_->run(); });
  std::thread elector_thread([this] { elector_->run(); });

  std::uint64_t watchdog_usec = 0;
  const bool watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0;
  // Readiness and leadership changes show within half a second; the watchdog is pinged at
  // least twice per WatchdogSec.
  const milliseconds tick = watchdog ? std::clamp(milliseconds(watchdog_usec / 2000),
                                                   milliseconds(100), milliseconds(500))
                                     : milliseconds(500);
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, tick, [&] { return stop_requested_ || leader_changed_; });
      if (stop_requested_) break;
    }
    superviseLeaderCaches();
    superviseUnhealthyNodePods();
    const Health ready = readyz();
    bool recovered = false;
    if (ready.ok) {
      std::lock_guard lock(mu_);
      recovered = std::exchange(api_down_, false);
    }
    if (recovered) base::logInfo("api reachable", {{"api", connection_.server}});
    bool first_ready = false;
    if (ready.ok && !ready_sent_) {
      ready_sent_ = true;
      first_ready = true;
      base::logInfo("agent ready", {{"node", options_.node_name}});
    }
    notifySystemd(ready, first_ready, watchdog);
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
    base::logInfo("lease released", {{"lease", options_.config.leader_election_namespace +
                                                   "/ekco-leader"}});
  }
  {
    std::lock_guard lock(leader_caches_mu_);
    all_nodes_.stop();
    for (auto& [name, running] : unhealthy_pods_) running->stop();
    unhealthy_pods_.clear();
  }
  own_node_.stop();
  own_pods_.stop();
  lease_holder_.stop();
  forEachLbCache(*this, [](const char*, auto& running) { running.stop(); });
  (*server)->stop();
  base::logInfo("agent stopped", {{"node", options_.node_name}});
  return 0;
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
