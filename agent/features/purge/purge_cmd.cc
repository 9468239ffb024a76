#include "agent/features/purge/purge_cmd.h"

#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/features/purge/purge.h"
#include "agent/policy/node_health.h"
#include "base/log/log.h"
#include "kube/decode/records.h"
#include "kube/exec.h"
#include "kube/resource.h"

namespace ekco::agent {

namespace {

// --yes goes on. Otherwise a person must say yes on a terminal; without a terminal (a pipe, a
// script, `echo n | ekco purge-node X`) nobody can, so the purge is refused. True to go on.
bool confirmed(const PurgeNodeArgs& args, const CliEnv& env) {
  if (args.yes) return true;
  const bool terminal =
      args.stdin_is_terminal ? args.stdin_is_terminal() : ::isatty(STDIN_FILENO) == 1;
  if (!terminal) {
    *env.err << "error: purge-node: not purged: stdin is not a terminal, so nobody can confirm; "
                "pass --yes to purge without asking\n";
    return false;
  }
  *env.out << "Warning: a purged node cannot rejoin the cluster as it is; run `kubeadm reset` "
              "on it before joining it again.\n"
           << "Purge node " << args.node << "? [y/N] " << std::flush;
  std::string answer;
  if (args.read_answer) {
    answer = args.read_answer();
  } else {
    std::getline(std::cin, answer);
  }
  if (answer != "y" && answer != "Y" && answer != "yes") {
    *env.out << "Not purged.\n";
    return false;
  }
  return true;
}

}  // namespace

int runPurgeNodeCommand(const Config& config, const PurgeNodeArgs& args, const CliEnv& env) {
  std::string self = args.self;
  if (self.empty()) {
    auto resolved = resolveNodeName("", envValue(env.environment, "NODE_NAME"), hostName());
    if (resolved) self = *resolved;  // unknown: only the target's own guards apply
  }
  base::SystemClock clock;
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = args.host_root,
           .kubeconfig = args.kubeconfig,
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30),
                                           .reporting_instance = self}},
          env.environment, clock);
      !built) {
    *env.err << "error: purge-node: " << built.error().message() << "\n";
    return kExitFailure;
  }
  kube::WebSocketExecutor exec(c.connection);

  auto guard = [&]() -> std::optional<std::string> {
    auto nodes = readNodes(*c.client);
    if (!nodes) return nodes.error().message();
    return purgeRefusal({.nodes = std::move(*nodes),
                         .target = args.node,
                         .self = self,
                         .automatic = false,
                         .min_ready_master_nodes = config.min_ready_master_nodes,
                         .min_ready_worker_nodes = config.min_ready_worker_nodes});
  };
  // A refusal of the guards, with where they are explained.
  auto refuse = [&](const std::string& why) {
    *env.err << "error: purge-node: " << why << " (see docs/features/purge.md#guards)\n";
    return kExitFailure;
  };
  if (auto why = guard()) return refuse(*why);

  PurgeDeps deps{.client = *c.client, .exec = exec, .fs = *c.host_fs, .clock = clock};
  PurgeOptions options{.certificates_dir = config.certificates_dir,
                       .maintain_rook_storage_nodes = config.maintain_rook_storage_nodes,
                       .dry_run = true,
                       .allow_healthy_etcd_member = true};
  auto plan = purgeNode(deps, args.node, options);
  if (!plan) {
    *env.err << "error: purge-node: " << plan.error().message() << "\n";
    return kExitFailure;
  }
  *env.out << "Plan to purge node " << args.node << ":\n";
  for (const auto& a : plan->actions) *env.out << "  - " << a << "\n";
  for (const auto& w : plan->warnings) *env.out << "  ! " << w << "\n";
  if (args.dry_run) {
    *env.out << "Dry run: nothing was changed.\n";
    return kExitOk;
  }

  if (!confirmed(args, env)) return kExitFailure;

  // The guards again, right before acting: the cluster may have changed while we asked.
  if (auto why = guard()) return refuse(*why);
  base::logInfo("purge-node: purging", {{"node", args.node}, {"by", self.empty() ? "-" : self}});
  options.dry_run = false;
  options.event = [&](const std::string& reason, const std::string& message) {
    auto recorded = c.client->recordEvent({.involved_resource = kube::resources::kNodes,
                                           .involved_name = args.node,
                                           .reason = reason,
                                           .message = message});
    if (!recorded) base::logWarn("event not recorded", {{"error", recorded.error().message()}});
  };
  auto report = purgeNode(deps, args.node, options);
  if (!report) {
    *env.err << "error: purge-node: " << report.error().message()
             << " (the node was not deleted; fix the cause and run purge-node again)\n";
    return kExitFailure;
  }
  for (const auto& a : report->actions) *env.out << "  done: " << a << "\n";
  for (const auto& w : report->warnings) *env.out << "  warning: " << w << "\n";
  *env.out << "Node " << args.node << " purged.\n";
  return kExitOk;
}

namespace {

class PurgeNodeCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "purge-node",
        "Remove a node from the cluster for good: its Rook OSDs, its kubeadm and etcd "
        "membership, then the Node (also installed as ekco-purge-node)");
    setExitStatus(app_,
                  "0 purged (--dry-run: the plan printed); 1 refused or failed (the Node "
                  "stays: run it again); 2 bad usage or config");
    app_->add_option("NAME", args_.node, "The node to purge")->required();
    app_->add_option("--config", config_,
                     "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
    app_->add_option(
        "--kubeconfig", args_.kubeconfig,
        "kubeconfig (default: KUBECONFIG, then the host's /etc/kubernetes/admin.conf)");
    app_->add_option("--host-root", args_.host_root,
                     "Where the host's / is, for certificates_dir (default /)");
    app_->add_option(
        "--node-name", args_.self,
        "The node this runs on, never purged (default: NODE_NAME, then the host name)");
    app_->add_flag("--dry-run", args_.dry_run,
                   "Print the plan (OSDs, etcd member, endpoints) and exit 0 without changes");
    app_->add_flag("--yes,-y", args_.yes, "Do not ask for confirmation on a terminal");
    addConfigFlags(app_, flags_);
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    auto config = hostCommandConfig(config_, app_, &flags_, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    return runPurgeNodeCommand(*config, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  FlagValues flags_{};
  PurgeNodeArgs args_{};
};

}  // namespace

std::unique_ptr<Command> purgeNodeCommand() { return std::make_unique<PurgeNodeCommand>(); }

}  // namespace ekco::agent
