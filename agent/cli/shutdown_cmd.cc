#include "agent/cli/shutdown_cmd.h"

#include <optional>
#include <ostream>

#include "agent/runtime/agent.h"
#include "agent/runtime/command_env.h"
#include "base/log.h"
#include "kube/rest_client.h"

namespace ekco::agent {

namespace {

// The host's filesystems and the API client, as `ekco agent` builds them (agent/daemon.cc).
// Short attempts and one retry: a step's worst case stays ~10 s, so the bounds hold.
base::Status buildClient(CommandClient& out, const ShutdownArgs& args, const std::string& node,
                         const CliEnv& env, const base::Clock& clock) {
  kube::RestClientOptions rest;
  rest.request_timeout = std::chrono::seconds(5);
  rest.retry.max_attempts = 2;
  rest.reporting_instance = node;
  return buildCommandClient(out, {.kubeconfig = args.kubeconfig, .rest = std::move(rest)},
                            env.environment, clock);
}

// The start of both commands: this node's name and the host root. An exit code (after the
// one-line error) when either is not usable.
std::optional<int> prepare(std::string_view command, const ShutdownArgs& args, const CliEnv& env,
                           const base::Clock& clock, std::string& node, CommandClient& c) {
  auto resolved =
      resolveNodeName(args.node_name, envValue(env.environment, "NODE_NAME"), hostName());
  if (!resolved) {
    *env.err << "error: " << resolved.error().message() << "\n";
    return kExitUsage;
  }
  node = *resolved;
  auto host_fs = openHostRoot(args.host_root, clock);
  if (!host_fs) {
    *env.err << "error: " << command << ": " << host_fs.error().message() << "\n";
    return kExitFailure;
  }
  c.host_fs = std::move(*host_fs);
  return std::nullopt;
}

int printFailures(std::string_view command, const RebootStepReport& report, const CliEnv& env) {
  for (const std::string& f : report.failures) {
    *env.err << "error: " << command << ": " << f << "\n";
  }
  return report.ok() ? kExitOk : kExitFailure;
}

}  // namespace

int runShutdownCommand(const Config& config, const ShutdownArgs& args, const CliEnv& env) {
  base::SystemClock clock;
  CommandClient c;
  std::string node_name;
  if (auto code = prepare("shutdown", args, env, clock, node_name, c)) return *code;
  if (auto built = buildClient(c, args, node_name, env, clock); !built) {
    *env.err << "error: shutdown: " << built.error().message() << "\n";
    return kExitFailure;
  }
  ShutdownOptions options;
  options.node_name = node_name;
  options.excluded_namespaces = config.shutdown_excluded_namespaces;
  options.unmount_timeout = config.shutdown_unmount_timeout;
  options.dry_run = args.dry_run;
  return printFailures("shutdown", shutdownNode(*c.client, *c.host_fs, clock, options), env);
}

int runStartupCommand(const Config& config, const StartupArgs& args, const CliEnv& env) {
  base::SystemClock clock;
  CommandClient c;
  std::string node_name;
  if (auto code = prepare("startup", args, env, clock, node_name, c)) return *code;
  auto joined = nodeJoined(*c.host_fs);
  if (!joined) {
    *env.err << "error: startup: " << joined.error().message() << "\n";
    return kExitFailure;
  }
  if (!*joined) {
    base::logInfo(
        "startup: the node never joined a cluster (no /etc/kubernetes/kubelet.conf); "
        "nothing to do",
        {{"node", node_name}});
    return kExitOk;
  }
  if (auto built = buildClient(c, args, node_name, env, clock); !built) {
    *env.err << "error: startup: " << built.error().message() << "\n";
    return kExitFailure;
  }
  StartupOptions options;
  options.node_name = node_name;
  options.api_timeout = config.startup_api_timeout;
  options.dry_run = args.dry_run;
  return printFailures("startup", startupNode(*c.client, clock, options), env);
}

}  // namespace ekco::agent
