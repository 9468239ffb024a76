// Envoy restarts (leader controller `envoy-restarts`; config `restart_failed_envoy_pods`,
// `envoy_pods_not_ready_duration`, `contour_namespace`; ../shared/reference/ekco.md §3.5).
//
// Contour's Envoy pods can stay not ready for good after a network blip while their
// shutdown-manager is fine (projectcontour/contour#3192); deleting the pod is the known cure.
// A pod `app=envoy` in contour_namespace is force-deleted (grace 0) when EKCO's predicate holds:
//   - it is Running and not already terminating;
//   - its `envoy` and `shutdown-manager` containers have both been running for longer than
//     envoy_pods_not_ready_duration (so a pod that is merely starting is left alone);
//   - `shutdown-manager` is ready and `envoy` is not;
//   - its ContainersReady condition is False (reason ContainersNotReady) since longer than the
//     duration.
//
// Beyond EKCO (which looked once a minute and deleted every such pod in one pass):
//   - Woken by the Envoy pod cache and, for a pod on its way, at the exact moment the duration
//     passes for it (not on a poll).
//   - At most one pod per pass, and passes that delete are `spacing` apart (a minute by
//     default): a cluster-wide Envoy outage (a bad Contour config) is not made worse by taking
//     every Envoy down at once. The pod broken the longest goes first.
//   - The guards are checked twice: on the cache, then on a fresh read of the pod right before
//     the delete (which carries its uid as a precondition, so a re-created namesake is never
//     deleted), and the leader's fencing check (is_leader_fresh) is asked last.
//   - Each restart is logged with its reason and recorded as a Warning Event on the pod
//     (EnvoyPodRestarted); --dry-run logs and shows the plan, deletes nothing.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/controller/watch.h"
#include "base/clock.h"
#include "kube/client.h"
#include "kube/decode/objects.h"

namespace ekco::agent {

// Full pods of one selection (the leader's Envoy pods: container states, conditions).
struct ObservedPods {
  bool synced = false;
  std::vector<kube::Pod> pods{};
};

// "envoy-pods": the pods app=envoy in contour_namespace, whole (leader scope; a few per cluster).
WatchSpec envoyPodsWatch();

// EKCO's predicate for one pod at `now`.
struct EnvoyVerdict {
  bool restart = false;
  // When the pod's timing conditions are met (the latest of both containers' start and the
  // ContainersReady transition, plus the duration); nullopt when another condition fails (a
  // healthy pod, or one whose shutdown-manager is not ready either).
  std::optional<base::WallTime> due_at = std::nullopt;
  std::string reason{};  // why, or why not, for the plan and the Event
};
EnvoyVerdict envoyRestartVerdict(const kube::Pod& pod, base::WallTime now,
                                 std::chrono::nanoseconds not_ready_for);

struct EnvoyRestartsOptions {
  std::string ns = "projectcontour";
  std::chrono::nanoseconds not_ready_for{std::chrono::minutes(5)};
  // The least time between two restarts.
  std::chrono::milliseconds spacing{std::chrono::minutes(1)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class EnvoyRestarts final : public Controller {
 public:
  EnvoyRestarts(std::function<ObservedPods()> observe, kube::KubeClient& client,
                const base::Clock& clock, EnvoyRestartsOptions options);
  std::string name() const override { return "envoy-restarts"; }
  base::Result<ReconcileResult> reconcile() override;
  // {"pods": [{name, verdict, due_at}], "last_restart": {pod, at, reason} | null,
  //  "history": [...]} (the last 20 restarts)
  nlohmann::json status() const override;

 private:
  std::function<ObservedPods()> observe_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  EnvoyRestartsOptions o_;
  std::optional<base::MonoTime> last_restart_{};
  std::set<std::string> planned_;  // dry run: each pod logged once
  mutable std::mutex mu_;
  nlohmann::json pods_ = nlohmann::json::array();
  nlohmann::json history_ = nlohmann::json::array();
};

ControllerSpec envoyRestartsSpec();

}  // namespace ekco::agent
