// `ekco upgrade`: the command line of kURL's auto-upgrade (the procedure is
// agent/features/upgrade/upgrade.h), run by ekco-upgrade.timer.
#pragma once

#include <memory>

#include <chrono>
#include <string>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"
#include "agent/features/upgrade/upgrade.h"

namespace ekco::agent {

struct UpgradeArgs {
  std::string url{};  // --url; "" = auto_upgrade_url from the config
  std::string state_dir = std::string(kDefaultUpgradeStateDir);
  std::string kubeconfig{};
  std::string host_root = "/";
  bool allow_http = false;  // --allow-http, or auto_upgrade_allow_http in the config
  bool dry_run = false;
  // A "waiting for the installer" line after this long without installer output (no flag).
  std::chrono::milliseconds progress_interval = UpgradeOptions{}.progress_interval;
};

// Exit codes: 0 when nothing was due, the run was skipped (no URL, locked, multi-node), the hash
// was seeded or the upgrade succeeded; 1 on failure (one `error:` line, plus the installer's last
// lines when it failed); 2 for a bad flag (--url not an https URL, or http without --allow-http
// or auto_upgrade_allow_http; --state-dir or --host-root not absolute).
int runUpgradeCommand(const Config& config, const UpgradeArgs& args, const CliEnv& env);

// `ekco upgrade`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> upgradeCommand();

}  // namespace ekco::agent
