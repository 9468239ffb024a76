// "A storage migration is running": one visible state in the cluster that every controller which
// must not act during one reads (kURL#4326: EKCO scaled kotsadm-rqlite in the middle of a storage
// migration). It is the ConfigMap `ekco-storage-migration` in the leader-election namespace
// (kurl), written by the migration that runs (today the minio-ha controller's MinIO data
// migration, which also keeps its progress there so that a new leader resumes it):
//
//   data:
//     migration: "minio"                  # what migrates
//     phase:     "copying"                # stopping-writes | copying | verifying | switching |
//                                         # cleaning-up | failed
//     started:   "2026-11-26T07:00:00Z"
//     ...                                 # the migration's own progress keys
//
// Present with any phase but `failed` means running. `failed` means it stopped and changed
// nothing irreversible (the old data is still there); it stays until a person deletes the
// ConfigMap, which is also how a failed migration is retried. Absent means none.
//
// Why not maintenance mode (agent/maintenance/maintenance.h): it pauses every pausable controller,
// the migration's own among them, and it is a person's switch (`ekco maintenance on`); a crashed
// migration would leave the whole cluster paused. Controllers that must not act during a
// storage migration read this ConfigMap *and* pause in maintenance mode, which covers the
// migrations ekco does not run (kURL's pvmigrate: turn maintenance mode on for it).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kStorageMigrationConfigMap = "ekco-storage-migration";

struct StorageMigrationState {
  bool present = false;
  std::string migration{};  // "minio"
  std::string phase{};
  std::string resource_version{};
  std::map<std::string, std::string> data{};

  // Present and not failed.
  bool running() const { return present && phase != "failed"; }
  // "minio migration copying", "none".
  std::string describe() const;
  std::string value(const std::string& key) const;
};

// The state the ConfigMap (or null for none) says.
StorageMigrationState parseStorageMigration(const nlohmann::json& configmap);

// Reads it from the API (not a cache): the state, or an error (kPermissionDenied when the RBAC
// does not let this agent read it).
[[nodiscard]] base::Result<StorageMigrationState> readStorageMigration(kube::KubeClient& client,
                                                                       std::string_view ns);

// Writes `data` as the whole state: creates the ConfigMap when `current` is absent, else
// replaces it conditionally on current.resource_version (kConflict when somebody changed it).
// Returns the state written.
[[nodiscard]] base::Result<StorageMigrationState> writeStorageMigration(
    kube::KubeClient& client, std::string_view ns, const StorageMigrationState& current,
    const std::map<std::string, std::string>& data);

// Deletes it (absent is fine): the migration is over.
[[nodiscard]] base::Status clearStorageMigration(kube::KubeClient& client, std::string_view ns);

}  // namespace ekco::agent
