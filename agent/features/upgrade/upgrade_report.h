// How `ekco upgrade` shows itself in the cluster (issue 19): maintenance mode for the duration of
// an upgrade (agent/maintenance/maintenance.h), and phase Events on the Node being upgraded, source
// and reporting component "ekco", so `kubectl get events --field-selector source=ekco` and
// `kubectl describe node` tell the story of the last upgrade:
//   UpgradeCheck     an upgrade is due: the recorded and the new installer hash
//   UpgradeStarted   maintenance mode is on, the installer runs
//   UpgradeComplete  the installer exited 0, the hash is recorded
//   UpgradeFailed    (Warning) the download or the installer failed: its exit status and hash
// Maintenance mode is left on success and on failure; after a crash its expiry ends it
// (installer_timeout + kill grace + kUpgradeMaintenanceMargin after it began).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "agent/maintenance/maintenance.h"
#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::chrono::minutes kUpgradeMaintenanceMargin{10};
inline constexpr std::string_view kUpgradeMaintenanceBy = "ekco upgrade";

class UpgradeReporter {
 public:
  // `ns`: the leader-election namespace (ekco-maintenance's); `node`: the Events' object.
  UpgradeReporter(kube::KubeClient& kube, const base::Clock& clock, std::string ns,
                  std::string node);

  // Best effort: a failure is logged, never fails the upgrade.
  void event(const std::string& reason, const std::string& message,
             const std::string& type = "Normal");

  // The maintenance mode somebody else turned on (an operator's pause), or nullopt: an
  // upgrade does not run into it. A pause left by a crashed `ekco upgrade` does not count.
  [[nodiscard]] base::Result<std::optional<MaintenanceState>> foreignMaintenance();
  // Turns maintenance mode on for the upgrade, ending by itself after `expiry`.
  [[nodiscard]] base::Status enter(const std::string& reason, std::chrono::seconds expiry);
  // Turns it off again if enter() turned it on (best effort, logged).
  void leave();

 private:
  kube::KubeClient& kube_;
  const base::Clock& clock_;
  std::string ns_;
  std::string node_;
  bool entered_ = false;
};

}  // namespace ekco::agent
