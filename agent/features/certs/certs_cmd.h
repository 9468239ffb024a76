// `ekco certs check`: the control-plane certificates of this node (agent/features/certs/certs.h),
// as
// `kubeadm certs check-expiration` shows them, with the issuer and whether ekco would renew each.
// `ekco certs renew`: renew them now (agent/features/certs/certs_renewal.h), under the disruption
// Lease, restarting and verifying as the certificates controller does, without asking.
// `ekco certs renew --cluster` and `ekco rotate-kotsadm-certs` (EKCO's name): the cluster's TLS
// secrets (agent/features/certs/cluster_secrets.h) renewed now, as the cluster-certificates
// controller renews them.
#pragma once

#include <memory>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "agent/edge/cli_env.h"
#include "agent/edge/command.h"
#include "agent/features/certs/certs.h"
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
  bool cluster = false;  // --cluster: the cluster's TLS secrets instead (runClusterRenewCommand)
  // `ekco regen-cert`: apiserver re-issued with these names added and dropped, its expiry kept
  // (names = {apiserver}, force). Nothing is done when it already has exactly those names; a
  // name the cluster itself reaches the apiserver by (kubernetes, kubernetes.default[.svc...],
  // the advertise address) is never dropped.
  std::optional<AltNameChange> alt_names{};
  std::string command = "certs renew";  // names it in messages
  // Tests shorten these; no flags.
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(3)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
  std::chrono::milliseconds lease_wait{std::chrono::minutes(5)};
};

// Exit codes: 0 when what was chosen was renewed and verified (or nothing was due); 1 when a
// renewal or its verification failed (the previous certificates restored), or another primary
// holds the disruption Lease past the wait; 2 for a bad flag or an unknown certificate name.
int runCertsRenewCommand(const Config& config, const CertsRenewArgs& args, const CliEnv& env);

struct ClusterRenewArgs {
  // kClusterSecretNames; empty: every one within the TTL (with --force: every one)
  std::vector<std::string> names{};
  std::string host_root = "/";
  std::string kubeconfig{};
  bool force = false;
  bool dry_run = false;
  std::optional<std::chrono::seconds> ttl{};      // instead of rotate_certs_ttl
  std::string command = "certs renew --cluster";  // names it in messages
};

// Renews the cluster's TLS secrets within the TTL (or, with force, every one) among `names`,
// with the controller's checks, Events on the Secrets and restarts (Envoy's DaemonSet, the
// registry's pods). It runs on a control-plane host: the registry is signed by its cluster CA
// key and the kotsadm kubelet client comes from its pair. Not paused by maintenance mode, which
// pauses what ekco does on its own initiative. Exit codes: 0 when every chosen secret was
// renewed or was not due; 1 when one failed, or a named one cannot be renewed here (absent, a
// custom certificate, no CA key); 2 for a bad flag or an unknown name.
int runClusterRenewCommand(const Config& config, const ClusterRenewArgs& args, const CliEnv& env);

// `ekco certs check|renew`, for the command line's table (agent/cli/cli.cc).
std::unique_ptr<Command> certsCommands();

// `ekco regen-cert [--add-alt-names A,B] [--drop-alt-names C]`: EKCO's command, re-issuing
// /etc/kubernetes/pki/apiserver.crt with other subjectAltNames (IP addresses or DNS names),
// keeping its subject, other names, usages, key type and expiry, with `certs renew`'s backup,
// Lease, verification and restore (the apiserver reloads its serving certificate from disk, so
// nothing is restarted). Exit codes as `certs renew`'s.
std::unique_ptr<Command> regenCertCommand();

// `ekco rotate-kotsadm-certs [--ttl DURATION]`: EKCO's manual kurl-proxy renewal, as
// `ekco certs renew --cluster kurl-proxy` with its own TTL (default 4320h, EKCO's 180 days).
std::unique_ptr<Command> rotateKotsadmCertsCommand();

}  // namespace ekco::agent
