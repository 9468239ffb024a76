// The Store's resource table: the built-in resources it serves, lookups, and resources
// registered on demand for objects of other kinds (custom resources).
#include <algorithm>
#include <cctype>
#include <set>

#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/crd.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

namespace {

const std::set<std::string>& clusterScopedKinds() {
  static const std::set<std::string> kinds = {"Node",
                                              "Namespace",
                                              "PersistentVolume",
                                              "StorageClass",
                                              "ClusterRole",
                                              "ClusterRoleBinding",
                                              "CustomResourceDefinition",
                                              "PriorityClass",
                                              "CSIDriver",
                                              "CSINode",
                                              "VolumeAttachment",
                                              "MutatingWebhookConfiguration",
                                              "ValidatingWebhookConfiguration",
                                              "APIService",
                                              "CertificateSigningRequest",
                                              "RuntimeClass",
                                              "IngressClass",
                                              "ClusterIssuer"};
  return kinds;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string pluralize(std::string_view kind) {
  std::string s = lower(kind);
  if (s.empty()) return s;
  auto ends = [&](std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("s") || ends("x") || ends("ch") || ends("sh")) return s + "es";
  if (ends("y") && s.size() > 1 &&
      std::string_view("aeiou").find(s[s.size() - 2]) == std::string_view::npos) {
    return s.substr(0, s.size() - 1) + "ies";
  }
  return s + "s";
}

std::vector<ResourceInfo> builtins() {
  auto r = [](std::string group, std::string version, std::string plural, std::string kind,
              bool namespaced, std::vector<std::string> shorts, std::vector<std::string> subs) {
    return ResourceInfo{.group = std::move(group),
                        .version = std::move(version),
                        .plural = std::move(plural),
                        .singular = lower(kind),
                        .kind = std::move(kind),
                        .namespaced = namespaced,
                        .short_names = std::move(shorts),
                        .subresources = std::move(subs)};
  };
  // Served by the server itself (the RBAC evaluator), never stored.
  ResourceInfo selfSubjectAccessReviews =
      r("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false,
        {}, {});
  selfSubjectAccessReviews.verbs = {"create"};
  return {
      r("", "v1", "nodes", "Node", false, {"no"}, {"status"}),
      r("", "v1", "pods", "Pod", true, {"po"}, {"status", "eviction", "exec"}),
      r("", "v1", "namespaces", "Namespace", false, {"ns"}, {"status"}),
      r("", "v1", "configmaps", "ConfigMap", true, {"cm"}, {}),
      r("", "v1", "secrets", "Secret", true, {}, {}),
      r("", "v1", "services", "Service", true, {"svc"}, {"status"}),
      r("", "v1", "endpoints", "Endpoints", true, {"ep"}, {}),
      r("", "v1", "events", "Event", true, {"ev"}, {}),
      r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, {"pvc"}, {"status"}),
      r("", "v1", "persistentvolumes", "PersistentVolume", false, {"pv"}, {"status"}),
      r("", "v1", "serviceaccounts", "ServiceAccount", true, {"sa"}, {}),
      r("apps", "v1", "deployments", "Deployment", true, {"deploy"}, {"status", "scale"}),
      r("apps", "v1", "statefulsets", "StatefulSet", true, {"sts"}, {"status", "scale"}),
      r("apps", "v1", "daemonsets", "DaemonSet", true, {"ds"}, {"status"}),
      r("apps", "v1", "replicasets", "ReplicaSet", true, {"rs"}, {"status"}),
      r("coordination.k8s.io", "v1", "leases", "Lease", true, {}, {}),
      r("events.k8s.io", "v1", "events", "Event", true, {"ev"}, {}),
      r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, {"pdb"}, {"status"}),
      r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, {}, {}),
      r("storage.k8s.io", "v1", "storageclasses", "StorageClass", false, {"sc"}, {}),
      r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
        false, {"crd", "crds"}, {"status"}),
      r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, {}, {}),
      r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, {},
        {}),
      r("rbac.authorization.k8s.io", "v1", "roles", "Role", true, {}, {}),
      r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, {}, {}),
      r("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest",
        false, {"csr"}, {"status", "approval"}),
      r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration", false, {}, {}),
      selfSubjectAccessReviews,
  };
}

}  // namespace

bool ResourceInfo::hasSubresource(std::string_view sub) const {
  return std::find(subresources.begin(), subresources.end(), sub) != subresources.end();
}

bool ResourceInfo::takesStrategicMerge() const {
  return crd_version == nullptr &&
         (group.empty() || group.ends_with(".k8s.io") || group == "apps" || group == "batch" ||
          group == "autoscaling" || group == "policy");
}

Store::Store(const base::Clock& clock, std::size_t history_window)
    : clock_(clock),
      history_window_(std::max<std::size_t>(history_window, 1)),
      rng_(std::random_device{}()) {
  for (ResourceInfo& info : builtins()) registerLocked(std::move(info));
  bootstrapNamespacesLocked();  // default, kube-system, kube-public, kube-node-lease
  // kubesim's convenience: the CRDs of the custom resources ekco reads exist from the start, as
  // real CRD objects (listed, deletable), so their APIs are served.
  for (json& definition : crd::preloadedDefinitions()) (void)put(std::move(definition));
}

void Store::registerLocked(ResourceInfo info) {
  std::string key = info.key();
  resources_.insert_or_assign(key, std::move(info));
  data_.try_emplace(key);
}

void Store::definitionChangedLocked(const std::string& type, const json& definition) {
  const json& spec = definition.value("spec", json::object());
  const std::string group = spec.value("group", "");
  const std::string plural = spec.value("names", json::object()).value("plural", "");
  std::vector<ResourceInfo> served =
      type == "DELETED" ? std::vector<ResourceInfo>{} : crd::servedResources(definition);
  std::vector<ResourceInfo> dropped;
  for (const auto& [key, info] : resources_) {
    if (!info.crd_version || info.group != group || info.plural != plural) continue;
    bool still = std::any_of(served.begin(), served.end(),
                             [&](const ResourceInfo& s) { return s.key() == key; });
    if (!still) dropped.push_back(info);
  }
  for (const ResourceInfo& info : dropped) {
    // Its objects go with the API (the CRD's customresourcecleanup finalizer), each a DELETED
    // event for watchers.
    std::vector<json> objects;
    for (const auto& [k, object] : data_[info.key()].objects) objects.push_back(object);
    for (json& object : objects) {
      json old = object;
      commitLocked(info, "DELETED", std::move(object), std::move(old));
    }
    resources_.erase(info.key());
    data_.erase(info.key());
  }
  for (ResourceInfo& info : served) registerLocked(std::move(info));
}

std::optional<ResourceInfo> Store::findResource(std::string_view group, std::string_view version,
                                                std::string_view plural) const {
  std::lock_guard lock(mu_);
  auto it =
      resources_.find(std::string(group) + "/" + std::string(version) + "/" + std::string(plural));
  if (it == resources_.end()) return std::nullopt;
  return it->second;
}

std::optional<ResourceInfo> Store::findQualified(std::string_view qualified) const {
  std::lock_guard lock(mu_);
  auto dot = qualified.find('.');
  std::string plural(qualified.substr(0, dot));
  std::string group(dot == std::string_view::npos ? "" : qualified.substr(dot + 1));
  for (const auto& [key, info] : resources_) {
    if (info.plural == plural && info.group == group) return info;
  }
  return std::nullopt;
}

std::vector<ResourceInfo> Store::resources() const {
  std::lock_guard lock(mu_);
  std::vector<ResourceInfo> out;
  for (const auto& [key, info] : resources_) out.push_back(info);
  return out;
}

std::optional<ResourceInfo> Store::findByKindLocked(std::string_view api_version,
                                                    std::string_view kind) const {
  for (const auto& [key, info] : resources_) {
    if (info.kind == kind && info.apiVersion() == api_version) return info;
  }
  return std::nullopt;
}

base::Result<ResourceInfo> Store::resourceForObject(const json& object) {
  std::string api_version = str(object, {"apiVersion"});
  std::string kind = str(object, {"kind"});
  if (api_version.empty() || kind.empty()) {
    return base::Error("object without apiVersion or kind", base::ErrorCode::kInvalidArgument);
  }
  std::lock_guard lock(mu_);
  if (auto found = findByKindLocked(api_version, kind)) return *found;
  auto slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  const bool builtin_group =
      group.find('.') == std::string::npos ||
      (group.size() > 7 && group.compare(group.size() - 7, 7, ".k8s.io") == 0);
  if (!builtin_group) {
    // The REST mapper's words (meta.NoKindMatchError), as kubectl prints them.
    return base::Error("no matches for kind \"" + kind + "\" in version \"" + api_version +
                           "\" (create its CustomResourceDefinition first)",
                       base::ErrorCode::kNotFound);
  }
  ResourceInfo info{
      .group = slash == std::string::npos ? "" : api_version.substr(0, slash),
      .version = slash == std::string::npos ? api_version : api_version.substr(slash + 1),
      .plural = pluralize(kind),
      .singular = lower(kind),
      .kind = kind,
      .namespaced = clusterScopedKinds().count(kind) == 0,
      .short_names = {},
      .subresources = {}};
  registerLocked(info);
  return info;
}

}  // namespace ekco::kubesim
