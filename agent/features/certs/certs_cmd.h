// `ekco certs check`: the control-plane certificates of this node (agent/features/certs/certs.h),
// as
// `kubeadm certs check-expiration` shows them, with the issuer and whether ekco would renew each.
// `ekco certs renew`: renew them now (agent/features/certs/certs_renewal.h), under the disruption
// Lease, restarting and verifying as the certificates controller does, without asking.
#pragma once

#include <memory>

#include <chrono>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"
#include "base/clock.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ekco::agent {

struct CertsCheckArgs {
  std::string host_root = "/";
  bool json = false;
  // --cluster: the cluster's TLS secrets too (agent/features/certs/cluster_secrets.h), read through
  // the API.
  bool cluster = false;
  std::string kubeconfig{};
};

// Exit codes: 0 when every certificate present is readable and outside rotate_certs_ttl; 1 when
// any is inside it (or expired) or cannot be read (with --cluster: a secret ekco would renew,
// or one it cannot read); 2 for a bad flag.
int runCertsCheckCommand(const Config& config, const CertsCheckArgs& args, const CliEnv& env,
                         const base::Clock& clock);

struct CertsRenewArgs {
  std::vector<std::string> names{};  // positional; empty: every one within rotate_certs_ttl
  std::string host_root = "/";
  std::string kubeconfig{};
  std::string node_name{};  // --node-name (default NODE_NAME, then the host name)
  bool force = false;
  bool dry_run = false;
  // Tests shorten these; no flags.
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
  std::chrono::milliseconds lease_wait{std::chrono::minutes(5)};
};

// Exit codes: 0 when what was chosen was renewed and verified (or nothing was due); 1 when a
// renewal or its verification failed (the previous certificates restored), or another primary
// holds the disruption Lease past the wait; 2 for a bad flag or an unknown certificate name.
int runCertsRenewCommand(const Config& config, const CertsRenewArgs& args, const CliEnv& env);

// `ekco certs check|renew`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> certsCommands();

}  // namespace ekco::agent
