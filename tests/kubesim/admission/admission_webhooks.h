// Mutating admission webhooks (admissionregistration.k8s.io/v1 MutatingWebhookConfiguration) as
// kube-apiserver's MutatingAdmissionWebhook plugin calls them, after defaulting and the built-in
// mutating plugins, before validation:
// - selection (under the Store's lock): configurations in name order, each webhook in order,
//   whose `rules` match the request (operations, apiGroups, apiVersions, resources with
//   `res/sub`, `*`, `*/*`, `res/*`, `*/sub`; scope), whose `namespaceSelector` matches the
//   namespace's labels (namespaced requests; a Namespace request its own labels) and whose
//   `objectSelector` matches the object's or the old object's labels. A `clientConfig.service`
//   resolves to the Service's port whose `port` is the webhook's (default 443), then to an
//   address behind it: the first ready endpoint (conditions.ready not false) of the Service's
//   EndpointSlices (labelled kubernetes.io/service-name, in name order) whose ports carry that
//   port's name — where kube-proxy sends kube-apiserver's call to the Service's ClusterIP, its
//   default — else the first address of the Service's Endpoints carrying that port's name, as
//   kube-apiserver's own endpoint resolver (--enable-aggregator-routing) does. TLS verifies
//   `<name>.<namespace>.svc`.
// - the call (without the lock): an AdmissionReview admission.k8s.io/v1 POSTed over HTTPS
//   (server certificate verified against `caBundle`, else the system roots) to the URL with
//   `?timeout=Ns`, `timeoutSeconds` (default 10) bounding connect, TLS and the answer. The
//   response must be an AdmissionReview v1 with the request's uid; `allowed: false` is the
//   webhook's denial (its status code, at least 400; "admission webhook \"NAME\" denied the
//   request: MESSAGE"); a JSONPatch is applied to the object, in order. A failure to call or a
//   bad response is skipped under `failurePolicy: Ignore` and is 500 `failed calling webhook`
//   under `Fail` (the default). A dry-run request is 400 for a webhook whose `sideEffects` is
//   not None/NoneOnDryRun.
// Not modelled: `reinvocationPolicy: IfNeeded` (each webhook runs once), matchConditions (CEL),
// `matchPolicy: Equivalent` conversion (kubesim serves one version per resource, so Exact and
// Equivalent select alike), ValidatingWebhookConfigurations, admission of DELETE/CONNECT.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/kubesim/rbac/rbac.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim::webhooks {

bool isConfiguration(const ResourceInfo& r);

// The v1 defaults: failurePolicy Fail, matchPolicy Equivalent, namespaceSelector and
// objectSelector {}, timeoutSeconds 10, reinvocationPolicy Never, service port 443, rule scope *.
void applyConfigurationDefaults(nlohmann::json& config);

// ValidateMutatingWebhookConfiguration's main rules (422 causes): each webhook's name (a
// qualified name with at least three segments, unique), clientConfig with exactly one of url
// (https, no fragment or user) and service (namespace, name, port 1-65535, path starting with
// "/"), admissionReviewVersions including "v1", sideEffects None or NoneOnDryRun,
// timeoutSeconds 1-30, failurePolicy, matchPolicy, reinvocationPolicy and rule values.
std::vector<FieldError> validateConfiguration(const nlohmann::json& config);

// What the request is, for rules, selectors and the AdmissionReview.
struct Attributes {
  const ResourceInfo* resource = nullptr;
  std::string operation{};  // CREATE or UPDATE
  std::string subresource{};
  std::string ns{};
  std::string name{};
  bool dry_run = false;
};

// One webhook to call, resolved.
struct Target {
  std::string name{};
  std::string host{};  // where to connect
  std::string port{};
  std::string server_name{};  // SNI and the name the certificate must carry
  std::string url{};          // for messages: https://svc.ns.svc:443/path?timeout=10s
  std::string target{};       // path and query
  std::string ca_pem{};
  std::chrono::seconds timeout{10};
  bool fail_closed = true;
  bool dry_run_safe = false;    // sideEffects None or NoneOnDryRun
  std::string resolve_error{};  // set when the service could not be resolved
};

// Reads a stored object: (resource key "/v1/services", namespace, name) → object or null.
using Lookup = std::function<const nlohmann::json*(const std::string& key, const std::string& ns,
                                                   const std::string& name)>;

// The EndpointSlices of a Service: (namespace, service name) → those labelled
// kubernetes.io/service-name=<name> in that namespace, in name order.
using SliceLister = std::function<std::vector<const nlohmann::json*>(const std::string& ns,
                                                                     const std::string& service)>;

// The webhooks to call, in order. `namespace_object` may be null (cluster-scoped request).
// Without `slices`, Services resolve through their Endpoints alone.
std::vector<Target> select(const std::vector<const nlohmann::json*>& configurations,
                           const Attributes& attrs, const nlohmann::json* namespace_object,
                           const nlohmann::json& object, const nlohmann::json& old_object,
                           const Lookup& lookup, const SliceLister& slices = {});

// Calls the targets in order, patching `object`. nullopt: admitted (maybe mutated); else the
// refusal (the webhook's denial, 500 for a failed call under Fail, 400 for dry-run).
std::optional<Reply> call(const std::vector<Target>& targets, const Attributes& attrs,
                          nlohmann::json& object, const nlohmann::json& old_object,
                          const UserInfo* user);

// The HTTPS POST (webhook_client.cc): the response body, or the error as kube-apiserver's
// client words it after `Post "URL": `.
[[nodiscard]] base::Result<std::string> post(const Target& target, const std::string& body);

}  // namespace ekco::kubesim::webhooks
