#include "agent/features/upgrade/upgrade_cmd.h"

#include <ostream>

#include <CLI/CLI.hpp>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "base/clock.h"
#include "base/os/process.h"
#include "base/strings.h"
#include "kube/transport/curl_transport.h"

namespace ekco::agent {

using base::Error;

int runUpgradeCommand(const Config& config, const UpgradeArgs& args, const CliEnv& env) {
  UpgradeOptions options;
  options.url = args.url.empty() ? config.auto_upgrade_url : args.url;
  options.state_dir = args.state_dir;
  options.dry_run = args.dry_run;
  options.progress_interval = args.progress_interval;
  options.maintenance_namespace = config.leader_election_namespace;
  const bool allow_http = args.allow_http || config.auto_upgrade_allow_http;
  if (!options.url.empty()) {
    const bool from_flag = !args.url.empty();
    if (std::string why =
            kube::urlProblem(options.url, allow_http,
                             from_flag ? "accept plain http with --allow-http"
                                       : "accept plain http with auto_upgrade_allow_http: true");
        !why.empty()) {
      *env.err << "error: " << (from_flag ? "--url " : "auto_upgrade_url ")
               << base::quoteForMessage(options.url) << ": " << why << "\n";
      return kExitUsage;
    }
  }
  if (options.state_dir.empty() || options.state_dir.front() != '/') {
    *env.err << "error: --state-dir: want an absolute path (got "
             << base::quoteForMessage(options.state_dir) << ")\n";
    return kExitUsage;
  }
  const std::string host_root = args.host_root.empty() ? "/" : args.host_root;
  if (host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got "
             << base::quoteForMessage(host_root) << ")\n";
    return kExitUsage;
  }
  if (options.url.empty()) {  // before anything that needs a kubeconfig or the network
    *env.out << "auto-upgrade is not configured (auto_upgrade_url is empty and --url was not "
                "given); nothing to do\n";
    return kExitOk;
  }

  base::SystemClock clock;
  const auto fail = [&](const Error& e) {
    *env.err << "error: " << e.message() << "\n";
    return kExitFailure;
  };
  // The API is only asked when an upgrade is due, but the kubeconfig is read up front.
  CommandClient c;
  if (auto built = buildCommandClient(
          c,
          {.host_root = host_root,
           .kubeconfig = args.kubeconfig,
           .connect_timeout = std::chrono::seconds(10),
           .rest = kube::RestClientOptions{.request_timeout = std::chrono::seconds(30)}},
          env.environment, clock);
      !built) {
    return fail(built.error());
  }
  auto http = makeHttpFetcher(HttpFetchOptions{.allow_http = allow_http}, clock);
  base::BoostProcessRunner runner(clock);

  auto outcome = runUpgrade(
      options,
      UpgradeDeps{
          .fs = *c.host_fs, .http = *http, .kube = *c.client, .runner = runner, .clock = clock});
  if (!outcome) return fail(outcome.error());
  *env.out << outcome->message << "\n";
  return kExitOk;
}

namespace {

class UpgradeCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ =
        root.add_subcommand("upgrade",
                            "Auto-upgrade (ekco-upgrade.timer): re-run the kURL installer when its "
                            "X-Kurl-Hash changed (single-node clusters only)");
    setExitStatus(app_,
                  "0 upgraded, or nothing to do (no URL, up to date, the first run, another "
                  "run holds the lock, more than one node, maintenance mode); 1 the check, "
                  "the download or the installer failed; 2 a bad flag or config");
    app_->add_option("--config", config_,
                     "Config file (default /etc/ekco/config.yaml; absent means all defaults)");
    app_->add_option("--url", args_.url,
                     "Installer URL (default: auto_upgrade_url from the config)");
    app_->add_option("--state-dir", args_.state_dir,
                     "Host directory of upgrades.txt and upgrade.lock (default /var/lib/ekco)");
    app_->add_option("--kubeconfig", args_.kubeconfig,
                     "kubeconfig, to count the nodes (default: KUBECONFIG, in-cluster, then the "
                     "host's /etc/kubernetes/admin.conf and kubelet.conf)");
    app_->add_option("--host-root", args_.host_root, "Where the host's / is (default /)");
    app_->add_flag("--allow-http", args_.allow_http,
                   "Accept a plain http:// URL, whose download is not verified (default: "
                   "auto_upgrade_allow_http from the config)");
    app_->add_flag("--dry-run", args_.dry_run,
                   "Check and report what would be done; write nothing, never run the installer");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    // No per-key flags: the file and the environment (auto_upgrade_url, log_level).
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    return runUpgradeCommand(*config, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  UpgradeArgs args_{};
};

}  // namespace

std::unique_ptr<Command> upgradeCommand() { return std::make_unique<UpgradeCommand>(); }

}  // namespace ekco::agent
