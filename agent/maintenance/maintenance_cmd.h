// `ekco maintenance on [--reason TEXT] [--for DURATION] | off | status [--json]`: maintenance
// mode (agent/maintenance/maintenance.h), stored in the ConfigMap ekco-maintenance in the
// leader-election namespace, so every agent pauses its cluster-changing controllers.
#pragma once

#include <memory>

#include <string>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

struct MaintenanceArgs {
  std::string action{};  // "on", "off", "status"
  std::string reason{};
  std::string duration{};  // --for, Go syntax ("2h"); "" = until turned off
  bool json = false;       // status --json
  std::string kubeconfig{};
  std::string host_root = "/";
};

// Exit codes: 0 done (status: printed, whether on or off); 1 the API failed; 2 a bad flag (--for
// not a duration of at least 1s; --reason or --for on `off`/`status` is CLI11's usage error).
int runMaintenanceCommand(const Config& config, const MaintenanceArgs& args, const CliEnv& env);

// `ekco maintenance on|off|status`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> maintenanceCommands();

}  // namespace ekco::agent
