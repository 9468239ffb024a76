#include "agent/features/api_address/api_address_cmd.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <ostream>
#include <thread>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "agent/edge/command_config.h"
#include "agent/edge/command_env.h"
#include "agent/features/api_address/change.h"
#include "agent/features/api_address/kubeconfig_server.h"
#include "agent/features/api_address/set_kubeconfig_server.h"
#include "base/clock.h"
#include "base/duration.h"
#include "base/strings.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/objects.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "units/systemd_manager.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

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
      return api_address::kubeletWorksThrough(**fs, kubelet_conf, node, restarted_at, clock);
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
    setExitStatus(app_,
                  "0 switched, or already there; 1 failed, and every file restored; 2 bad "
                  "usage or a file that is not a kubeconfig");
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

int runChangeLoadBalancerCommand(const Config& config, const ChangeLoadBalancerArgs& args,
                                 const CliEnv& env) {
  auto usage = [&](const std::string& why) {
    *env.err << "error: change-load-balancer: " << why << "\n";
    return kExitUsage;
  };
  if (auto ok = api_address::checkServerUrl(args.server, "--server"); !ok) {
    return usage(ok.error().message());
  }
  if (args.internal && !config.enable_internal_load_balancer) {
    return usage(
        "--internal: set enable_internal_load_balancer: true first (the load balancer must run "
        "on every node before the nodes use it)");
  }
  base::SystemClock clock;
  CommandClient c;
  if (auto built = buildCommandClient(
          c, {.host_root = args.host_root, .kubeconfig = args.kubeconfig}, env.environment, clock);
      !built) {
    *env.err << "error: change-load-balancer: " << built.error().message() << "\n";
    return kExitFailure;
  }
  // The old address: this primary's kubelet.conf server.
  auto kubelet = c.host_fs->read("/etc/kubernetes/kubelet.conf");
  if (!kubelet) return usage(kubelet.error().message());
  auto servers = api_address::kubeconfigServers(*kubelet, "/etc/kubernetes/kubelet.conf");
  if (!servers) return usage(servers.error().message());
  const std::string& ns = config.leader_election_namespace;
  const std::string name(api_address::kChangeConfigMap);
  // The nodes, for the plan (and --exclude's names).
  auto listed = c.client->list(kube::resources::kNodes, "");
  if (!listed) {
    *env.err << "error: change-load-balancer: list the nodes: " << listed.error().message() << "\n";
    return kExitFailure;
  }
  std::vector<api_address::ChangeNode> nodes;
  for (const json& item : kube::jsonField(*listed, "items")) {
    auto n = kube::parseNode(item);
    if (!n) continue;
    const kube::NodeCondition* ready = n->condition("Ready");
    nodes.push_back({.name = n->name,
                     .control_plane = n->control_plane,
                     .ready = ready != nullptr && ready->status == "True"});
  }
  for (const std::string& e : args.exclude) {
    if (std::none_of(nodes.begin(), nodes.end(),
                     [&](const api_address::ChangeNode& n) { return n.name == e; })) {
      return usage("--exclude " + base::quoteForMessage(e) + ": no such node");
    }
  }
  if (args.drop_old_sans && !args.exclude.empty()) {
    return usage(
        "--drop-old-sans with --exclude: an excluded node keeps the old address, which the "
        "apiservers would no longer answer to; drop the old names later with `ekco regen-cert "
        "--drop-alt-names` on each primary, once every node has moved");
  }
  if (args.drop_old_sans &&
      api_address::serverHost(servers->front()) == api_address::serverHost(args.server)) {
    return usage("--drop-old-sans: this node's kubelet.conf already uses " + args.server +
                 ", so the old address is not known here; drop the old names with `ekco "
                 "regen-cert --drop-alt-names` on each primary");
  }
  api_address::ChangeRequest request{.server = args.server,
                                     .old_server = servers->front(),
                                     .internal = args.internal,
                                     .drop_old_sans = args.drop_old_sans,
                                     .exclude = args.exclude};
  // One change at a time; the same one is followed.
  auto existing = c.client->get(kube::resources::kConfigMaps, ns, name);
  bool follow = false;
  std::string resource_version;
  if (existing) {
    auto before = api_address::parseRequest(*existing);
    const std::string result = kube::jsonText(kube::jsonField(*existing, "data"), "result");
    resource_version = kube::jsonResourceVersion(*existing);
    if (before && result.empty()) {
      if (before->server != args.server) {
        return usage(
            fmt::format("another change, to {} (request {}), is under way; wait for "
                        "it (`ekco status`) or delete ConfigMap {}/{}",
                        before->server, before->id, ns, name));
      }
      request = *before;
      follow = true;
    }
  } else if (existing.error().code() != ErrorCode::kNotFound) {
    *env.err << "error: change-load-balancer: " << existing.error().message() << "\n";
    return kExitFailure;
  }
  *env.out << fmt::format("Moving the API address from {} to {}{}\n", request.old_server,
                          request.server, request.internal ? " (the internal load balancer)" : "");
  int i = 0;
  for (const auto& [step, node] : api_address::changeSteps(request, nodes)) {
    *env.out << fmt::format("  {}. {} {}\n", ++i, api_address::stepName(step), node);
  }
  if (args.dry_run) {
    *env.out << "Dry run: nothing was changed.\n";
    return kExitOk;
  }
  if (follow) {
    *env.out << "Following the change under way (request " << request.id << ")\n";
  } else {
    request.id = kube::formatRfc3339(clock.wallNow());
    json cm = api_address::requestConfigMap(ns, request);
    Result<json> written = Error("", ErrorCode::kUnknown);
    if (existing) {  // an ended change: replaced, at the version read
      cm["metadata"]["resourceVersion"] = resource_version;
      written = c.client->update(kube::resources::kConfigMaps, ns, cm);
    } else {
      written = c.client->create(kube::resources::kConfigMaps, ns, cm);
    }
    if (!written) {
      *env.err << "error: change-load-balancer: record the request: " << written.error().message()
               << "\n";
      *env.out << "Result: " << written.error().message() << "\n";
      return kExitFailure;
    }
  }
  // Follow the leader's progress until the result.
  const base::MonoTime deadline = clock.monoNow() + args.timeout;
  std::map<std::string, std::string> shown;  // "step node" -> the state printed
  while (true) {
    auto now_cm = c.client->get(kube::resources::kConfigMaps, ns, name);
    if (now_cm) {
      const json& data = kube::jsonField(*now_cm, "data");
      if (kube::jsonText(data, "id") != request.id) {
        *env.out << "Result: the request was replaced by another\n";
        return kExitFailure;
      }
      const json progress = json::parse(kube::jsonText(data, "progress"), nullptr, false);
      for (const json& e : kube::jsonField(progress, "steps")) {
        const std::string k = kube::jsonText(e, "step") + " " + kube::jsonText(e, "node");
        const std::string state = kube::jsonText(e, "state");
        if (state == "pending" || shown[k] == state) continue;
        shown[k] = state;
        const std::string why = kube::jsonText(e, "why");
        *env.out << fmt::format("{}: {}{}\n", k, state, why.empty() ? "" : " (" + why + ")");
      }
      const std::string result = kube::jsonText(data, "result");
      if (!result.empty()) {
        *env.out << "Result: " << result << "\n";
        return result == api_address::kSuccess ? kExitOk : kExitFailure;
      }
    } else if (now_cm.error().code() == ErrorCode::kNotFound) {
      *env.out << "Result: the request was deleted\n";
      return kExitFailure;
    }
    if (clock.monoNow() + args.poll > deadline) {
      *env.out << fmt::format(
          "Result: no result within {}; the change goes on (`ekco status` on the leader shows "
          "it)\n",
          base::formatDuration(args.timeout));
      return kExitFailure;
    }
    // Progress as it comes, also into a pipe or a file (kURL's scripts, `| tee`).
    env.out->flush();
    std::this_thread::sleep_for(args.poll);
  }
}

namespace {

class ChangeLoadBalancerCommand final : public Command {
 public:
  void add(CLI::App& root) override {
    app_ = root.add_subcommand(
        "change-load-balancer",
        "Move the cluster to another API server address (EKCO's command): every primary's "
        "apiserver certificate gains it (each re-issue under the disruption Lease), then every "
        "node's kubeconfigs point at it, one node at a time, carried out by the agents and "
        "resumed after any restart; ends with `Result: success` or `Result: <reason>`");
    setExitStatus(app_,
                  "0 Result: success; 1 Result: the reason, also when --timeout passes "
                  "first (the change goes on); 2 a bad flag, --internal without "
                  "enable_internal_load_balancer, or another change under way");
    app_->add_option("--server", args_.server, "The new address, https://HOST[:PORT]")->required();
    app_->add_flag("--internal", args_.internal,
                   "The address is the internal load balancer's (https://localhost:6444): it "
                   "must answer on each node before that node moves");
    app_->add_option("--exclude", args_.exclude, "A node left as it is (repeatable)");
    app_->add_flag("--drop-old-sans", args_.drop_old_sans,
                   "Finally drop the old address's host from the apiserver certificates (a name "
                   "the cluster itself reaches them by is kept)");
    app_->add_flag("--dry-run", args_.dry_run, "Print the steps; change nothing");
    app_->add_option("--timeout", timeout_, "How long to follow the change (default 1h)");
    addHostCommandFlags(app_, config_, args_.kubeconfig, args_.host_root,
                        "Config file (default /etc/ekco/config.yaml)");
  }
  bool parsed() const override { return app_->parsed(); }
  int run(const std::string& log_level, const CliEnv& env) override {
    auto timeout = base::parseDuration(timeout_);
    if (!timeout || *timeout <= base::Duration::zero()) {
      *env.err << "error: --timeout " << base::quoteForMessage(timeout_)
               << ": want a positive Go duration (1h)\n";
      return kExitUsage;
    }
    args_.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
    auto config = hostCommandConfig(config_, nullptr, nullptr, log_level, args_.kubeconfig,
                                    args_.host_root, env);
    if (!config) return kExitUsage;
    return runChangeLoadBalancerCommand(*config, args_, env);
  }

 private:
  CLI::App* app_ = nullptr;
  std::string config_{};
  std::string timeout_ = "1h";
  ChangeLoadBalancerArgs args_{};
};

}  // namespace

std::unique_ptr<Command> changeLoadBalancerCommand() {
  return std::make_unique<ChangeLoadBalancerCommand>();
}

}  // namespace ekco::agent
