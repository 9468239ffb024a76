// `ekco maintenance on [--reason TEXT] [--for DURATION] | off | status [--json]`: maintenance
// mode (agent/maintenance/maintenance.h), stored in the ConfigMap ekco-maintenance in the
// leader-election namespace, so every agent pauses its cluster-changing controllers.
#pragma once

#include <string>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"

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

// What the flags parse into (CLI11 keeps pointers into it).
struct MaintenanceCli {
  CLI::App* on = nullptr;
  CLI::App* off = nullptr;
  CLI::App* status = nullptr;
  std::string config{};
  MaintenanceArgs args{};
  // The subcommand parsed, with args.action set; nullptr when none of them was.
  CLI::App* parsed();
};
void addMaintenanceCommands(CLI::App& app, MaintenanceCli& c);

}  // namespace ekco::agent
