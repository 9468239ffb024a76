// Maintenance mode: while it is on, the controllers whose spec says `pauses_in_maintenance`
// (agent/controller/spec.h) change nothing in the cluster; every other reconciler (the internal
// load balancer, the reports) keeps running. It is stored in the cluster, so it holds for every
// agent and survives restarts: the ConfigMap `ekco-maintenance` in the leader-election namespace.
//
//   data:
//     reason: "storage migration"          # free text, may be empty
//     since:  "2026-11-26T07:00:00Z"       # when it was turned on
//     until:  "2026-11-26T08:00:00Z"       # optional: it ends by itself then (the expiry)
//     by:     "ekco maintenance on"        # who turned it on
//
// Present means on until `until` passes; absent means off (`ekco maintenance off` deletes it).
// A ConfigMap that cannot be read (a bad `until`) counts as on without expiry, with the problem
// as its reason: somebody asked for a pause, so ekco errs on the side of not acting.
//
// Every change made through enterMaintenance/leaveMaintenance records an Event on the ConfigMap
// (reasons MaintenanceOn, MaintenanceOff); the leading agent records MaintenanceExpired when an
// expiry passes (agent/maintenance/maintenance_watch.h).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kMaintenanceConfigMap = "ekco-maintenance";
// The longest `--for`: a year. Longer is a typo, and past about 292 years the expiry would not fit
// a nanosecond clock (it wrapped into 1727, turning maintenance off at once); leave `--for` out to
// stay on until `ekco maintenance off`.
inline constexpr std::chrono::hours kMaxMaintenanceDuration{24 * 366};

struct MaintenanceState {
  bool present = false;  // the ConfigMap exists
  std::string reason{};
  std::optional<base::WallTime> since = std::nullopt;
  std::optional<base::WallTime> until = std::nullopt;
  std::string by{};
  std::string problem{};  // why the ConfigMap could not be read as written ("" when it could)

  // On at `now`: present and its expiry (if any) not passed.
  bool activeAt(base::WallTime now) const { return present && (!until || now < *until); }
  // Present but its expiry passed.
  bool expiredAt(base::WallTime now) const { return present && until && now >= *until; }
  // "storage migration", or "no reason given".
  std::string reasonText() const;
  bool operator==(const MaintenanceState&) const = default;
};

// The state a ConfigMap (or null for none) says. Never fails: see the top of the file.
MaintenanceState parseMaintenance(const nlohmann::json& configmap);

// /status's "maintenance" object: {"on", "reason", "since", "until", "by", "expired", "problem"}.
nlohmann::json maintenanceJson(const MaintenanceState& state, base::WallTime now);

// One line for people: "on since ... (reason), until ..." / "off" / "off (expired at ...)".
std::string describeMaintenance(const MaintenanceState& state, base::WallTime now);

// Reads the ConfigMap from the API (not a cache).
[[nodiscard]] base::Result<MaintenanceState> readMaintenance(kube::KubeClient& client,
                                                             std::string_view ns);

struct EnterMaintenance {
  std::string reason{};
  std::optional<std::chrono::seconds> duration = std::nullopt;  // --for; none: until off
  std::string by{};                                             // "ekco maintenance on"
};

// Turns it on (creates or replaces the ConfigMap) and records MaintenanceOn. Returns the state
// written.
[[nodiscard]] base::Result<MaintenanceState> enterMaintenance(kube::KubeClient& client,
                                                              std::string_view ns,
                                                              const EnterMaintenance& request,
                                                              const base::Clock& clock);

// Turns it off (deletes the ConfigMap; already off is fine) and records MaintenanceOff with
// `by` in its message. Returns whether it was present.
[[nodiscard]] base::Result<bool> leaveMaintenance(kube::KubeClient& client, std::string_view ns,
                                                  const std::string& by);

// Records an Event on the ConfigMap (best effort for the caller to report).
[[nodiscard]] base::Status recordMaintenanceEvent(kube::KubeClient& client, std::string_view ns,
                                                  const std::string& reason,
                                                  const std::string& message);

}  // namespace ekco::agent
