// One spec per controller, declared next to its code (`<name>Spec()` in its header), listed once
// in agent/features/table.cc. The runtime (agent/runtime/agent.cc) knows no controller by
// name: it builds the watches the enabled specs declare (agent/controller/watch.h; shared when
// two declare the same), builds each enabled controller from the config and ControllerDeps,
// registers it with the manager in the table's order, wakes it when one of its watches changes,
// and shows its status() under `status_key` in /status.
//
// Adding a controller: its files (agent/features/<name>/) with a spec, its tests, one
// line in table.cc; config keys only if genuinely new (agent/config/config.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/watch.h"
#include "agent/serve/metrics.h"
#include "base/clock.h"
#include "base/result.h"
#include "hostfs/local_host_fs.h"
#include "kube/client.h"
#include "kube/exec.h"

namespace ekco::agent {

// Everything a controller may be built from: the side-effect interfaces and the agent's shared
// services. References outlive every controller.
struct ControllerDeps {
  const Config& config;
  const std::string& node_name;
  const std::string& host_root;  // for the host's system bus
  const std::string& units_bin;  // the ekco binary the host's systemd units run
  bool dry_run = false;
  // The agent runs in a pod (KUBERNETES_SERVICE_HOST is in its environment: the DaemonSet), not
  // from the packages on the host.
  bool in_pod = false;
  // The API address of the agent's own connection when it was read from the host's kubeconfig
  // (admin.conf or kubelet.conf, as from the packages); "" for --kubeconfig, KUBECONFIG or
  // in-cluster, which a move to another API address does not rewrite.
  std::string host_kubeconfig_server{};
  const base::Clock& clock;
  hostfs::LocalHostFs& host_fs;           // the host, under --host-root
  const hostfs::LocalHostFs& process_fs;  // this process's own view ("/")
  kube::KubeClient& client;
  kube::PodExecutor& exec;
  Watches& watches;          // those its spec declares, built and not yet started
  MetricsRegistry& metrics;  // for a controller's own gauges
  // Fencing: this agent holds the Lease and renewed it within renew_deadline. Leader
  // controllers ask it right before every irreversible call. For a spec that pauses in
  // maintenance it also answers false while maintenance mode is on (or not yet read), so that
  // guard is the maintenance check too.
  std::function<bool()> is_leader_fresh{};
  // The leader fencing alone, without the maintenance check: only for a pausable controller
  // closing its window while paused (Controller::windowToClose, agent/runtime/manager.h).
  std::function<bool()> is_leader_fresh_to_close{};
  // Maintenance mode (agent/maintenance/maintenance.h): false while it is on or not yet read, for a
  // spec that pauses in maintenance (always true for the others). A node-scope controller that
  // pauses asks it right before each irreversible call.
  std::function<bool()> may_act{};
  // ekco_actions_total{kind}.
  std::function<void(std::string_view kind)> count_action{};
  // A failed API call off the reconcile path (an Event not recorded): logged once per minute.
  std::function<void(std::string_view what, const std::string& message)> report{};
  // Stops the agent cleanly to be started again (systemd's Restart=always, the kubelet): for a
  // connection that must be loaded anew (its kubeconfig now names another API address).
  std::function<void(std::string why)> restart_agent{};

  // A controller's dry run, fencing, Event recorder and action counter (its options' effects).
  // Events go through `client`; a failure goes to `report` (an Event is never worth failing a
  // reconcile for).
  Effects effects() const {
    return {.dry_run = dry_run,
            .is_leader_fresh = is_leader_fresh,
            .record_event =
                [client = &client, report = report](const kube::EventSpec& event) {
                  auto recorded = client->recordEvent(event);
                  if (!recorded && report) report("event", recorded.error().message());
                },
            .count_action = count_action};
  }
};

struct ControllerSpec {
  std::string_view name;  // the controller's name() ("clear-nodes")
  Scope scope = Scope::kNode;
  // Its object in /status ("clear_nodes"): the controller's status(), null while disabled; ""
  // for none.
  std::string_view status_key{};
  std::function<bool(const Config&)> enabled{};
  std::vector<WatchSpec> watches{};  // woken on every change of each
  // Changes the cluster on its own initiative and stops while maintenance mode is on: the
  // runtime does not call its reconcile (its /status says "paused: maintenance (reason)") and
  // its is_leader_fresh / may_act answer false (agent/maintenance/maintenance.h).
  bool pauses_in_maintenance = false;
  // An every-node controller that needs what only the control-plane account (ekco) holds: it
  // is not built on an agent with leader_election_candidate: false (the worker DaemonSet's
  // ekco-node), whose /status shows it null as if disabled. Leader controllers are never built
  // there either.
  bool candidates_only = false;
  std::function<base::Result<std::shared_ptr<Controller>>(const ControllerDeps&)> build{};
};

// The table: every controller, in the order the manager runs them when several are due.
const std::vector<ControllerSpec>& controllerSpecs();

}  // namespace ekco::agent
