// The API server address commands of `ekco` (EKCO's, issue 37 part 1):
//   ekco set-kubeconfig-server --server URL [--admin]   this node's kubeconfigs pointed at URL
//                                                       and kubelet restarted, verified
//                                                       (set_kubeconfig_server.h)
// (`ekco regen-cert`, the apiserver certificate's names, is the certificates feature's:
// agent/features/certs/certs_cmd.h.)
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/config/config.h"

#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"

namespace ekco::agent {

struct SetKubeconfigServerArgs {
  std::string server{};
  bool admin = false;
  std::string host_root = "/";
  std::string node_name{};  // default NODE_NAME, then the host name
  bool dry_run = false;
  bool verify = true;  // --no-verify: the restart job's success is enough
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
};

// Exit codes: 0 when the kubeconfigs point at the server (now, or already) and kubelet works
// through it; 1 when a step failed (the previous files restored, kubelet restarted with them);
// 2 for a bad flag or a file that is not a kubeconfig (nothing changed).
int runSetKubeconfigServerCommand(const SetKubeconfigServerArgs& args, const CliEnv& env);

std::unique_ptr<Command> setKubeconfigServerCommand();

struct ChangeLoadBalancerArgs {
  std::string server{};
  bool internal = false;
  std::vector<std::string> exclude{};
  bool drop_old_sans = false;
  bool dry_run = false;
  std::string host_root = "/";
  std::string kubeconfig{};
  std::chrono::milliseconds timeout{std::chrono::hours(1)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
};

// `ekco change-load-balancer --server URL [--internal] [--exclude NODE]... [--drop-old-sans]
// [--dry-run]` on a primary (admin.conf): records the request (ConfigMap ekco-api-address; the
// agents carry it out: change.h), prints each step as the leader reports it, and ends with
// `Result: success` (exit 0) or `Result: <reason>` (exit 1), as EKCO's did (kURL reads that
// line). A request under way for the same server is followed, not restarted. Exit 2: a bad
// flag, --internal without enable_internal_load_balancer, or another change under way.
int runChangeLoadBalancerCommand(const Config& config, const ChangeLoadBalancerArgs& args,
                                 const CliEnv& env);

std::unique_ptr<Command> changeLoadBalancerCommand();

}  // namespace ekco::agent
