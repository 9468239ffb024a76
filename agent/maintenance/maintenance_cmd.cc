#include "agent/maintenance/maintenance_cmd.h"

#include <CLI/CLI.hpp>
#include <ostream>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/maintenance/maintenance.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/strings.h"
#include "kube/decode/json_fields.h"

namespace ekco::agent {

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

// `ekco maintenance on|off|status`. CLI11 keeps pointers into the members; each subcommand,
// once parsed, names itself in args_.action.
class MaintenanceCommands final : public Command {
 public:
  void add(CLI::App& root) override {
    auto* m = root.add_subcommand(
        "maintenance",
        "Maintenance mode: every agent's cluster-changing controllers pause (clearing, purging, "
        "scaling, certificate secrets, CSR approval); stored in the cluster");
    m->require_subcommand(1);
    CLI::App* on =
        m->add_subcommand("on", "Turn maintenance mode on (again: replaces reason and expiry)");
    on->add_option("--reason", args_.reason, "Why (shown in status, Events and logs)");
    on->add_option("--for", args_.duration,
                   "End by itself after this long (Go syntax: 30m, 2h); default: until "
                   "`ekco maintenance off`");
    CLI::App* off =
        m->add_subcommand("off", "Turn maintenance mode off: the paused controllers resume");
    CLI::App* status =
        m->add_subcommand("status", "Print whether maintenance mode is on, why and until when");
    status->add_flag("--json", args_.json, "Print it as JSON");
    for (CLI::App* sub : {on, off, status}) {
      addHostCommandFlags(
          sub, config_, args_.kubeconfig, args_.host_root,
          "Config file, for leader_election_namespace (default /etc/ekco/config.yaml)");
      sub->callback([this, sub] { args_.action = sub->get_name(); });
    }
    setExitStatus(
        on, "0 on; 1 the API failed; 2 bad usage (--for not a Go duration from 1s to a year)");
    setExitStatus(off, "0 off; 1 the API failed; 2 bad usage");
    setExitStatus(status, "0 printed (on or off); 1 the API failed; 2 bad usage");
  }
  bool parsed() const override { return !args_.action.empty(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    return runMaintenanceCommand(*config, args_, env);
  }

 private:
  std::string config_{};
  MaintenanceArgs args_{};
};

}  // namespace

std::unique_ptr<Command> maintenanceCommands() { return std::make_unique<MaintenanceCommands>(); }

}  // namespace ekco::agent
