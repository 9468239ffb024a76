// A node's side of `ekco change-load-balancer` (controller `api-address-node`, every node, paused
// in maintenance): its own Node's task annotation (ekco.kurl.sh/api-address-task, written by the
// leader: change.h) says what to do; the answer goes into ekco.kurl.sh/api-address-result on
// the same Node, written with the node's own kubelet credentials (every node may write its own
// Node, whatever its agent's account).
//
// A task without a final answer (done, failed) for its request and step is run on a thread of
// its own (a step takes minutes: a restart and its verification), so the other node
// controllers go on: first the answer `running`, then the step, then `done` (with what was done)
// or `failed` (with why). A `running` answer this process did not write (the agent was killed
// mid-step) means the step is run again, resumed: each step is safe to repeat.
//   certificate  `ekco regen-cert --add-alt-names HOST` (this binary, as a child: the
//                certificates feature's re-issue, backup, Lease, verification and restore);
//   drop-sans    `ekco regen-cert --drop-alt-names HOST`; a name the cluster itself reaches the
//                apiserver by is kept (regen-cert refuses it), which is done, not failed;
//   kubeconfigs  the API must answer at the new address from here (apiAnswersAt: with
//                --internal, this node's load balancer is up), then switchKubeconfigServer
//                (set_kubeconfig_server.h) with the kubelet verification; resumed, kubelet is
//                restarted and verified even when the files already point there.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "agent/features/api_address/change.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "hostfs/host_fs.h"

namespace ekco::agent {

struct ChangeNodeOptions {
  std::string node_name{};
  bool dry_run = false;
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  std::chrono::milliseconds active_interval{std::chrono::seconds(2)};
  // The API address this agent's own connection uses: after a kubeconfigs step to another one,
  // restart_agent is asked for; to this one (a change run again, a node that had moved) it is
  // not.
  std::string agent_server{};
};

struct ChangeNodeDeps {
  std::function<ObservedNode()> own_node{};
  // Writes this node's answer annotation.
  std::function<base::Status(const std::string& value)> answer{};
  // Runs one step; what was done (one line), or why it failed.
  std::function<base::Result<std::string>(const api_address::NodeTask& task, bool resumed)>
      run_step{};
  // Maintenance mode off (asked right before a step starts).
  std::function<bool()> may_act{};
  // After this node's kubeconfigs point at the new address and the answer is written: a fresh
  // agent process, whose connection (from the host's kubeconfig, for agents from the packages)
  // names the new address. Unset: not needed (in a pod, the in-cluster address does not move).
  std::function<void(std::string why)> restart_agent{};
};

class ChangeNodeController final : public Controller {
 public:
  // `clock` (a task's age) must outlive the controller.
  ChangeNodeController(ChangeNodeDeps deps, const base::Clock& clock, ChangeNodeOptions options);
  ~ChangeNodeController() override;

  std::string name() const override { return "api-address-node"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;

  // Waits for a running step (tests).
  void join();

 private:
  void run(api_address::NodeTask task, bool resumed);

  ChangeNodeDeps deps_;
  const base::Clock& clock_;
  ChangeNodeOptions options_;
  mutable std::mutex mu_;
  std::thread thread_;
  bool running_ = false;
  std::string running_key_{};  // "<id>/<step>" of the step under way
  // The steps this process ran to the end (never run again by it), and a final answer that
  // could not be written yet.
  std::set<std::string> finished_here_{};
  std::optional<std::string> unsent_answer_{};
  nlohmann::json status_ = nlohmann::json::object();
};

// What the real steps run with: this host (under host_root), this node, and the ekco binary a
// certificate step runs as `ekco regen-cert` (the agent's own, /proc/self/exe; a test's build).
struct NodeStepHost {
  std::string host_root = "/";
  std::string node_name{};
  std::string ekco_bin = "/proc/self/exe";
  // How long kubelet gets to renew its Lease through the new address (tests shorten it).
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(2)};
  const base::Clock& clock;
  hostfs::HostFs& host_fs;
};
// The real step (the header's list): what was done, or why it failed.
base::Result<std::string> runNodeStep(const NodeStepHost& host, const api_address::NodeTask& task,
                                      bool resumed);
// The real answer: `value` into this node's ekco.kurl.sh/api-address-result, with the node's
// kubelet credentials (kubelet.conf under host_root; in a pod, the in-cluster address).
base::Status writeNodeAnswer(const NodeStepHost& host, const std::string& value);

ControllerSpec changeNodeSpec();

}  // namespace ekco::agent
