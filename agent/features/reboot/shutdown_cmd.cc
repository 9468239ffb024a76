#include "agent/features/reboot/shutdown_cmd.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <thread>

#include <CLI/CLI.hpp>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/features/reboot/shutdown_beacon.h"
#include "agent/features/reboot/shutdown_drain.h"
#include "base/log/log.h"
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

// True when the agent drained this node in this boot (the stop job has nothing to do). While an
// agent of this boot is draining, waits for it, at most kStopJobWaitForAgent: never two drains
// at once.
bool agentDrained(const hostfs::HostFs& host_fs, const base::Clock& clock,
                  const std::string& node_name) {
  auto boot_id = readBootId(host_fs);
  const std::string boot = boot_id ? *boot_id : std::string();
  const auto deadline = clock.monoNow() + kStopJobWaitForAgent;
  bool logged_wait = false;
  for (;;) {
    auto marker = readShutdownMarker(host_fs);
    if (!marker) {
      base::logWarn("shutdown: cannot read the agent's drain marker; draining here",
                    {{"error", marker.error()}});
      return false;
    }
    bool alive = false;
    if (*marker && (*marker)->state == DrainState::kDraining) {
      auto proc = host_fs.exists("/proc/" + std::to_string((*marker)->pid));
      alive = proc && *proc;
    }
    switch (stopJobAction(*marker, boot, alive)) {
      case StopJobAction::kSkip:
        base::logInfo(
            "shutdown: the agent drained this node at PrepareForShutdown (logind's inhibitor "
            "lock); nothing to do",
            {{"node", node_name}});
        return true;
      case StopJobAction::kDrain:
        return false;
      case StopJobAction::kWait:
        if (clock.monoNow() >= deadline) {
          base::logWarn("shutdown: the agent's drain did not end in time; draining here",
                        {{"node", node_name}, {"waited", kStopJobWaitForAgent}});
          return false;
        }
        if (!logged_wait) {
          base::logInfo("shutdown: waiting for the agent's drain",
                        {{"node", node_name}, {"agent_pid", static_cast<long>((*marker)->pid)}});
          logged_wait = true;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
        break;
    }
  }
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
  // The agent may have drained already, holding logind's inhibitor
  // (agent/features/reboot/shutdown_drain.h).
  if (!args.dry_run && agentDrained(*c.host_fs, clock, node_name)) return kExitOk;
  if (auto built = buildClient(c, args, node_name, env, clock); !built) {
    *env.err << "error: shutdown: " << built.error().message() << "\n";
    return kExitFailure;
  }
  RebootStepReport report =
      drainNodeForShutdown(*c.client, *c.host_fs, clock, config, node_name, args.dry_run);
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

namespace {

// `ekco shutdown` and `ekco startup` (ekco-reboot.service's ExecStop and ExecStart).
class RebootCommands final : public Command {
 public:
  void add(CLI::App& root) override {
    for (auto [cli, name, help] :
         {std::tuple{&shutdown_, "shutdown",
                     "Before a reboot: cordon this node, delete its pods (not in "
                     "shutdown_excluded_namespaces), wait for PVC/CephFS unmounts (bounded), "
                     "delete its rook-ceph operator/mds pods"},
          std::tuple{&startup_, "startup",
                     "After a reboot: wait for the API (bounded), uncordon this node if ekco "
                     "shutdown cordoned it"}}) {
      cli->app = root.add_subcommand(name, help);
      cli->app->add_option(
          "--config", cli->config,
          "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
      cli->app->add_option("--kubeconfig", cli->args.kubeconfig,
                           "kubeconfig (default: KUBECONFIG, then the host's "
                           "/etc/kubernetes/admin.conf and kubelet.conf)");
      cli->app->add_option("--node-name", cli->args.node_name,
                           "This node's name (default: NODE_NAME, then the host name)");
      cli->app->add_option("--host-root", cli->args.host_root, "Where the host's / is (default /)");
      cli->app->add_flag("--dry-run", cli->args.dry_run, "Log what would be done, change nothing");
      addConfigFlags(cli->app, cli->flags);
    }
    setExitStatus(shutdown_.app,
                  "0 every step succeeded; 1 a step failed (the others were done); 2 a bad "
                  "config or node name");
    setExitStatus(startup_.app,
                  "0 uncordoned, nothing to do, or the node never joined; 1 the API stayed "
                  "unreachable or a patch failed; 2 a bad config or node name");
  }
  bool parsed() const override { return shutdown_.app->parsed() || startup_.app->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    const bool is_shutdown = shutdown_.app->parsed();
    const One& c = is_shutdown ? shutdown_ : startup_;
    auto config = hostCommandConfig(c.config, c.app, &c.flags, log_level, c.args.kubeconfig,
                                    c.args.host_root, env);
    if (!config) return kExitUsage;
    return is_shutdown ? runShutdownCommand(*config, c.args, env)
                       : runStartupCommand(*config, c.args, env);
  }

 private:
  struct One {
    std::string config{};
    FlagValues flags{};
    ShutdownArgs args{};
    CLI::App* app = nullptr;
  };
  One shutdown_{};
  One startup_{};
};

}  // namespace

std::unique_ptr<Command> rebootCommands() { return std::make_unique<RebootCommands>(); }

}  // namespace ekco::agent
