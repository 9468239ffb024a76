#include "units/render.h"

#include <fmt/format.h>

#include "units/calendar.h"

namespace ekco::units {

namespace {

using base::Error;
using base::ErrorCode;

constexpr std::string_view kHeader =
    "# Rendered by ekco (`ekco render units` writes the same); ekco overwrites local changes.\n";

base::Status validateBin(const std::string& bin) {
  auto bad = [&](std::string_view why) {
    std::string shown;
    for (char c : bin) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        shown += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      } else {
        shown += c;
      }
    }
    return Error(fmt::format("invalid ekco binary path \"{}\": {}", shown, why),
                 ErrorCode::kInvalidArgument);
  };
  if (bin.empty() || bin.front() != '/') return bad("want an absolute path");
  for (char c : bin) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '/' || c == '.' || c == '_' || c == '+' || c == '-';
    // No space, quote, '%' (a unit specifier), '$' or '\' (expanded by systemd and the shell).
    if (!ok) return bad("only letters, digits and / . _ + - are allowed");
  }
  if (bin.find("/../") != std::string::npos || bin.ends_with("/..")) return bad("contains ..");
  return base::ok();
}

std::string wrapper(std::string_view bin, std::string_view command) {
  return fmt::format(
      "#!/bin/sh\n"
      "# Rendered by ekco; ekco overwrites local changes.\n"
      "# Kept for the documented habit of running {0} by hand before a reboot: it is\n"
      "# `ekco {1}` (see `ekco {1} --help`).\n"
      "exec {2} {1} \"$@\"\n",
      command == "shutdown" ? kShutdownScript : kStartupScript, command, bin);
}

}  // namespace

std::string unitPath(std::string_view name) {
  return std::string(kSystemdUnitDir) + "/" + std::string(name);
}

std::vector<std::string> managedUnitPaths() {
  return {std::string(kStartupScript), std::string(kShutdownScript), unitPath(kRebootService),
          unitPath(kUpgradeService), unitPath(kUpgradeTimer)};
}

base::Result<std::vector<RenderedFile>> renderHostUnits(const HostUnitsOptions& options) {
  EKCO_TRY(validateBin(options.bin));
  if (options.startup_bound.count() <= 0 || options.shutdown_bound.count() <= 0) {
    return Error("the startup and shutdown bounds must be greater than 0",
                 ErrorCode::kInvalidArgument);
  }
  std::vector<RenderedFile> files;
  files.push_back({std::string(kStartupScript), wrapper(options.bin, "startup"), 0755});
  files.push_back({std::string(kShutdownScript), wrapper(options.bin, "shutdown"), 0755});

  if (options.reboot_service) {
    const auto start_timeout = options.startup_bound + kUnitTimeoutMargin;
    const auto stop_timeout = options.shutdown_bound + kUnitTimeoutMargin;
    std::string unit(kHeader);
    unit += fmt::format(
        "[Unit]\n"
        "Description=ekco: drain this node before shutdown, uncordon it after boot\n"
        "Documentation=man:systemd.service(5)\n"
        // Started after them, so stopped before them at shutdown: the API (through kubelet's
        // credentials and the internal load balancer) and the container runtime are still up
        // while `ekco shutdown` cordons the node and waits for volumes to unmount.
        "After=network-online.target kubelet.service containerd.service docker.service\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "RemainAfterExit=yes\n"
        "ExecStart={0} startup\n"
        "ExecStop={0} shutdown\n"
        // The commands' own bounds plus a margin: systemd never kills them mid-step.
        "TimeoutStartSec={1}\n"
        "TimeoutStopSec={2}\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n",
        options.bin, start_timeout.count(), stop_timeout.count());
    files.push_back({unitPath(kRebootService), std::move(unit), 0644});
  }

  if (!options.upgrade_schedule.empty()) {
    auto spec = parseCalendar(options.upgrade_schedule);
    if (!spec) return spec.error().wrap("auto_upgrade_schedule");
    std::string service(kHeader);
    service += fmt::format(
        "[Unit]\n"
        "Description=ekco: upgrade this single-node cluster when its kURL installer changes\n"
        "Documentation=man:systemd.service(5)\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        "Type=oneshot\n"
        "ExecStart={} upgrade\n",
        options.bin);
    files.push_back({unitPath(kUpgradeService), std::move(service), 0644});
    std::string timer(kHeader);
    // The normalized form: equivalent, and free of anything but the grammar's characters.
    timer += fmt::format(
        "[Unit]\n"
        "Description=ekco: scheduled auto-upgrade check\n"
        "Documentation=man:systemd.timer(5)\n"
        "\n"
        "[Timer]\n"
        "OnCalendar={}\n"
        // A run missed while the node was off happens at the next boot.
        "Persistent=true\n"
        "Unit={}\n"
        "\n"
        "[Install]\n"
        "WantedBy=timers.target\n",
        spec->normalized(), kUpgradeService);
    files.push_back({unitPath(kUpgradeTimer), std::move(timer), 0644});
  }
  return files;
}

}  // namespace ekco::units
