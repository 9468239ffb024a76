// The Store's side of mutating admission webhooks (admission_webhooks.h): which webhooks a
// write matches, read under the lock, and the calls, made without it (a webhook may take up to
// its timeout, and may itself read the API). Only API requests (a caller in request_user.h) are
// sent to webhooks; writes of kubesim's simulated controllers and direct Store calls are not.
#include "tests/kubesim/admission/admission_webhooks.h"
#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/defaults.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

namespace {

constexpr const char* kConfigurations =
    "admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";

bool isPod(const ResourceInfo& r) { return r.group.empty() && r.plural == "pods"; }

}  // namespace

std::vector<webhooks::Target> Store::webhookTargetsLocked(const webhooks::Attributes& attrs,
                                                          const json& object,
                                                          const json& old) const {
  auto configs = data_.find(kConfigurations);
  if (configs == data_.end() || configs->second.objects.empty()) return {};
  // kube-apiserver never sends webhook configurations themselves to webhooks.
  if (attrs.resource->group == "admissionregistration.k8s.io") return {};
  auto lookup = [this](const std::string& key, const std::string& ns,
                       const std::string& name) -> const json* {
    auto d = data_.find(key);
    if (d == data_.end()) return nullptr;
    auto it = d->second.objects.find(objectKey(ns, name));
    return it == d->second.objects.end() ? nullptr : &it->second;
  };
  const json* namespace_object = nullptr;
  if (attrs.resource->namespaced) {
    namespace_object = lookup("/v1/namespaces", "", attrs.ns);
    // A missing namespace is NamespaceLifecycle's 404, which comes first.
    if (namespace_object == nullptr) return {};
  }
  std::vector<const json*> ordered;  // by name, as the map is
  for (const auto& [key, config] : configs->second.objects) ordered.push_back(&config);
  auto slices = [this](const std::string& ns,
                       const std::string& service) -> std::vector<const json*> {
    std::vector<const json*> out;
    auto d = data_.find("discovery.k8s.io/v1/endpointslices");
    if (d == data_.end()) return out;
    for (const auto& [key, slice] : d->second.objects) {  // by namespace and name
      if (str(slice, {"metadata", "namespace"}) == ns &&
          str(slice, {"metadata", "labels", "kubernetes.io/service-name"}) == service) {
        out.push_back(&slice);
      }
    }
    return out;
  };
  return webhooks::select(ordered, attrs, namespace_object, object, old, lookup, slices);
}

std::optional<Reply> Store::mutateForCreate(const ResourceInfo& r, const std::string& ns,
                                            json& object, bool dry_run) {
  if (currentUser() == nullptr) return std::nullopt;  // not an API request
  json candidate = object;
  if (!candidate["metadata"].is_object()) candidate["metadata"] = json::object();
  if (r.namespaced) {
    const std::string body_ns = str(candidate, {"metadata", "namespace"});
    if (!body_ns.empty() && body_ns != ns) return std::nullopt;  // the 400 comes later
    candidate["metadata"]["namespace"] = ns;
  }
  candidate["apiVersion"] = r.apiVersion();
  candidate["kind"] = r.kind;
  // Defaulting and the built-in mutating plugins run before the webhooks.
  applyDefaults(r, candidate);
  if (isPod(r)) admitPod(candidate, true);
  webhooks::Attributes attrs{.resource = &r,
                             .operation = "CREATE",
                             .subresource = "",
                             .ns = r.namespaced ? ns : "",
                             .name = str(candidate, {"metadata", "name"}),
                             .dry_run = dry_run};
  std::vector<webhooks::Target> targets;
  {
    std::lock_guard lock(mu_);
    targets = webhookTargetsLocked(attrs, candidate, json());
  }
  if (targets.empty()) return std::nullopt;
  if (auto refused = webhooks::call(targets, attrs, candidate, json(), currentUser())) {
    return refused;
  }
  object = std::move(candidate);
  return std::nullopt;
}

std::optional<Reply> Store::mutateForUpdateLocked(const ResourceInfo& r, const std::string& ns,
                                                  const std::string& name, json& next,
                                                  const json& old) {
  // Only API requests: the simulated controllers (garbage collector, disruption controller)
  // write under the lock while iterating the store, which must not be released under them.
  if (currentUser() == nullptr) return std::nullopt;
  json candidate = next;
  applyDefaults(r, candidate);
  if (isPod(r)) admitPod(candidate, false);
  webhooks::Attributes attrs{.resource = &r,
                             .operation = "UPDATE",
                             .subresource = "",
                             .ns = r.namespaced ? ns : "",
                             .name = name,
                             .dry_run = dry_run_};
  auto targets = webhookTargetsLocked(attrs, candidate, old);
  if (targets.empty()) return std::nullopt;
  // (1) Release the lock for the calls; the request's state (dry_run_, the writers, the
  // warnings so far) belongs to whoever holds it meanwhile, and is this request's again after.
  const bool dry_run = dry_run_;
  const managed::Writer* writer = writer_;
  const managed::Writer* request = request_;
  std::vector<std::string> warnings = std::move(warnings_);
  const auto restore = [&] {
    dry_run_ = dry_run;
    writer_ = writer;
    request_ = request;
    warnings_ = std::move(warnings);
  };
  dry_run_ = false;
  mu_.unlock();
  std::optional<Reply> refused;
  try {
    refused = webhooks::call(targets, attrs, candidate, old, currentUser());
  } catch (...) {
    mu_.lock();
    restore();
    throw;
  }
  mu_.lock();
  restore();
  if (refused) return refused;
  // (2) kube-apiserver's GuaranteedUpdate would run admission again on a newer object; kubesim
  // answers the write that lost the race 409 Conflict.
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return store_detail::notFound(r, name);
  if (str(*current, {"metadata", "resourceVersion"}) != str(old, {"metadata", "resourceVersion"})) {
    return store_detail::conflictModified(r, name);
  }
  next = std::move(candidate);
  return std::nullopt;
}

}  // namespace ekco::kubesim
