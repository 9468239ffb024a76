// The Kubernetes objects of the pod image overrides webhook, as pure functions: what ekco wants
// them to be, and whether what is there already is that. Used by the leader controller
// (webhook_config.h), the node controller (webhook_serving.h) and their tests.
//
//   Secret <ns>/ekco-webhook-ca               type kubernetes.io/tls: the CA every agent signs
//                                             its own serving certificate with (tls.crt, tls.key)
//   Service <ns>/ekco                         port 443 -> the agents' pod_image_overrides_port,
//                                             selecting the DaemonSet's pods
//   MutatingWebhookConfiguration pod-image-overrides.kurl.sh
//                                             pods CREATE/UPDATE -> https://ekco.<ns>.svc:443
//                                             /pod-image-overrides, caBundle = the CA
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

// The Service ekco wants.
Json desiredService(std::string_view ns, int target_port);
// The configuration ekco wants, with caBundle = base64(ca_pem).
Json desiredConfiguration(std::string_view ns, std::string_view ca_pem);

// True when every member `want` sets is in `have` with the same value (objects compared member
// by member, recursively; arrays element by element and of equal length; scalars equal): what
// the API defaulted on top of what ekco wrote (reinvocationPolicy, rules[].scope, the port) is
// not a difference.
bool containsAll(const Json& have, const Json& want);

// The namespaces the webhook never sees: kube-system and ekco's own, so a broken webhook can
// block neither the control plane nor ekco.
std::vector<std::string> excludedNamespaces(std::string_view ns);

}  // namespace ekco::agent::webhook
