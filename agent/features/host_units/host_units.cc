#include "agent/features/host_units/host_units.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/log/log.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

bool isUnit(const std::string& path) {
  return path.rfind(std::string(units::kSystemdUnitDir) + "/", 0) == 0;
}

std::string baseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string join(const std::set<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

units::HostUnitsOptions hostUnitsOptions(const Config& config, const std::string& bin) {
  const auto secs = [](base::Duration d) {
    return std::chrono::duration_cast<std::chrono::seconds>(d) + std::chrono::minutes(1);
  };
  return {.bin = bin,
          .reboot_service = !config.disable_reboot_service,
          .upgrade_schedule = config.auto_upgrade_schedule,
          .startup_bound = secs(config.startup_api_timeout),
          .shutdown_bound = secs(config.shutdown_unmount_timeout)};
}

HostUnitsController::HostUnitsController(hostfs::HostFs& fs, SystemdConnector connect,
                                         HostUnitsControllerOptions options)
    : fs_(fs), connect_(std::move(connect)), options_(std::move(options)) {}

base::Result<units::SystemdManager*> HostUnitsController::manager() {
  if (!manager_) {
    auto connected = connect_();
    if (!connected) return std::move(connected).error();
    manager_ = std::move(*connected);
  }
  return manager_.get();
}

base::Result<ReconcileResult> HostUnitsController::reconcile() {
  ReconcileResult result{.requeue_after = options_.interval};
  // Units run the host's ekco; without one (an agent in a pod on a host without the package)
  // there is nothing they could run.
  auto bin = fs_.exists(options_.units.bin);
  if (!bin) return std::move(bin).error();
  if (!*bin) {
    std::lock_guard lock(mu_);
    problem_ =
        fmt::format("{} is not on the host: systemd units not installed", options_.units.bin);
    result.summary = "skipped: " + problem_;
    return result;
  }
  auto files = units::renderHostUnits(options_.units);
  if (!files) return std::move(files).error();

  std::set<std::string> wanted;
  for (const auto& f : *files) wanted.insert(f.path);
  std::set<std::string> changed = pending_changed_;
  std::set<std::string> removed = pending_removed_;
  std::string plan;
  for (const auto& f : *files) {
    if (options_.dry_run) {
      auto current = fs_.read(f.path);
      if (!current || *current != f.content) plan += "write " + f.path + "\n";
      continue;
    }
    EKCO_TRY(fs_.makeDirs(std::filesystem::path(f.path).parent_path().string(), 0755));
    auto written = fs_.write(f.path, f.content, {.mode = f.mode});
    if (!written) return std::move(written).error();
    if (*written == hostfs::Changed::kYes) {
      base::logInfo("host file written", {{"path", fs_.realPath(f.path)}});
      if (isUnit(f.path)) changed.insert(baseName(f.path));
    }
  }
  for (const std::string& path : units::managedUnitPaths()) {
    if (wanted.count(path) != 0) continue;
    auto exists = fs_.exists(path);
    if (!exists) return std::move(exists).error();
    if (*exists && isUnit(path)) removed.insert(baseName(path));
  }
  if (options_.dry_run) {
    for (const auto& name : removed) plan += "disable and remove " + name + "\n";
    if (!changed.empty() || !removed.empty()) plan += "daemon-reload\n";
    result.plan = plan;
    result.summary = plan.empty() ? "up to date" : "dry run: would change units";
    return result;
  }

  std::string summary;
  if (!changed.empty() || !removed.empty()) {
    pending_changed_ = changed;
    pending_removed_ = removed;
    auto applied = applyToSystemd(changed, removed, summary);
    if (!applied) {
      std::lock_guard lock(mu_);
      problem_ = applied.error().message();
      manager_.reset();  // reconnect next time
      return applied.error();
    }
    pending_changed_.clear();
    pending_removed_.clear();
  }
  refreshStatus(*files);
  result.summary = summary.empty() ? "units up to date" : summary;
  return result;
}

base::Status HostUnitsController::applyToSystemd(const std::set<std::string>& changed,
                                                 const std::set<std::string>& removed,
                                                 std::string& summary) {
  auto mgr = manager();
  if (!mgr) return mgr.error().wrap("systemd");
  units::SystemdManager& systemd = **mgr;
  // Going away: the timer is stopped and disabled; the reboot service only disabled, never
  // stopped (its stop job is `ekco shutdown`, which drains the node).
  if (!removed.empty()) {
    if (removed.count(std::string(units::kUpgradeTimer)) != 0) {
      auto stopped = systemd.stopUnit(std::string(units::kUpgradeTimer), options_.start_timeout);
      if (!stopped && stopped.error().code() != ErrorCode::kNotFound) return stopped;
    }
    auto disabled = systemd.disableUnitFiles({removed.begin(), removed.end()});
    if (!disabled) return disabled.error().wrap("disable " + join(removed));
    for (const auto& name : removed) EKCO_TRY(fs_.remove(units::unitPath(name)));
    base::logInfo("systemd units removed", {{"units", join(removed)}});
    summary += "removed " + join(removed) + "; ";
  }
  EKCO_TRY(systemd.reload());
  base::logInfo("systemd reloaded", {{"changed", join(changed)}, {"removed", join(removed)}});
  // Enabled and started right after they were (re)written: the reboot service must be active
  // for its ExecStop to run at shutdown; the timer must be active to fire.
  for (const std::string& name :
       {std::string(units::kRebootService), std::string(units::kUpgradeTimer)}) {
    const bool timer = name == units::kUpgradeTimer;
    const bool touched = changed.count(name) != 0 ||
                         (timer && changed.count(std::string(units::kUpgradeService)) != 0);
    if (!touched) continue;
    auto enabled = systemd.enableUnitFiles({name});
    if (!enabled) return enabled.error().wrap("enable " + name);
    auto state = systemd.unitState(name);
    if (!state) return state.error().wrap(name);
    if (state->active_state != "active") {
      EKCO_TRY(systemd.startUnit(name, options_.start_timeout));
      base::logInfo("systemd unit started", {{"unit", name}});
    }
    summary += "enabled " + name + "; ";
  }
  if (!summary.empty()) summary.erase(summary.size() - 2);
  return base::ok();
}

void HostUnitsController::refreshStatus(const std::vector<units::RenderedFile>& files) {
  json list = json::array();
  std::string problem;
  auto mgr = manager();
  for (const auto& f : files) {
    if (!isUnit(f.path)) continue;
    const std::string name = baseName(f.path);
    json entry = {{"name", name}};
    if (mgr) {
      auto state = (*mgr)->unitState(name);
      if (state) {
        entry["file_state"] = state->unit_file_state;
        entry["active_state"] = state->active_state;
      } else if (problem.empty()) {
        problem = state.error().message();
      }
      if (name == units::kUpgradeTimer) {
        auto timer = (*mgr)->timerState(name);
        if (timer && timer->next_elapse_realtime_usec) {
          entry["next_elapse_usec"] = *timer->next_elapse_realtime_usec;
        }
      }
    }
    list.push_back(std::move(entry));
  }
  if (!mgr) problem = mgr.error().message();
  if (!problem.empty()) manager_.reset();
  std::lock_guard lock(mu_);
  units_ = std::move(list);
  problem_ = problem;
}

json HostUnitsController::status() const {
  std::lock_guard lock(mu_);
  return {{"bin", options_.units.bin}, {"units", units_}, {"problem", problem_}};
}

ControllerSpec hostUnitsSpec() {
  return {.name = "host-units",
          .scope = Scope::kNode,
          .status_key = "host_units",
          .enabled = [](const Config&) { return true; },
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            // The node's systemd units (ekco-reboot.service, ekco-upgrade.timer), over the
            // host's bus.
            return std::make_shared<HostUnitsController>(
                d.host_fs,
                [root = d.host_root, &clock = d.clock] {
                  return units::connectSystemd(units::systemBusAddress(root), clock);
                },
                HostUnitsControllerOptions{.units = hostUnitsOptions(d.config, d.units_bin),
                                           .dry_run = d.dry_run});
          }};
}

}  // namespace ekco::agent
