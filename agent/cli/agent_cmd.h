// `ekco agent`: resolves the node name, blocks SIGTERM/SIGINT into a waiter thread, creates and
// runs the Agent (agent/daemon.h). cli.cc parses the flags and the config, then calls this.
#pragma once

#include <string>

#include "agent/cli/cli.h"
#include "agent/runtime/agent.h"

namespace ekco::agent {

struct AgentCommandArgs {
  std::string kubeconfig{};
  std::string node_name{};  // --node-name
  std::string host_root = "/";
  std::string socket{};  // --socket ("" = <host-root><health_socket>)
  bool dry_run = false;
};

// Exit codes: 0 after SIGTERM/SIGINT and a clean stop; 1 when the agent cannot start (no
// kubeconfig, another agent on the socket, ...), with a one-line error on env.err.
int runAgentCommand(const Config& config, const std::string& config_source,
                    const AgentCommandArgs& args, const CliEnv& env);

}  // namespace ekco::agent
