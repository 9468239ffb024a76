// kotsadm HA (leader controller `kotsadm-ha`, config `enable_ha_kotsadm`;
// ../shared/reference/ekco.md §3.12). kURL installs kotsadm's rqlite as the StatefulSet
// default/kotsadm-rqlite with one replica and `-bootstrap-expect=1`; once three nodes are Ready
// it can run as a three-member raft cluster:
//   spec.replicas = 3, and container[0]'s `-bootstrap-expect...` argument = `-bootstrap-expect=3`.
// Never scaled down (a count above 3 set by hand stays, and its bootstrap-expect is not lowered);
// a no-op when the StatefulSet is absent (no kotsadm) or already so.
//
// Never while a storage migration runs (kURL#4326: EKCO scaled kotsadm-rqlite in the middle of
// one): the controller pauses in maintenance mode, and it reads the storage migration state
// (agent/policy/storage_migration.h) from the API right before it patches.
//
// Beyond EKCO: the patch tests metadata.resourceVersion (a concurrent edit is never
// overwritten), the leader's fencing check is asked right before it, --dry-run shows the plan,
// and each change is logged and recorded as an Event (Scaled) on the StatefulSet.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/controller/controller.h"
#include "agent/controller/effects.h"
#include "agent/controller/spec.h"
#include "agent/policy/node_watches.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::int64_t kKotsadmRqliteReplicas = 3;

// Ready as EKCO counts it (pkg/util/node.go): the Ready condition is True (cordoned nodes count).
std::int64_t countReadyNodes(const std::vector<kube::NodeRecord>& nodes);

// What to do with the StatefulSet: nullopt when nothing (fewer than three Ready nodes, or already
// at least three replicas with bootstrap-expect at least 3).
struct RqlitePlan {
  std::int64_t replicas_from = 1;
  std::int64_t replicas_to = 3;
  std::vector<std::string> args_from{};
  std::vector<std::string> args_to{};
  bool args_changed = false;
};
std::optional<RqlitePlan> planKotsadmRqlite(const nlohmann::json& statefulset,
                                            std::int64_t ready_nodes);

struct KotsadmHaOptions {
  std::string ns = "default";
  std::string name = "kotsadm-rqlite";
  std::string migration_namespace = "kurl";  // where the storage migration state lives
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class KotsadmHa final : public Controller {
 public:
  KotsadmHa(std::function<ObservedNodes()> observe, kube::KubeClient& client,
            KotsadmHaOptions options);
  std::string name() const override { return "kotsadm-ha"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;

 private:
  std::function<ObservedNodes()> observe_;
  kube::KubeClient& client_;
  KotsadmHaOptions options_;
  std::string planned_;  // dry run: the plan last logged

  mutable std::mutex mu_;
  nlohmann::json last_ = nullptr;
};

ControllerSpec kotsadmHaSpec();

}  // namespace ekco::agent
