// `ekco job run [--selector SEL] [--name NAME] [--host-path DIR] [--timeout DUR] [--wait] -- CMD
// ARGS...` creates a HostJob (agent/features/host_jobs/host_job_spec.h); `ekco job status NAME
// [--json]` shows it node by node. Both with the usual --config/--kubeconfig/--host-root.
#pragma once

#include <memory>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"
#include "base/result.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

struct JobArgs {
  std::string action{};  // "run", "status"
  std::string name{};
  std::string selector{};  // label-selector syntax, turned into nodeSelectorTerms
  std::string host_path{};
  std::string timeout{};
  bool wait = false;
  bool json = false;
  std::vector<std::string> command{};
  std::string kubeconfig{};
  std::string host_root = "/";
  std::chrono::milliseconds poll{500};  // --wait's (no flag)
};

// Exit codes: run: 0 created (with --wait: completed and no node failed), 1 API failure (or a
// node failed), 2 bad usage. status: 0 no node failed or was rejected (so far), 1 one did, or
// the HostJob cannot be read.
int runJobCommand(const Config& config, const JobArgs& args, const CliEnv& env);

// "node-role.kubernetes.io/worker=true,!node-role.kubernetes.io/control-plane,zone in (a,b)"
// -> one nodeSelectorTerm's matchExpressions (JSON); an error names the bad part.
base::Result<nlohmann::json> selectorToTerms(const std::string& selector);
// `ekco job run|status`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> jobCommands();

}  // namespace ekco::agent
