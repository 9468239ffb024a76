#include "agent/features/api_address/api_address_cmd.h"

#include <CLI/CLI.hpp>

#include <ostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "agent/edge/command_env.h"
#include "agent/features/api_address/kubeconfig_server.h"
#include "agent/features/api_address/set_kubeconfig_server.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/objects.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "units/systemd_manager.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

// Through the kubeconfig at `path` (the new kubelet.conf): the node's heartbeat Lease renewed
// after `since` and the Node Ready.
base::Status kubeletWorksThrough(const hostfs::HostFs& fs, const std::string& path,
                                 const std::string& node, base::WallTime since,
                                 const base::Clock& clock) {
  auto connection = kube::loadKubeconfig(fs, path, {}, /*token_file_readable_later=*/false);
  if (!connection) return std::move(connection).error();
  auto transport = kube::CurlTransport::create(*connection, nullptr, clock,
                                               {.connect_timeout = std::chrono::seconds(5)});
  if (!transport) return std::move(transport).error();
  kube::RestClient client(**transport, clock,
                          kube::RestClientOptions{.request_timeout = std::chrono::seconds(10)});
  auto lease = client.get(kube::resources::kLeases, "kube-node-lease", node);
  if (!lease) return std::move(lease).error().wrap("read kube-node-lease/" + node);
  auto parsed = kube::parseLease(*lease);
  if (!parsed) return std::move(parsed).error();
  if (!parsed->renew_time || *parsed->renew_time < since) {
    return Error(fmt::format("kubelet has not renewed kube-node-lease/{} since its restart", node),
                 ErrorCode::kUnavailable);
  }
  auto got = client.get(kube::resources::kNodes, "", node);
  if (!got) return std::move(got).error().wrap("read Node " + node);
  auto n = kube::parseNode(*got);
  if (!n) return std::move(n).error();
  const kube::NodeCondition* ready = n->condition("Ready");
  if (ready == nullptr || ready->status != "True") {
    return Error(fmt::format("Node {} is not Ready", node), ErrorCode::kUnavailable);
  }
  return base::ok();
}

}  // namespace

int runSetKubeconfigServerCommand(const SetKubeconfigServerArgs& args, const CliEnv& env) {
  if (args.host_root.empty() || args.host_root.front() != '/') {
    *env.err << "error: --host-root: want an absolute path (got " << args.host_root << ")\n";
    return kExitUsage;
  }
  if (auto ok = api_address::checkServerUrl(args.server, "--server"); !ok) {
    *env.err << "error: set-kubeconfig-server: " << ok.error().message() << "\n";
    return kExitUsage;
  }
  std::string node = args.node_name;
  if (node.empty() && args.verify && !args.dry_run) {
    auto resolved = resolveNodeName("", envValue(env.environment, "NODE_NAME"), hostName());
    if (!resolved) {
      *env.err << "error: set-kubeconfig-server: " << resolved.error().message() << "\n";
      return kExitUsage;
    }
    node = *resolved;
  }
  base::SystemClock clock;
  auto fs = hostfs::LocalHostFs::open(args.host_root, clock);
  if (!fs) {
    *env.err << "error: set-kubeconfig-server: " << fs.error().message() << "\n";
    return kExitFailure;
  }
  std::unique_ptr<units::SystemdManager> systemd;
  if (!args.dry_run) {
    auto connected = units::connectSystemd(units::systemBusAddress(args.host_root), clock);
    if (!connected) {
      *env.err << "error: set-kubeconfig-server: " << connected.error().message() << "\n";
      return kExitFailure;
    }
    systemd = std::move(*connected);
  }
  const std::string kubelet_conf = "/etc/kubernetes/kubelet.conf";
  api_address::KubeconfigSwitchDeps deps{.fs = **fs, .clock = clock, .systemd = systemd.get()};
  if (args.verify) {
    deps.verify = [&](base::WallTime restarted_at) {
      return kubeletWorksThrough(**fs, kubelet_conf, node, restarted_at, clock);
    };
  }
  auto report = api_address::switchKubeconfigServer({.server = args.server,
                                                     .admin = args.admin,
                                                     .dry_run = args.dry_run,
                                                     .now = clock.wallNow(),
                                                     .verify_timeout = args.verify_timeout,
                                                     .poll = args.poll},
                                                    deps);
  if (!report) {
    *env.err << "error: set-kubeconfig-server: " << report.error().message() << "\n";
    const ErrorCode code = report.error().code();
    return code == ErrorCode::kParse || code == ErrorCode::kInvalidArgument ? kExitUsage
                                                                            : kExitFailure;
  }
  for (const std::string& line : report->lines) *env.out << line << "\n";
  if (args.dry_run) *env.out << "Dry run: nothing was changed.\n";
  return kExitOk;
}

namespace {

class SetKubeconfigServerCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "set-kubeconfig-server",
        "Point this node's kubelet.conf (and, with --admin, admin.conf and the component "
        "kubeconfigs that use the same address) at another API server address, restart "
        "kubelet and verify it works through it; restore everything if not (EKCO's command)");
    app_->add_option("--server", args_.server, "The new address, https://HOST[:PORT]")->required();
    app_->add_flag("--admin", args_.admin,
                   "A control-plane node: admin.conf, super-admin.conf, controller-manager.conf "
                   "and scheduler.conf too, where they point at kubelet.conf's old address");
    app_->add_option("--host-root", args_.host_root, "Where the host's / is (default /)");
    app_->add_option("--host-etc-dir", host_etc_dir_,
                     "EKCO's flag: the host's /etc (DIR/kubernetes is used); as --host-root "
                     "DIR/..");
    app_->add_option("--node-name", args_.node_name,
                     "This node's name, for the verification (default: NODE_NAME, then the "
                     "host name)");
    app_->add_flag("--dry-run", args_.dry_run, "Say what would change; change nothing");
    app_->add_flag("!--no-verify", args_.verify,
                   "Do not wait for this node's kubelet to renew its Lease through the new "
                   "address");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string&, const CliEnv& env) override {
    if (!host_etc_dir_.empty()) {
      if (host_etc_dir_.size() < 4 || !host_etc_dir_.ends_with("/etc")) {
        *env.err << "error: --host-etc-dir: want a directory named etc (got " << host_etc_dir_
                 << ")\n";
        return kExitUsage;
      }
      args_.host_root = host_etc_dir_.substr(0, host_etc_dir_.size() - 4);
      if (args_.host_root.empty()) args_.host_root = "/";
    }
    return runSetKubeconfigServerCommand(args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string host_etc_dir_{};
  SetKubeconfigServerArgs args_{};
};

}  // namespace

std::unique_ptr<Command> setKubeconfigServerCommand() {
  return std::make_unique<SetKubeconfigServerCommand>();
}

}  // namespace ekco::agent
