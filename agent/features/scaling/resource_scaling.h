// Auto resource scaling (leader controller `resource-scaling`, config `auto_resource_scaling`,
// on by default as EKCO's ReconcilePrometheus was always on; ../shared/reference/ekco.md §3.10).
// kURL installs Prometheus `monitoring/k8s` and Alertmanager `monitoring/prometheus-alertmanager`
// with replica counts that need several nodes, so on a cluster still joining they stay unready
// and health checks report false failures. This controller keeps
//   spec.replicas = min(cap, nodes)      cap 2 for Prometheus, 3 for Alertmanager
// as nodes join and leave (every Node counts, ready or not, as in EKCO). A missing custom
// resource (no monitoring add-on) is skipped silently; one the RBAC does not let ekco read (a
// DaemonSet install without deploy-monitoring/) is shown in /status and warned about once.
//
// Beyond EKCO:
//   - A count set by hand above the cap is left alone (EKCO overwrote it with the cap).
//   - The change is a JSON patch that first tests metadata.resourceVersion against what was
//     read, so a person's concurrent edit is never overwritten: the API refuses the patch
//     (kInvalidArgument) and the next pass, a second later, decides on the new object.
//   - The leader's fencing check (is_leader_fresh) is asked right before each patch.
//   - dry_run: the plan is shown in /status and logged once per change, nothing is patched.
//   - Each change is logged with its reason and recorded as an Event on the resource (Scaled).
//
// Woken by every change of the cluster node cache; also runs every `interval` (the config's
// reconcile_interval), which finds a monitoring add-on installed after the nodes settled.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/policy/node_watches.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/resource.h"

namespace ekco::agent {

// One scaled resource: the custom resource and its replica cap.
struct ScaledResource {
  kube::Resource resource{};
  std::string ns{};
  std::string name{};
  std::int64_t cap = 1;
};

// Prometheus monitoring/k8s (cap 2) and Alertmanager monitoring/prometheus-alertmanager (cap 3).
std::vector<ScaledResource> kurlMonitoringResources();

// The replica count to set, or nullopt to leave `current` alone: min(cap, nodes); nothing when
// there are no nodes, when `current` is already that, or when `current` is above the cap (set by
// hand).
std::optional<std::int64_t> desiredReplicas(std::int64_t current, std::int64_t nodes,
                                            std::int64_t cap);

struct ResourceScalingOptions {
  std::vector<ScaledResource> targets = kurlMonitoringResources();
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class ResourceScalingController : public Controller {
 public:
  static constexpr std::chrono::seconds kAfterConflict{1};

  ResourceScalingController(std::function<ObservedNodes()> observe, kube::KubeClient& client,
                            ResourceScalingOptions options);

  std::string name() const override { return "resource-scaling"; }
  base::Result<ReconcileResult> reconcile() override;
  // For /status: each target's replicas as last read, what was decided, the last changes.
  nlohmann::json status() const override;

 private:
  struct Outcome {
    std::string line;       // for the summary / plan
    bool changed = false;   // patched (or, in a dry run, would be)
    bool conflict = false;  // the object changed between the read and the patch
  };
  base::Result<Outcome> scale(const ScaledResource& target, std::int64_t nodes);

  std::function<ObservedNodes()> observe_;
  kube::KubeClient& client_;
  ResourceScalingOptions options_;
  std::set<std::string> planned_;           // dry run: plans already logged
  std::set<std::string> forbidden_warned_;  // targets the RBAC does not let us read (warned)

  mutable std::mutex mu_;
  nlohmann::json targets_status_ = nlohmann::json::object();
  std::vector<nlohmann::json> history_;
};

ControllerSpec resourceScalingSpec();

}  // namespace ekco::agent
