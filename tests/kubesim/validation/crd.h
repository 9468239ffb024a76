// CustomResourceDefinitions (apiextensions.k8s.io/v1) as kube-apiserver's apiextensions server
// serves them: a custom resource's API exists exactly while its CRD does (one resource per served
// version), the CRD is Established and NamesAccepted at once, and each write of a custom
// resource is pruned, defaulted and validated against the version's structural schema. The Store
// calls these from its write path (store.cc); deleting a CRD deletes its objects there too.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim::crd {

bool isDefinitionResource(const ResourceInfo& r);

// The CRDs every kubesim starts with, so tests, ekco and the demo find the custom resources
// ekco reads: Rook's CephCluster, CephBlockPool, CephFilesystem, CephObjectStore
// (ceph.rook.io/v1) and prometheus-operator's Prometheus and Alertmanager
// (monitoring.coreos.com/v1). Their schemas keep unknown fields, as the upstream CRDs do for
// spec and status in effect; printer columns follow the upstream CRDs.
std::vector<nlohmann::json> preloadedDefinitions();

// 422 Invalid, with the apiextensions validation's causes, for a CRD that cannot be served:
// name not "<plural>.<group>", missing group/names/scope/versions, not exactly one storage
// version, a version without a schema.
std::optional<Reply> validateDefinition(const nlohmann::json& crd);

// The resources the CRD serves (its served versions), each carrying its version entry.
std::vector<ResourceInfo> servedResources(const nlohmann::json& crd);

// Sets status as the apiextensions controllers do at once: conditions NamesAccepted and
// Established (True; lastTransitionTime kept from `old` when unchanged), acceptedNames = the
// spec's names, storedVersions including the storage version.
void setStatus(nlohmann::json& crd, const nlohmann::json& old, const std::string& now);

// Prunes, defaults and validates a custom resource against its version's schema (a no-op for
// other resources); 422 Invalid with kube-apiserver's message and causes when it does not fit.
std::optional<Reply> admit(const ResourceInfo& r, nlohmann::json& object);

// The scale subresource's paths for a custom resource (specReplicasPath, statusReplicasPath,
// labelSelectorPath), or nullopt when it has none or is not custom.
struct ScalePaths {
  std::string spec_replicas{};
  std::string status_replicas{};
  std::string label_selector{};
};
std::optional<ScalePaths> scalePaths(const ResourceInfo& r);

// A simple JSONPath (".a.b", ".a[0]", ".a[*].b", `.a[?(@.type=="Ready")].status`) as
// additionalPrinterColumns and the scale paths use it: every value it selects.
std::vector<nlohmann::json> jsonPath(const nlohmann::json& object, std::string_view path);
// Sets the value at a plain ".a.b" path, creating objects on the way.
void setAtPath(nlohmann::json& object, std::string_view path, nlohmann::json value);

}  // namespace ekco::kubesim::crd
