// `ekco purge-node NAME` (also run as `ekco-purge-node`): the manual purge of a node, straight
// against the API (admin.conf on a primary), not through `kubectl exec` into an operator pod as
// EKCO's script did. The steps and guards are agent/purge.h's:
//   1. the guards (EKCO's refusal: a Ready target when its role's ready count is at or below
//      the minimum; never the node this command runs on);
//   2. the plan, printed (which OSDs, which etcd member, through which endpoints): --dry-run
//      stops here with exit 0;
//   3. a confirmation when stdin is a terminal and --yes is absent (a purged node cannot rejoin
//      as it is: it must be reset with `kubeadm reset` first);
//   4. the guards again, then the purge; each step's result is printed, and an Event is recorded
//      on the Node for each step.
// Exit codes: 0 purged (or planned), 1 refused or failed (the Node stays and the purge can be run
// again), 2 bad usage or config.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"

namespace ekco::agent {

struct PurgeNodeArgs {
  std::string node{};           // the node to purge (positional)
  std::string kubeconfig{};     // --kubeconfig
  std::string host_root = "/";  // where certificates_dir is (--host-root)
  std::string self{};           // --node-name: this host's node (default NODE_NAME, host name)
  bool dry_run = false;
  bool yes = false;
  // Reads the answer to the confirmation; tests replace it. Empty: stdin.
  std::function<bool()> stdin_is_terminal{};
  std::function<std::string()> read_answer{};
};

int runPurgeNodeCommand(const Config& config, const PurgeNodeArgs& args, const CliEnv& env);

// `ekco purge-node`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> purgeNodeCommand();

}  // namespace ekco::agent
