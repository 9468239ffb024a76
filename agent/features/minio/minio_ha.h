// MinIO HA (leader controller `minio-ha`, config `enable_ha_minio`, `minio_namespace`;
// ../shared/reference/ekco.md §3.11). kURL installs MinIO as a single-replica Deployment `minio`
// (PVC `minio-pv-claim`) and, with OpenEBS local PV, a StatefulSet `ha-minio` at 0 replicas whose
// annotation `kurl.sh/desired-scale` says how many it should run once the cluster has the nodes.
//
// While at least three nodes are Ready and an OpenEBS local PV StorageClass (provisioner
// openebs.io/local) exists:
//   - ha-minio is scaled to its desired scale through the scale subresource (as EKCO);
//   - while the Deployment `minio` exists and ha-minio answers 200 on /minio/health/cluster, its
//     data is migrated, one step per pass, each step recorded in the storage migration state
//     (agent/policy/storage_migration.h) before the next, so a new leader resumes it:
//       (1) stopping-writes: the Service `minio`'s selector (recorded first) is replaced by
//           {"doesnotexist": "doesnotexist"}, as EKCO does: MinIO is offline from here;
//       (2) copying: every bucket and object from the old pod (app=minio) to an ha-minio pod,
//           over S3 with the keys of Secret `minio-credentials`
// (agent/features/minio/minio_migration.h),
//           in passes of at most `copy_budget`, the progress kept in the state;
//       (3) verifying: every bucket; every object's size and MD5 compared (an ETag that is not
//           an MD5, a multipart upload's, is compared through the MD5 this agent computed while
//           copying the object, or by reading it again; never by size alone). A difference
//           restores the Service's recorded selector, marks the state failed with the reason
//           (Warning Event MinioMigrationFailed, /status) and deletes nothing;
//       (4) switching: the Service's selector becomes {"app": "ha-minio"}: MinIO is back;
//       (5) cleaning-up: the Deployment `minio` and PVC `minio-pv-claim` are deleted, and the
//           state with them (Event MinioMigrationCompleted, with the offline window).
//   - With no migration under way and ha-minio unhealthy, a Service left disabled is restored
//     (EKCO's "make sure the Service isn't left disabled").
//   - Once the Deployment `minio` is gone, ha-minio is at its desired scale and healthy, and no
//     storage migration state exists, its pods are rebalanced over the nodes, at most one pod
//     (its PVC, then it) per pass (agent/features/minio/minio_rebalance.h).
// A failed migration is not retried by itself: the old MinIO serves again, and deleting the
// ConfigMap kurl/ekco-storage-migration retries it.
//
// Every step honours --dry-run (the plan only), asks is_leader_fresh right before it acts, and
// is an Event on the object it changes and a line in /status.
//
// Maintenance mode pauses the controller, except for the window in which MinIO is offline
// (phases stopping-writes to switching), which is closed rather than left open for as long as
// maintenance lasts (windowToClose(); the manager runs it while paused). While maintenance is on
// a run does only that, fenced by the leadership alone (is_leader_fresh_to_close):
//   - stopping-writes, copying, verifying: rolled back. The Service gets its recorded selector
//     again (the old MinIO, whose data no write reached since writes stopped), the state is
//     cleared (re-read first: still that attempt), Warning Event MinioMigrationRolledBack. What
//     was copied stays on ha-minio; the migration starts again once maintenance ends.
//   - switching (verified): finished: the Service selects ha-minio (Event
//     MinioMigrationSwitchedInMaintenance); deleting the old MinIO (cleaning-up) waits for the
//     end of maintenance.
// Until its first run the controller does not know the state, so it runs once even in
// maintenance, to read it.
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
#include "agent/features/minio/minio_migration.h"
#include "agent/features/minio/minio_plan.h"
#include "agent/features/minio/minio_rebalance.h"
#include "agent/policy/node_watches.h"
#include "agent/policy/storage_migration.h"
#include "base/clock.h"
#include "kube/client.h"
#include "s3/client.h"

namespace ekco::agent {

// "10.32.0.7:9000" of a Running pod with an IP: its first container's first port (9000 when it
// declares none); "" when the pod does not qualify.
std::string podS3Host(const nlohmann::json& pod);

struct MinioHaOptions {
  std::string ns = "minio";
  std::string migration_namespace = "kurl";  // the storage migration state's
  std::chrono::milliseconds interval{std::chrono::minutes(1)};
  // One copying pass's length: the leader's other controllers wait for it.
  std::chrono::milliseconds copy_budget{std::chrono::seconds(10)};
  std::size_t checkpoint_every = 100;
  std::string tmp_dir = "/tmp";
  // Maintenance mode (false while it is on or not yet read) and the leader fencing without it,
  // for closing the offline window while paused (ControllerDeps).
  std::function<bool()> may_act{};
  std::function<bool()> is_leader_fresh_to_close{};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

class MinioHa final : public Controller {
 public:
  MinioHa(std::function<ObservedNodes()> observe, kube::KubeClient& client,
          const base::Clock& clock, MinioHaOptions options);
  std::string name() const override { return "minio-ha"; }
  base::Result<ReconcileResult> reconcile() override;
  nlohmann::json status() const override;
  std::string windowToClose() const override;

 private:
  // One pass: what it sees (observe), the step planMinio (minio_plan.h) decides, carried out.
  base::Result<MinioView> observe();
  base::Result<ReconcileResult> apply(const MinioPlan& plan, const MinioView& view);
  base::Result<ReconcileResult> startMigration(const MinioPlan& plan, const MinioView& view);
  base::Result<ReconcileResult> migrate(StorageMigrationState state);
  // Maintenance mode is on: close the offline window (roll back or finish), nothing else.
  base::Result<ReconcileResult> closeWindow(const StorageMigrationState& state);
  base::Result<ReconcileResult> rollBack(const StorageMigrationState& state);
  void noteWindow(const StorageMigrationState& state);
  base::Result<std::optional<s3::Endpoint>> endpoint(const std::string& selector,
                                                     bool healthy_only);
  base::Result<s3::Credentials> credentials();
  base::Result<bool> storageClassPresent();
  base::Status scale(std::int64_t want);
  base::Status setSelector(const nlohmann::json& selector, const std::string& why);
  base::Result<StorageMigrationState> save(const StorageMigrationState& current,
                                           std::map<std::string, std::string> data);
  base::Status fresh(const std::string& what) const;
  void event(const kube::Resource& r, const std::string& name, const std::string& reason,
             const std::string& message, bool warning = false);
  void remember(const std::string& decision, const StorageMigrationState& state,
                nlohmann::json rebalance = nullptr);

  std::function<ObservedNodes()> observe_;
  kube::KubeClient& client_;
  const base::Clock& clock_;
  MinioHaOptions options_;
  std::string planned_;
  MinioRebalancer rebalancer_;
  // The MD5s this agent computed while copying objects whose ETag is not one, for the
  // migration attempt started at `digests_started_` (its state's `started`); verification
  // reads again what is not here (another leader copied it). Only reconcile() touches them.
  CopyDigests digests_;
  std::string digests_started_;

  // closeWindow() is running: fence with is_leader_fresh_to_close. Only reconcile() touches it.
  bool closing_ = false;

  mutable std::mutex mu_;
  nlohmann::json status_ = nullptr;
  // windowToClose(): set from every state read or written.
  std::string window_ = "the MinIO migration's state is not read yet";
};

ControllerSpec minioHaSpec();

}  // namespace ekco::agent
