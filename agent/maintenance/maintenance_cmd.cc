#include "agent/maintenance/maintenance_cmd.h"

#include <CLI/CLI.hpp>
#include <ostream>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/maintenance/maintenance.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/strings.h"
#include "kube/json_fields.h"

namespace ekco::agent {

namespace {

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

}  // namespace

CLI::App* MaintenanceCli::parsed() {
  for (auto [app, name] :
       {std::pair{on, "on"}, std::pair{off, "off"}, std::pair{status, "status"}}) {
    if (app != nullptr && app->parsed()) {
      args.action = name;
      return app;
    }
  }
  return nullptr;
}

namespace {

void addMaintenanceCommands(CLI::App& app, MaintenanceCli& c) {
  auto* m = app.add_subcommand(
      "maintenance",
      "Maintenance mode: every agent's cluster-changing controllers pause (clearing, purging, "
      "scaling, certificate secrets, CSR approval); stored in the cluster");
  m->require_subcommand(1);
  c.on = m->add_subcommand("on", "Turn maintenance mode on (again: replaces reason and expiry)");
  c.on->add_option("--reason", c.args.reason, "Why (shown in status, Events and logs)");
  c.on->add_option("--for", c.args.duration,
                   "End by itself after this long (Go syntax: 30m, 2h); default: until "
                   "`ekco maintenance off`");
  c.off = m->add_subcommand("off", "Turn maintenance mode off: the paused controllers resume");
  c.status =
      m->add_subcommand("status", "Print whether maintenance mode is on, why and until when");
  c.status->add_flag("--json", c.args.json, "Print it as JSON");
  for (CLI::App* sub : {c.on, c.off, c.status}) {
    sub->add_option("--config", c.config,
                    "Config file, for leader_election_namespace (default /etc/ekco/config.yaml)");
    sub->add_option("--kubeconfig", c.args.kubeconfig,
                    "kubeconfig (default: KUBECONFIG, in-cluster, then the host's "
                    "/etc/kubernetes/admin.conf)");
    sub->add_option("--host-root", c.args.host_root, "Where the host's / is (default /)");
  }
}

}  // namespace

int runMaintenanceCommand(const Config& config, const MaintenanceArgs& args, const CliEnv& env) {
  std::optional<std::chrono::seconds> duration;
  if (!args.duration.empty()) {
    auto d = base::parseDuration(args.duration);
    if (!d || *d < std::chrono::seconds(1)) {
      *env.err << "error: --for " << base::quoteForMessage(args.duration)
               << ": want a duration of at least 1s, such as 30m or 2h\n";
      return kExitUsage;
    }
    if (*d > kMaxMaintenanceDuration) {
      *env.err << "error: --for " << base::quoteForMessage(args.duration) << ": at most "
               << base::formatDuration(kMaxMaintenanceDuration)
               << " (a year); leave --for out to stay on until `ekco maintenance off`\n";
      return kExitUsage;
    }
    duration = std::chrono::duration_cast<std::chrono::seconds>(*d);
  }
  base::SystemClock clock;
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = args.host_root.empty() ? "/" : args.host_root,
           .kubeconfig = args.kubeconfig,
           .connect_timeout = std::chrono::seconds(10),
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30),
                                           .reporting_instance = hostName()}},
          env.environment, clock);
      !built) {
    *env.err << "error: " << built.error().message() << "\n";
    return kExitFailure;
  }
  const std::string& ns = config.leader_election_namespace;
  // "ekco maintenance on (host node-a)": the command and where it ran.
  const std::string by =
      "ekco maintenance " + args.action + (hostName().empty() ? "" : " (host " + hostName() + ")");
  if (args.action == "on") {
    auto state = enterMaintenance(*c.client, ns,
                                  {.reason = args.reason, .duration = duration, .by = by}, clock);
    if (!state) {
      *env.err << "error: " << state.error().message() << "\n";
      return kExitFailure;
    }
    *env.out << "maintenance mode " << describeMaintenance(*state, clock.wallNow()) << "\n";
    return kExitOk;
  }
  if (args.action == "off") {
    auto was = leaveMaintenance(*c.client, ns, by);
    if (!was) {
      *env.err << "error: " << was.error().message() << "\n";
      return kExitFailure;
    }
    *env.out << (*was ? "maintenance mode off\n" : "maintenance mode was already off\n");
    return kExitOk;
  }
  auto state = readMaintenance(*c.client, ns);
  if (!state) {
    *env.err << "error: " << state.error().message() << "\n";
    return kExitFailure;
  }
  if (args.json) {
    *env.out << kube::jsonDump(maintenanceJson(*state, clock.wallNow()), 2) << "\n";
  } else {
    *env.out << "maintenance mode " << describeMaintenance(*state, clock.wallNow()) << "\n";
  }
  return kExitOk;
}

namespace {

class MaintenanceCommands final : public Command {
 public:
  void add(CLI::App& root) override { addMaintenanceCommands(root, c_); }
  bool parsed() const override {
    return c_.on->parsed() || c_.off->parsed() || c_.status->parsed();
  }
  int run(const std::string& log_level, const CliEnv& env) override {
    (void)c_.parsed();  // sets args.action
    auto config = hostCommandConfig(c_.config, nullptr, nullptr, log_level, c_.args.kubeconfig,
                                    c_.args.host_root, env);
    if (!config) return kExitUsage;
    return runMaintenanceCommand(*config, c_.args, env);
  }

 private:
  MaintenanceCli c_{};
};

}  // namespace

std::unique_ptr<Command> maintenanceCommands() { return std::make_unique<MaintenanceCommands>(); }

}  // namespace ekco::agent
