// The Kubernetes objects of the pod image overrides webhook, as pure functions: what ekco wants
// them to be, and whether what is there already is that. Used by the leader controller
// (webhook_config.h), the node controller (webhook_serving.h) and their tests.
//
//   Secret <ns>/ekco-webhook-ca               type kubernetes.io/tls: the CA every agent signs
//                                             its own serving certificate with (tls.crt, tls.key)
//   Service <ns>/ekco                         port 443 -> the agents' pod_image_overrides_port,
//                                             selecting the DaemonSet's pods, or without a
//                                             selector when the agents run from the packages
//   EndpointSlice <ns>/ekco-webhook-ipv4 (and -ipv6), Endpoints <ns>/ekco
//                                             without a selector: the node addresses of the
//                                             agents that serve (the Endpoints for apiservers
//                                             that resolve webhooks through Endpoints, marked
//                                             skip-mirror so no second slice is made from them)
//   MutatingWebhookConfiguration pod-image-overrides.kurl.sh
//                                             pods CREATE/UPDATE -> https://ekco.<ns>.svc:443
//                                             /pod-image-overrides, caBundle = the CA, every
//                                             namespace but pod_image_overrides_excluded_namespaces
// <ns> is ekco's namespace (leader_election_namespace, `kurl` by default).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/resource.h"

namespace ekco::agent::webhook {

using Json = nlohmann::json;

inline constexpr std::string_view kConfigurationName = "pod-image-overrides.kurl.sh";
inline constexpr std::string_view kCaSecretName = "ekco-webhook-ca";
inline constexpr std::string_view kServiceName = "ekco";
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
// The DaemonSet's pods' label (deploy/30-daemonset.yaml), the Service's selector.
inline constexpr std::string_view kAgentPodLabel = "app.kubernetes.io/name";

inline const kube::Resource kMutatingWebhookConfigurations{
    .group = "admissionregistration.k8s.io",
    .version = "v1",
    .plural = "mutatingwebhookconfigurations",
    .namespaced = false,
    .kind = "MutatingWebhookConfiguration"};

// "ekco.kurl.svc" and "ekco.kurl.svc.cluster.local": the names the apiserver dials and checks.
std::vector<std::string> serviceDnsNames(std::string_view ns);

// The CA as stored: PEM certificate and key.
struct CaPair {
  std::string cert_pem{};
  std::string key_pem{};
};

// The Secret to create for `ca`.
Json caSecret(std::string_view ns, const CaPair& ca);
// The CA in a Secret read from the API: kNotFound-free; kParse naming the Secret when tls.crt
// or tls.key is missing or not base64 PEM (the Secret is then left alone, never overwritten).
base::Result<CaPair> caFromSecret(const Json& secret);

// The Service ekco wants: selecting the DaemonSet's pods, or (selector false) none, its
// endpoints then listed by ekco.
Json desiredService(std::string_view ns, int target_port, bool selector = true);
// The configuration ekco wants, with caBundle = base64(ca_pem), called for the pods of every
// namespace but `excluded` (no namespaceSelector at all when it is empty).
Json desiredConfiguration(std::string_view ns, std::string_view ca_pem,
                          const std::vector<std::string>& excluded = {});

// The Service's port name, in its ports and in its endpoints' (they are matched by name).
inline constexpr std::string_view kPortName = "https";
// endpointslice.kubernetes.io/managed-by of ekco's EndpointSlices (the EndpointSlice controller's
// own is endpointslice-controller.k8s.io; it leaves slices of other managers alone).
inline constexpr std::string_view kEndpointSliceManager = "ekco.kurl.sh";
inline constexpr std::string_view kSliceManagedByLabel = "endpointslice.kubernetes.io/managed-by";
inline constexpr std::string_view kServiceNameLabel = "kubernetes.io/service-name";

// An agent that serves the webhook: its node and the node's address (IPv4 or IPv6 text).
struct ServingAgent {
  std::string node{};
  std::string address{};
  bool operator==(const ServingAgent&) const = default;
};
bool isIpv6Address(std::string_view address);

// "ekco-webhook-ipv4" / "ekco-webhook-ipv6": one slice per address family (a slice holds one).
std::string endpointSliceName(bool ipv6);
// The EndpointSlice of `agents` of one family (the others are skipped), sorted by node, each
// ready, on `port`.
Json desiredEndpointSlice(std::string_view ns, bool ipv6, const std::vector<ServingAgent>& agents,
                          int port);
// The Endpoints of every agent (sorted by address, as the API's repacking would), on `port`; no
// subset when there is none.
Json desiredEndpoints(std::string_view ns, const std::vector<ServingAgent>& agents, int port);

// True when every member `want` sets is in `have` with the same value (objects compared member
// by member, recursively; arrays element by element and of equal length; scalars equal): what
// the API defaulted on top of what ekco wrote (reinvocationPolicy, rules[].scope, the port) is
// not a difference.
bool containsAll(const Json& have, const Json& want);

}  // namespace ekco::agent::webhook
