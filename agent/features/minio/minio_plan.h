// What the minio-ha controller (minio_ha.h) decides, as a pure function of what it saw: the
// view one pass reads (MinioView) in, the step it takes (MinioPlan) out. minio_ha.cc reads the
// view (observe) and carries the plan out (apply); the migration's phases, once it runs, are
// its own state machine there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/policy/node_watches.h"
#include "agent/policy/storage_migration.h"
#include "base/result.h"

namespace ekco::agent {

// The ha-minio replicas to set, or nullopt: the annotation's value when it differs from
// `current`; an absent or unreadable annotation is an error for the caller to show.
base::Result<std::optional<std::int64_t>> desiredMinioScale(const nlohmann::json& statefulset);

// The phases in which MinIO is offline (the Service selects nothing, or is about to).
bool inOfflineWindow(const StorageMigrationState& state);

// The Service minio's selector before the migration, as recorded in its state ({"app": "minio"}
// when it is missing or unreadable).
nlohmann::json recordedSelector(const StorageMigrationState& state);

// The Service selector that stops writes to MinIO during a migration (as EKCO's).
const nlohmann::json& disabledMinioSelector();

// What one pass reads, in this order; a pass stops reading once what it has decides (a field
// after that is left as it is here, and the plan does not look at it).
struct MinioView {
  bool nodes_synced = false;
  std::vector<kube::NodeRecord> nodes{};
  StorageMigrationState state{};
  bool paused = false;   // maintenance mode is on (or not yet read)
  bool dry_run = false;  // the agent's --dry-run
  std::string ns = "minio";
  std::string migration_namespace = "kurl";
  bool storage_class = false;  // an OpenEBS local PV StorageClass (openebs.io/local) exists
  std::optional<nlohmann::json> statefulset{};  // ha-minio, when it exists
  bool deployment = false;                      // the single-replica Deployment minio exists
  nlohmann::json service_selector = nullptr;    // Service minio's, read while `deployment`
  std::string healthy_host{};  // an ha-minio pod answering /minio/health/cluster 200; "" none
  // A read after ha-minio's failed (the Deployment, the Service, ha-minio's pods or the
  // credentials): the pass fails with it, after scaling ha-minio.
  std::optional<base::Error> read_error{};
};

struct MinioPlan {
  enum class Step : std::uint8_t {
    kWaitForNodes,    // the node watch has not synced
    kWait,            // nothing to do but scaling; `summary` says why
    kCloseWindow,     // maintenance mode: roll back or finish an offline migration, nothing else
    kContinue,        // a migration is under way: its next phase
    kRestoreService,  // no migration, ha-minio unhealthy: a Service left disabled selects
                      // app=minio again
    kRebalance,       // at the desired scale, healthy, no state: one rebalancing pass
    kStartMigration,  // record the Service's selector, stop writes, and go on
    kFail,            // scale, then fail the pass with view.read_error
  };
  Step step = Step::kWait;
  std::optional<std::int64_t> scale_to{};  // ha-minio's replicas to set first
  // What the pass reports (for kRebalance, kRestoreService and kFail the part before what it
  // does; for kContinue and kCloseWindow nothing: they report their own).
  std::string summary{};
  nlohmann::json rebalance = nullptr;  // /status's "rebalance" while it waits
  std::string plan{};                  // the ReconcileResult's plan (kStartMigration)
};

// The step for `view`. Errors: ha-minio's desired-scale annotation is absent or unreadable.
[[nodiscard]] base::Result<MinioPlan> planMinio(const MinioView& view);

}  // namespace ekco::agent
