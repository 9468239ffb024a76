#include "agent/features/envoy/envoy_restarts.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/duration.h"
#include "base/log/log.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr std::size_t kHistory = 20;
constexpr std::string_view kEnvoy = "envoy";
constexpr std::string_view kShutdownManager = "shutdown-manager";

milliseconds until(base::WallTime at, base::WallTime now) {
  // One millisecond past the moment: the predicate is strict ("longer than").
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(at - now) + milliseconds(1));
}

}  // namespace

EnvoyVerdict envoyRestartVerdict(const kube::Pod& pod, base::WallTime now,
                                 std::chrono::nanoseconds not_ready_for) {
  EnvoyVerdict v;
  if (pod.deletion_timestamp) {
    v.reason = "terminating";
    return v;
  }
  if (pod.phase != "Running") {
    v.reason = "phase " + (pod.phase.empty() ? std::string("unknown") : pod.phase);
    return v;
  }
  const kube::ContainerStatus* envoy = pod.containerStatus(kEnvoy);
  const kube::ContainerStatus* manager = pod.containerStatus(kShutdownManager);
  if (envoy == nullptr || manager == nullptr) {
    v.reason = "no envoy and shutdown-manager container statuses";
    return v;
  }
  if (envoy->ready) {
    v.reason = "envoy ready";
    return v;
  }
  if (!manager->ready) {
    // Both down: the node or the pod is in trouble, not Envoy alone (EKCO's "both not ready").
    v.reason = "shutdown-manager not ready either";
    return v;
  }
  if (!envoy->running_since || !manager->running_since) {
    v.reason = "a container is not running";
    return v;
  }
  const kube::PodCondition* ready = pod.condition("ContainersReady");
  if (ready == nullptr || ready->status != "False" || ready->reason != "ContainersNotReady" ||
      !ready->last_transition_time) {
    v.reason = "no ContainersReady=False (ContainersNotReady) condition";
    return v;
  }
  const base::WallTime since =
      std::max({*envoy->running_since, *manager->running_since, *ready->last_transition_time});
  v.due_at = since + std::chrono::duration_cast<base::WallTime::duration>(not_ready_for);
  v.restart = now > *v.due_at;
  const std::string limit =
      base::formatDuration(std::chrono::duration_cast<std::chrono::nanoseconds>(not_ready_for));
  v.reason = v.restart
                 ? fmt::format(
                       "envoy not ready since {} (longer than {}) while "
                       "shutdown-manager is ready (projectcontour/contour#3192)",
                       kube::formatRfc3339(since), limit)
                 : fmt::format("envoy not ready since {}; restarted after {} at {}",
                               kube::formatRfc3339(since), limit, kube::formatRfc3339(*v.due_at));
  return v;
}

EnvoyRestarts::EnvoyRestarts(std::function<ObservedPods()> observe, kube::KubeClient& client,
                             const base::Clock& clock, EnvoyRestartsOptions options)
    : observe_(std::move(observe)), client_(client), clock_(clock), o_(std::move(options)) {}

Result<ReconcileResult> EnvoyRestarts::reconcile() {
  const ObservedPods observed = observe_();
  if (!observed.synced) return ReconcileResult{.summary = "waiting for the envoy pod cache"};
  const base::WallTime now = clock_.wallNow();
  ReconcileResult result;
  json pods = json::array();
  const kube::Pod* chosen = nullptr;
  EnvoyVerdict chosen_verdict;
  std::size_t due = 0;
  for (const kube::Pod& pod : observed.pods) {
    const EnvoyVerdict v = envoyRestartVerdict(pod, now, o_.not_ready_for);
    pods.push_back({{"name", pod.name},
                    {"restart", v.restart},
                    {"reason", v.reason},
                    {"due_at", v.due_at ? json(kube::formatRfc3339(*v.due_at)) : json(nullptr)}});
    if (v.restart) {
      ++due;
      if (chosen == nullptr || *v.due_at < *chosen_verdict.due_at) {
        chosen = &pod;
        chosen_verdict = v;
      }
    } else if (v.due_at) {
      const milliseconds wake = until(*v.due_at, now);
      if (!result.requeue_after || wake < *result.requeue_after) result.requeue_after = wake;
    }
  }
  {
    std::lock_guard lock(mu_);
    pods_ = pods;
  }
  if (chosen == nullptr) {
    result.summary = observed.pods.empty()
                         ? "no envoy pods"
                         : fmt::format("{} envoy pods, none to restart", observed.pods.size());
    return result;
  }
  // One restart per pass, passes `spacing` apart.
  const base::MonoTime mono = clock_.monoNow();
  if (last_restart_ && mono - *last_restart_ < o_.spacing) {
    const auto wait = std::chrono::ceil<milliseconds>(o_.spacing - (mono - *last_restart_));
    result.requeue_after = std::min(result.requeue_after.value_or(wait), wait);
    result.summary = fmt::format("{} envoy pods to restart; the next in {} (one per {})", due,
                                 base::formatDuration(wait), base::formatDuration(o_.spacing));
    return result;
  }
  const std::string what = o_.ns + "/" + chosen->name;
  result.plan = fmt::format("restart envoy pod {}: {}", what, chosen_verdict.reason);
  if (o_.effects.dry_run) {
    if (planned_.insert(chosen->uid).second) {
      base::logInfo("dry run: would restart envoy pod",
                    {{"pod", what}, {"reason", chosen_verdict.reason}});
    }
    result.summary = "would restart " + what + " (dry run)";
    return result;
  }
  // The second look: the pod as the API has it now, judged again.
  auto fresh = client_.get(kube::resources::kPods, o_.ns, chosen->name);
  if (!fresh) {
    if (fresh.error().code() == ErrorCode::kNotFound) {
      result.summary = what + " is gone already";
      result.requeue_after = milliseconds(0);
      return result;
    }
    return std::move(fresh).error().wrap("read " + what);
  }
  auto pod = kube::parsePod(*fresh);
  if (!pod) return std::move(pod).error();
  const EnvoyVerdict again = envoyRestartVerdict(*pod, clock_.wallNow(), o_.not_ready_for);
  if (pod->uid != chosen->uid || !again.restart) {
    result.summary = what + " changed since the cache saw it; looking again";
    result.requeue_after = milliseconds(0);
    return result;
  }
  if (!o_.effects.leaderFresh()) {
    return Error(what + ": not restarted: this agent's leadership is not fresh",
                 ErrorCode::kUnavailable);
  }
  auto removed = client_.remove(kube::resources::kPods, o_.ns, chosen->name,
                                {.grace_period_seconds = 0, .precondition_uid = chosen->uid});
  if (!removed && removed.error().code() != ErrorCode::kNotFound) {
    return std::move(removed).error().wrap("delete " + what);
  }
  last_restart_ = mono;
  base::logWarn("restarted envoy pod", {{"pod", what}, {"reason", again.reason}});
  o_.effects.event({.involved_resource = kube::resources::kPods,
                    .involved_namespace = o_.ns,
                    .involved_name = chosen->name,
                    .involved_uid = chosen->uid,
                    .reason = "EnvoyPodRestarted",
                    .message = "ekco force-deleted the pod: " + again.reason,
                    .type = "Warning"});
  o_.effects.count("envoy_pod_restarted");
  {
    std::lock_guard lock(mu_);
    history_.push_back(
        {{"pod", what}, {"at", kube::formatRfc3339(clock_.wallNow())}, {"reason", again.reason}});
    if (history_.size() > kHistory) history_.erase(history_.begin());
  }
  result.summary = "restarted " + what;
  if (due > 1) {
    result.requeue_after = std::min(result.requeue_after.value_or(o_.spacing), o_.spacing);
  }
  return result;
}

json EnvoyRestarts::status() const {
  std::lock_guard lock(mu_);
  return {{"namespace", o_.ns},
          {"pods", pods_},
          {"last_restart", history_.empty() ? json(nullptr) : history_.back()},
          {"history", history_}};
}

WatchSpec envoyPodsWatch() {
  return {.key = "envoy-pods",
          .scope = Scope::kLeader,
          .build = informerWatch<kube::Pod>([](const WatchContext& c) {
            // Full pods (container states and conditions), but only Envoy's.
            return InformerSource<kube::Pod>{.resource = kube::resources::kPods,
                                             .ns = c.config.contour_namespace,
                                             .label_selector = "app=envoy",
                                             .project = kube::parsePod,
                                             .label = "envoy-pods",
                                             .what = "envoy pod cache"};
          })};
}

ControllerSpec envoyRestartsSpec() {
  return {
      .name = "envoy-restarts",
      .scope = Scope::kLeader,
      .status_key = "envoy_restarts",
      .enabled =
          [](const Config& c) {
            return c.restart_failed_envoy_pods && !c.contour_namespace.empty();
          },
      .watches = {envoyPodsWatch()},
      .pauses_in_maintenance = true,  // force-deletes pods
      .build = [](const ControllerDeps& d) -> Result<std::shared_ptr<Controller>> {
        auto pods = observeWatch<kube::Pod>(d.watches, envoyPodsWatch());
        if (!pods) return std::move(pods).error();
        return std::make_shared<EnvoyRestarts>(
            [observe = std::move(*pods)] {
              auto seen = observe();
              return ObservedPods{.synced = seen.synced, .pods = std::move(seen.items)};
            },
            d.client, d.clock,
            EnvoyRestartsOptions{
                .ns = d.config.contour_namespace,
                .not_ready_for = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    d.config.envoy_pods_not_ready_duration),
                .effects = d.effects()});
      },
  };
}

}  // namespace ekco::agent
