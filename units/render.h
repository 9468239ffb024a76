// The host files of the node's systemd integration, rendered from values (pure: no I/O, no
// clock). What the agent installs and what `ekco render units` writes are the same bytes.
//
//   /etc/systemd/system/ekco-reboot.service   ExecStart=<bin> startup, ExecStop=<bin> shutdown
//                                             (unless disable_reboot_service)
//   /opt/ekco/startup.sh, /opt/ekco/shutdown.sh   thin wrappers: the docs tell operators to run
//                                             /opt/ekco/shutdown.sh by hand before a reboot
//   /etc/systemd/system/ekco-upgrade.service  ExecStart=<bin> upgrade      (only with a schedule)
//   /etc/systemd/system/ekco-upgrade.timer    OnCalendar=<schedule>, Persistent=true
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::units {

inline constexpr std::string_view kSystemdUnitDir = "/etc/systemd/system";
inline constexpr std::string_view kRebootService = "ekco-reboot.service";
inline constexpr std::string_view kUpgradeService = "ekco-upgrade.service";
inline constexpr std::string_view kUpgradeTimer = "ekco-upgrade.timer";
inline constexpr std::string_view kStartupScript = "/opt/ekco/startup.sh";
inline constexpr std::string_view kShutdownScript = "/opt/ekco/shutdown.sh";

struct HostUnitsOptions {
  // The ekco binary on the host (ExecStart, the wrappers). Absolute, and only characters that
  // need no quoting in a unit file or a shell script.
  std::string bin = "/usr/bin/ekco";
  bool reboot_service = true;  // !disable_reboot_service
  // auto_upgrade_schedule: a systemd calendar event; empty: no upgrade units.
  std::string upgrade_schedule{};
  // How long `ekco startup` / `ekco shutdown` may take at most (their own bounds); the units'
  // TimeoutStartSec/TimeoutStopSec add a margin so systemd never kills them mid-step.
  std::chrono::seconds startup_bound{std::chrono::minutes(10)};
  std::chrono::seconds shutdown_bound{std::chrono::minutes(5)};
};

// The margin added to the bounds in TimeoutStartSec/TimeoutStopSec.
inline constexpr std::chrono::seconds kUnitTimeoutMargin{60};

struct RenderedFile {
  std::string path{};  // host path
  std::string content{};
  std::uint32_t mode = 0644;

  friend bool operator==(const RenderedFile&, const RenderedFile&) = default;
};

// Every file for these options, in a fixed order (wrappers, reboot service, upgrade units).
// Errors (kInvalidArgument, one line naming the value): a bin path that is not absolute or has a
// character outside [A-Za-z0-9/._+-]; an invalid calendar event; a zero bound.
[[nodiscard]] base::Result<std::vector<RenderedFile>> renderHostUnits(
    const HostUnitsOptions& options);

// The host paths ekco manages, whether or not the options render them (so a caller can remove
// the ones no longer wanted).
std::vector<std::string> managedUnitPaths();

// "/etc/systemd/system/<name>".
std::string unitPath(std::string_view name);

}  // namespace ekco::units
