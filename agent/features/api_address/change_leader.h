// The leader's side of `ekco change-load-balancer` (controller `api-address`, leader scope,
// paused in maintenance): each pass reads the request (ConfigMap <ns>/ekco-api-address, from its
// own watch) and the nodes (the leader's node watch: readiness and the ekco.kurl.sh/api-address-*
// annotations), decides with planChange (change.h) and acts:
//   kAssign  the progress written to the ConfigMap first (at the resourceVersion read: the
//            leader's journal), then the task annotation on the node; an Event on the node;
//   kWait    the progress written when it changed;
//   kFinish  the progress and `result` written; an Event on the node where it stopped (Warning)
//            or, on success, on the ConfigMap.
// Every write is fenced (this agent's leadership fresh, maintenance off) and honours dry_run
// (the decision only in /status). While an operation is under way the pass runs every 2 s.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/features/api_address/change.h"
#include "agent/policy/node_watches.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent {

struct ChangeLeaderOptions {
  std::string ns = "kurl";
  api_address::ChangeOptions change{};
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  std::chrono::milliseconds active_interval{std::chrono::seconds(2)};
  Effects effects{};
};

class ChangeLeaderController final : public Controller {
 public:
  // `request`: the ConfigMap as the watch has it (nullopt: absent; an error: not listed yet).
  ChangeLeaderController(std::function<base::Result<std::optional<nlohmann::json>>()> request,
                         std::function<ObservedNodes()> nodes, kube::KubeClient& client,
                         const base::Clock& clock, ChangeLeaderOptions options);

  std::string name() const override { return "api-address"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;

 private:
  std::function<base::Result<std::optional<nlohmann::json>>()> request_;
  std::function<ObservedNodes()> nodes_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  ChangeLeaderOptions options_;

  mutable std::mutex mu_;
  nlohmann::json status_ = nlohmann::json::object();
};

// The request's watch: the one ConfigMap, in leader_election_namespace (leader scope).
WatchSpec apiAddressRequestWatch();

ControllerSpec changeLeaderSpec();

}  // namespace ekco::agent
