// The node's systemd units, kept by its agent (node controller "host-units"): the files of
// units/render.h written through HostFs, and systemd told over sd-bus (daemon-reload, enable,
// start) only when a file changed.
//
// Safety rules, because ekco-reboot.service's ExecStop drains the node:
//   - the agent never stops ekco-reboot.service (disabling it removes the file and the enable
//     symlink; the unit loaded in systemd keeps its stop job until the next boot);
//   - it starts a unit only right after installing or changing it (or when that failed and is
//     being retried), never because it looks inactive: during a system shutdown systemd stops
//     ekco-reboot.service, and starting it again then would run `ekco startup` and uncordon.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "agent/config/config.h"
#include "agent/controller/controller.h"
#include "agent/controller/spec.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "units/render.h"
#include "units/systemd_manager.h"

namespace ekco::agent {

// What the agent installs for this config (the same for `ekco render units`): the startup and
// shutdown bounds are the commands' own (startup_api_timeout, shutdown_unmount_timeout) plus a
// minute for their API calls.
units::HostUnitsOptions hostUnitsOptions(const Config& config, const std::string& bin);

struct HostUnitsControllerOptions {
  units::HostUnitsOptions units{};
  bool dry_run = false;
  // How long to wait for a start job (ekco-reboot.service runs `ekco startup`).
  std::chrono::milliseconds start_timeout{std::chrono::seconds(90)};
  // A full check (files rewritten if someone changed them) this often.
  std::chrono::milliseconds interval{std::chrono::minutes(5)};
};

using SystemdConnector = std::function<base::Result<std::unique_ptr<units::SystemdManager>>()>;

class HostUnitsController : public Controller {
 public:
  HostUnitsController(hostfs::HostFs& fs, SystemdConnector connect,
                      HostUnitsControllerOptions options);

  std::string name() const override { return "host-units"; }
  base::Result<ReconcileResult> reconcile() override;

  // For /status: each unit's file and active state, the timer's next run, the last problem.
  nlohmann::json status() const override;

 private:
  base::Result<units::SystemdManager*> manager();
  base::Status applyToSystemd(const std::set<std::string>& changed,
                              const std::set<std::string>& removed, std::string& summary);
  void refreshStatus(const std::vector<units::RenderedFile>& files);

  hostfs::HostFs& fs_;
  SystemdConnector connect_;
  HostUnitsControllerOptions options_;
  std::unique_ptr<units::SystemdManager> manager_;
  // Units whose systemd side (reload/enable/start or disable) is still owed after a failure.
  std::set<std::string> pending_changed_;
  std::set<std::string> pending_removed_;

  mutable std::mutex mu_;
  nlohmann::json units_ = nlohmann::json::array();
  std::string problem_;
};

ControllerSpec hostUnitsSpec();

}  // namespace ekco::agent
