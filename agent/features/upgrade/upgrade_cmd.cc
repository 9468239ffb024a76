#include "agent/features/upgrade/upgrade_cmd.h"

#include <ostream>

#include "agent/edge/command_env.h"
#include "base/clock.h"
#include "base/process.h"
#include "base/strings.h"
#include "kube/curl_transport.h"

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

}  // namespace ekco::agent
