// Agent::Impl, the agent's state and its parts: internal to agent/runtime (agent.cc builds and
// runs it; agent_health.cc answers /healthz, /readyz, /status and /metrics and tells systemd).
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/controller/service.h"
#include "agent/controller/spec.h"
#include "agent/edge/command_env.h"
#include "agent/maintenance/maintenance_watch.h"
#include "agent/policy/node_watches.h"
#include "agent/runtime/agent.h"
#include "agent/runtime/leader_election.h"
#include "agent/runtime/manager.h"
#include "agent/runtime/watches.h"
#include "agent/serve/health_server.h"
#include "agent/serve/metrics.h"
#include "base/log/log.h"
#include "kube/exec.h"
#include "kube/rest_client.h"
#include "kube/watch/informer.h"

namespace ekco::agent {

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

class Agent::Impl {
 public:
  Impl(AgentOptions options, const base::Clock& clock)
      : options_(std::move(options)), clock_(clock), errors_(clock), started_at_(clock.monoNow()) {
    if (options_.holder_identity.empty())
      options_.holder_identity = leaseIdentity(options_.node_name);
  }

  // The controllers go first, while everything they may call back into (requestRestart's
  // mutex, the manager) is still alive: a controller's destructor may wait for its thread.
  ~Impl();
  base::Status init();
  int run();
  void requestStop();
  // A controller asks for a fresh process (its connection must be loaded again): the agent
  // stops cleanly and run() returns 1, so systemd or the kubelet starts it again.
  void requestRestart(std::string why);
  nlohmann::json status() const;

 private:
  // A controller built from its spec.
  struct Built {
    const ControllerSpec* spec = nullptr;
    std::shared_ptr<Controller> controller{};  // null: disabled by the config
  };

  base::Status registerMetrics();
  // (1) The side-effect edge: the client, the exec client.
  base::Status initClient();
  // (2) The manager, the Lease client and the elector.
  base::Status initElection();
  // (3) The watches and the Lease holder's informer.
  base::Status initWatches();
  base::Status initControllers();
  void onWatchError(const WatchSpec& watch, std::string_view what, const base::Error& e);
  void onLeaderChange(bool leading);
  void onMaintenanceChange(const MaintenanceChange& change);
  void superviseLeaderWatches();
  Health healthz() const;
  Health readyz() const;
  std::string metricsText() const;
  void notifySystemd(const Health& ready, bool watchdog);

  AgentOptions options_;
  const base::Clock& clock_;
  ErrorLog errors_;
  base::MonoTime started_at_;
  std::string socket_root_;  // the health socket is confined to it ("" = "/")
  // /readyz: how long the API may go without answering the elector (set in init()).
  std::chrono::milliseconds api_silence_limit_{std::chrono::seconds(20)};  // while leading
  std::chrono::milliseconds candidate_silence_limit_{std::chrono::seconds(25)};

  CommandClient platform_;  // process and host filesystems, connection, transport, client
  std::unique_ptr<kube::RestClient> lease_client_;
  std::unique_ptr<kube::WebSocketExecutor> exec_;

  std::unique_ptr<Manager> manager_;
  std::unique_ptr<LeaderElector> elector_;
  std::unique_ptr<WatchRegistry> watches_;
  // This node and its pods, which readiness rests on (required by the runtime itself).
  std::shared_ptr<InformerWatch<kube::NodeRecord>> own_node_;
  std::shared_ptr<InformerWatch<kube::PodRecord>> own_pods_;
  // The Lease ekco-leader, watched for the elector: renewals, releases and deletes.
  std::unique_ptr<kube::Informer<nlohmann::json>> lease_watch_;
  std::thread lease_watch_thread_;
  std::unique_ptr<MaintenanceWatch> maintenance_;  // ekco-maintenance, on every agent
  // The features' services that are on (agent/controller/service.h), in the table's order.
  struct RunningService {
    const ServiceSpec* spec = nullptr;
    std::unique_ptr<AgentService> service;
    std::thread thread;
  };
  std::vector<RunningService> services_;
  std::vector<Built> controllers_;                        // the table's order
  mutable std::set<std::string> exported_leader_caches_;  // cache labels last sent to /metrics

  MetricsRegistry metrics_;
  const Gauge* leader_gauge_ = nullptr;
  const Gauge* api_gauge_ = nullptr;
  const Gauge* maintenance_gauge_ = nullptr;
  const Gauge* cache_objects_ = nullptr;
  const Gauge* cache_synced_ = nullptr;
  const Counter* reconciles_ = nullptr;
  const Counter* reconcile_errors_ = nullptr;
  const Histogram* reconcile_seconds_ = nullptr;
  const Counter* actions_ = nullptr;
  // base::processBufferBudget(), as /metrics shows it.
  const Gauge* buffer_bytes_ = nullptr;
  const Counter* buffer_refusals_ = nullptr;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  // The thread that failed (an exception escaped it: a bug), when one did: the agent stops
  // cleanly and run() returns 1, so systemd or the kubelet restarts it.
  std::string failed_thread_;
  std::string restart_reason_;          // requestRestart's why, when one was asked for
  bool leading_ = false;                // as the elector last said
  bool leader_changed_ = false;         // the supervisor has a leadership change to act on
  bool lost_since_supervised_ = false;  // leadership was lost since the supervisor last acted
  bool api_down_ = false;               // "api unreachable" was logged and recovery not yet
  bool ready_logged_ = false;           // "agent ready" was logged
  bool systemd_ready_sent_ = false;     // READY=1 went to systemd (once, at start)
  std::string last_status_;             // the last STATUS= sent to systemd
};

}  // namespace ekco::agent
