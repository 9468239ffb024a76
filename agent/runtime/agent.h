// `ekco agent`: the daemon that runs on every node. It composes the pieces:
//
//   informers   its own Node (metadata.name=<node>) and its own pods (spec.nodeName=<node>) on
//               every node; all Nodes only while it leads (never a cluster-wide pod watch)
//   elector     the ekco-leader Lease (agent/leader_election.h)
//   manager     node reconcilers always, leader controllers while leading (agent/manager.h)
//   health      the unix socket with /healthz, /readyz, /status, /metrics
//   systemd     READY=1 once started (API or not), STATUS=... (readiness), WATCHDOG=1 while the
//   manager
//               loop is alive (sd_notify; a no-op without $NOTIFY_SOCKET)
//
// run() blocks until requestStop() (SIGTERM/SIGINT): controllers stop, the Lease is released
// (so another agent takes over within one retry period), the socket is removed, exit 0. API
// outages never end it: informers and the elector back off and /readyz says why.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/config/config.h"
#include "agent/edge/command_env.h"  // resolveNodeName
#include "base/clock.h"
#include "base/result.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent {

struct AgentOptions {
  Config config{};
  std::string config_source{};  // for the start-up log line: the file, or "defaults"
  std::string kubeconfig{};     // --kubeconfig ("" = the usual search)
  std::string node_name{};      // resolved (resolveNodeName)
  // The Lease holderIdentity; "" = leaseIdentity(node_name), unique to this process.
  std::string holder_identity{};
  std::string host_root = "/";
  // The health socket as this process sees it ("" = <host_root><config.health_socket>).
  std::string socket_path{};
  bool dry_run = false;
  kube::Environment env{};  // KUBECONFIG, KUBERNETES_SERVICE_*
  // The ekco binary on the host that the systemd units run (nothing is installed when the host
  // has none, e.g. an agent in a pod on a host without the package).
  std::string units_bin = "/usr/bin/ekco";
  std::string working_dir = "/";
};

// The socket path the agent listens on and `ekco status` reads by default.
std::string healthSocketPath(const std::string& host_root, const std::string& configured);

class Agent {
 public:
  // Opens the host root, loads the kubeconfig and builds the client; nothing is started.
  // Errors: a missing or broken kubeconfig, an unusable host root, a bad lease config.
  static base::Result<std::unique_ptr<Agent>> create(AgentOptions options,
                                                     const base::Clock& clock);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until requestStop(). Returns the exit code: 0 after a clean stop, 1 when the health
  // socket cannot be opened (another agent runs).
  int run();
  // Thread-safe, idempotent.
  void requestStop();

  // The /status document.
  nlohmann::json status() const;

  class Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ekco::agent
