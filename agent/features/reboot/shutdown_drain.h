// The node's drain before a power-off, and who runs it. Two paths can: the agent, holding
// logind's delay inhibitor lock, at PrepareForShutdown(true)
// (agent/features/reboot/shutdown_inhibitor.h), while the API, the network and the container
// runtime are surely up; and ekco-reboot.service's stop job (`ekco shutdown`), the fallback when no
// agent runs or logind is not reachable. They must never both drain at once, so the agent records
// what it is doing in a marker on the host, <host root>/run/ekco/shutdown-drain (tmpfs: gone at the
// next boot), one line:
//   draining pid=<agent pid> boot_id=<boot id>
//   drained boot_id=<boot id>        every step succeeded
//   failed boot_id=<boot id>         a step failed (the stop job runs the procedure again)
// and `ekco shutdown` reads it first (stopJobAction): drained in this boot -> nothing to do;
// draining by a live agent in this boot -> wait for it (bounded); anything else -> drain.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "agent/config/config.h"
#include "agent/features/reboot/reboot.h"
#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kShutdownMarkerPath = "/run/ekco/shutdown-drain";
// How long the stop job waits for a draining agent. systemd stops ekco-agent.service (SIGTERM,
// TimeoutStopSec=30s, then SIGKILL) while it runs the stop job, so a drain that outlives logind's
// delay ends, or its agent dies, within this.
inline constexpr std::chrono::seconds kStopJobWaitForAgent{60};

// The whole procedure of `ekco shutdown`: shutdownNode's steps, then the shutdown beacon when the
// pods were deleted and the volumes unmounted (agent/features/reboot/shutdown_beacon.h). Logs each
// step.
RebootStepReport drainNodeForShutdown(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                                      const base::Clock& clock, const Config& config,
                                      const std::string& node_name, bool dry_run);

enum class DrainState { kDraining, kDrained, kFailed };

struct ShutdownMarker {
  DrainState state = DrainState::kDraining;
  long pid = 0;  // kDraining only
  std::string boot_id{};

  friend bool operator==(const ShutdownMarker&, const ShutdownMarker&) = default;
};

// One line with a trailing newline, as above.
std::string formatShutdownMarker(const ShutdownMarker& marker);
// nullopt for anything but a well-formed line (a torn or foreign file drains again).
std::optional<ShutdownMarker> parseShutdownMarker(std::string_view text);

base::Status writeShutdownMarker(hostfs::HostFs& host_fs, const ShutdownMarker& marker);
// nullopt when there is none (or it cannot be parsed).
base::Result<std::optional<ShutdownMarker>> readShutdownMarker(const hostfs::HostFs& host_fs);
base::Status removeShutdownMarker(hostfs::HostFs& host_fs);

enum class StopJobAction { kDrain, kSkip, kWait };

// What `ekco shutdown` does about a marker: kSkip when the agent drained in this boot, kWait when
// an agent of this boot is draining and alive, else kDrain (no marker, an older boot's, a failed
// drain, a dead agent, an unknown boot id).
StopJobAction stopJobAction(const std::optional<ShutdownMarker>& marker, std::string_view boot_id,
                            bool pid_alive);

}  // namespace ekco::agent
