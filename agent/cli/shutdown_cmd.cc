#include "agent/cli/shutdown_cmd.h"

#include <algorithm>
#include <optional>
#include <ostream>

#include "agent/runtime/agent.h"
#include "agent/runtime/command_env.h"
#include "agent/tasks/shutdown_beacon.h"
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
  RebootStepReport report = shutdownNode(*c.client, *c.host_fs, clock, options);
  // The beacon says the node goes down with nothing left to lose: only once its pods were
  // deleted and its pod volumes unmounted. Otherwise the leader takes the unplanned path.
  const bool drained = std::none_of(
      report.failures.begin(), report.failures.end(),
      [](const std::string& f) { return f.starts_with("pods:") || f.starts_with("unmount:"); });
  if (!drained) {
    base::logWarn(
        "shutdown: no shutdown beacon recorded: pods or volumes may remain, so the "
        "node takes the unplanned-loss path",
        {{"node", node_name}});
  } else if (auto beacon =
                 recordShutdownBeacon(*c.client, *c.host_fs, clock, node_name, args.dry_run);
             !beacon) {
    base::logError("shutdown: step failed", {{"step", "beacon"}, {"error", beacon.error()}});
    report.failures.push_back("beacon: " + beacon.error().message());
  }
  return printFailures("shutdown", report, env);
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
  // The proof of reboot: this boot's id against the shutdown beacon's.
  auto boot_id = readBootId(*c.host_fs);
  if (boot_id) {
    options.before_uncordon = [&client = *c.client, id = *boot_id,
                               dry_run = args.dry_run](const nlohmann::json& node) {
      return settleBeaconOnStartup(client, node, id, dry_run);
    };
  }
  RebootStepReport report = startupNode(*c.client, clock, options);
  if (!boot_id) {
    base::logError("startup: step failed", {{"step", "beacon"}, {"error", boot_id.error()}});
    report.failures.push_back("beacon: " + boot_id.error().message());
  }
  return printFailures("startup", report, env);
}

}  // namespace ekco::agent
