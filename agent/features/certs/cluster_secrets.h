// The cluster's TLS secrets ekco keeps fresh (EKCO's add-on certificate rotation), inspected and
// renewed in EKCO's order:
//   contour  <contour_namespace>/<contour_cert_secret> and <envoy_cert_secret> (ca.crt, tls.crt,
//            tls.key): when the CA or either leaf is inside the TTL, a new CA ("Project Contour")
//            and both leaves (contour / envoy, with their service names), then a rollout restart
//            of DaemonSet <contour_namespace>/envoy (kubectl.kubernetes.io/restartedAt).
//   registry <registry_cert_namespace>/<registry_cert_secret> (registry.crt, registry.key):
//            re-signed by the host's cluster CA (<certificates_dir>/ca.{crt,key}) with the same
//            names and usages, a new key of the same type, valid from now (never the CA's
//            NotBefore: EKCO's bug); then the pods app=registry in that namespace deleted.
//   kurl-proxy <kurl_proxy_cert_namespace>/<kurl_proxy_cert_secret> (tls.crt, tls.key): a new
//            self-signed pair for kotsadm.default.svc.cluster.local with the same IP and DNS
//            names, unless it is a custom certificate (issuer or subject CN not prefixed
//            kotsadm.default.svc.cluster.local): those are reported, never replaced.
//   kotsadm-kubelet-client <kotsadm_kubelet_cert_namespace>/<..._secret> (client.crt,
//            client.key): kept byte-equal to the host's pki/apiserver-kubelet-client.{crt,key}.
// A secret that is absent means the add-on is absent: nothing to do. Every write is an update
// guarded by the resourceVersion read, so two control-plane agents never both renew one (the
// loser's update conflicts and it looks again next time); the contour pair is written CA secret
// first, and a pair left half-written (a crash between the two) is inside the TTL or signed by
// another CA, so the next check renews both again.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"
#include "pki/certificate.h"

namespace ekco::agent {

inline constexpr std::string_view kKurlProxyHost = "kotsadm.default.svc.cluster.local";

// The secrets' names, in EKCO's order ("contour" and "envoy" are one pair: naming either renews
// both).
inline constexpr std::string_view kClusterSecretNames[] = {"contour", "envoy", "registry",
                                                           "kurl-proxy", "kotsadm-kubelet-client"};

struct ClusterCertsOptions {
  base::WallTime now{};
  std::chrono::seconds ttl{std::chrono::hours(720)};
  std::string certificates_dir = "/etc/kubernetes/pki";
  std::string registry_namespace = "kurl";
  std::string registry_secret = "registry-pki";
  std::string kurl_proxy_namespace = "default";
  std::string kurl_proxy_secret = "kotsadm-tls";
  std::string kotsadm_kubelet_namespace = "default";
  std::string kotsadm_kubelet_secret = "kubelet-client-cert";
  std::string contour_namespace = "projectcontour";  // "" : Contour is not managed
  std::string contour_secret = "contourcert";
  std::string envoy_secret = "envoycert";
  bool dry_run = false;
  bool force = false;  // renew every present, replaceable one whatever its expiry
  // Only these (kClusterSecretNames); empty: every one.
  std::vector<std::string> names{};
  // Asked right before each secret write (maintenance mode, agent/maintenance/maintenance.h): false
  // stops that write with a kUnavailable error. Unset: always allowed.
  std::function<bool()> may_write{};
};

// The keys of the config that name the secrets, with `now` and `ttl` left to the caller.
ClusterCertsOptions clusterCertsOptions(const Config& config);

struct ClusterSecretState {
  std::string name{};    // "contour", "envoy", "registry", "kurl-proxy", "kotsadm-kubelet-client"
  std::string secret{};  // "kurl/registry-pki"
  bool present = false;
  std::optional<pki::Certificate> cert{};
  std::chrono::seconds left{0};
  bool due = false;       // ekco would renew (or, for the kubelet client, copy) it now
  std::string note{};     // why it is left alone, or what is stale
  std::string problem{};  // unreadable, API error: one line naming the secret
};

// Reads each secret (and the host files they are compared with). Never fails as a whole: an
// API error other than "not found" is that secret's problem.
std::vector<ClusterSecretState> inspectClusterSecrets(kube::KubeClient& kube,
                                                      const hostfs::HostFs& fs,
                                                      const ClusterCertsOptions& options);

struct ClusterCertsReport {
  std::vector<std::string> renewed{};  // state names
  std::vector<std::string> lines{};    // what was done, or would be under dry_run
  std::vector<std::string> errors{};   // one line each; the others went ahead
};

// Renews what `states` (inspectClusterSecrets with the same options, just before) says is due,
// each re-read right before its write. One failing secret does not stop the others; the report
// lists its error. `event` is called for every change (reason, message, the secret's namespace
// and name).
using SecretEventFn =
    std::function<void(const std::string& reason, const std::string& message, const std::string& ns,
                       const std::string& name, const std::string& type)>;
ClusterCertsReport renewClusterSecrets(kube::KubeClient& kube, const hostfs::HostFs& fs,
                                       const ClusterCertsOptions& options,
                                       const std::vector<ClusterSecretState>& states,
                                       const SecretEventFn& event);

// Whether `state_name` is among `names` (empty: every one); "contour" and "envoy" select each
// other.
bool clusterSecretSelected(const std::vector<std::string>& names, const std::string& state_name);

// Records each change as an Event on its Secret through `kube`; `failed` hears an Event that
// could not be recorded (never fatal).
SecretEventFn secretEventRecorder(kube::KubeClient& kube,
                                  std::function<void(const std::string& error)> failed);

}  // namespace ekco::agent
