// `ekco shutdown` and `ekco startup`: the commands ekco-reboot.service runs; the procedures
// themselves are agent/features/reboot/reboot.h.
#pragma once

#include <memory>
#include <string>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"
#include "agent/features/reboot/reboot.h"

namespace ekco::agent {

struct ShutdownArgs {
  std::string kubeconfig{};  // --kubeconfig ("" = the usual search, kube/transport/kubeconfig.h)
  std::string node_name{};   // --node-name
  std::string host_root = "/";
  bool dry_run = false;
};
using StartupArgs = ShutdownArgs;

// The commands: resolve the node name, open the host root, load the kubeconfig, build the
// client and run the core above. Exit 0 when every step succeeded, 1 when one failed (each
// failure is one "error: " line on env.err), 2 for a bad node name.
int runShutdownCommand(const Config& config, const ShutdownArgs& args, const CliEnv& env);
int runStartupCommand(const Config& config, const StartupArgs& args, const CliEnv& env);

// `ekco shutdown` and `ekco startup`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> rebootCommands();

}  // namespace ekco::agent
