// Which kind of object an API call is about: group, version, plural, scope. A small value type;
// the constants below are the resources ekco uses. Custom resources are just more values.
#pragma once

#include <string>
#include <string_view>

namespace ekco::kube {

struct Resource {
  std::string group{};    // "" for the core group ("v1"), "apps", "ceph.rook.io", ...
  std::string version{};  // "v1"
  std::string plural{};   // "nodes", "cephclusters"
  bool namespaced = true;
  std::string kind{};  // "Node": for objects we build (Events' involvedObject, Eviction)

  // "v1" or "apps/v1".
  std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }

  // The request path for this resource; namespace, name and subresource are optional (empty
  // means absent) and are percent-encoded: "/api/v1/namespaces/kube-system/pods/x/status".
  // The namespace is left out for cluster-scoped resources.
  std::string path(std::string_view ns = {}, std::string_view name = {},
                   std::string_view subresource = {}) const;

  bool operator==(const Resource&) const = default;
};

// Percent-encodes everything but RFC 3986 unreserved characters (A-Z a-z 0-9 - . _ ~): right
// for a path segment and for a query value ("app=x,tier!=y" -> "app%3Dx%2Ctier%21%3Dy").
std::string percentEncode(std::string_view text);

namespace resources {
inline const Resource kNodes{
    .version = "v1", .plural = "nodes", .namespaced = false, .kind = "Node"};
inline const Resource kPods{.version = "v1", .plural = "pods", .kind = "Pod"};
inline const Resource kEvents{.version = "v1", .plural = "events", .kind = "Event"};
inline const Resource kConfigMaps{.version = "v1", .plural = "configmaps", .kind = "ConfigMap"};
inline const Resource kSecrets{.version = "v1", .plural = "secrets", .kind = "Secret"};
inline const Resource kServices{.version = "v1", .plural = "services", .kind = "Service"};
inline const Resource kEndpoints{.version = "v1", .plural = "endpoints", .kind = "Endpoints"};
inline const Resource kNamespaces{
    .version = "v1", .plural = "namespaces", .namespaced = false, .kind = "Namespace"};
inline const Resource kPersistentVolumeClaims{
    .version = "v1", .plural = "persistentvolumeclaims", .kind = "PersistentVolumeClaim"};
inline const Resource kPersistentVolumes{.version = "v1",
                                         .plural = "persistentvolumes",
                                         .namespaced = false,
                                         .kind = "PersistentVolume"};
inline const Resource kLeases{
    .group = "coordination.k8s.io", .version = "v1", .plural = "leases", .kind = "Lease"};
inline const Resource kDeployments{
    .group = "apps", .version = "v1", .plural = "deployments", .kind = "Deployment"};
inline const Resource kStatefulSets{
    .group = "apps", .version = "v1", .plural = "statefulsets", .kind = "StatefulSet"};
inline const Resource kDaemonSets{
    .group = "apps", .version = "v1", .plural = "daemonsets", .kind = "DaemonSet"};
inline const Resource kReplicaSets{
    .group = "apps", .version = "v1", .plural = "replicasets", .kind = "ReplicaSet"};
inline const Resource kEndpointSlices{.group = "discovery.k8s.io",
                                      .version = "v1",
                                      .plural = "endpointslices",
                                      .kind = "EndpointSlice"};
inline const Resource kPodDisruptionBudgets{.group = "policy",
                                            .version = "v1",
                                            .plural = "poddisruptionbudgets",
                                            .kind = "PodDisruptionBudget"};
inline const Resource kCertificateSigningRequests{.group = "certificates.k8s.io",
                                                  .version = "v1",
                                                  .plural = "certificatesigningrequests",
                                                  .namespaced = false,
                                                  .kind = "CertificateSigningRequest"};
inline const Resource kCephClusters{
    .group = "ceph.rook.io", .version = "v1", .plural = "cephclusters", .kind = "CephCluster"};
inline const Resource kCephBlockPools{
    .group = "ceph.rook.io", .version = "v1", .plural = "cephblockpools", .kind = "CephBlockPool"};
inline const Resource kCephFilesystems{.group = "ceph.rook.io",
                                       .version = "v1",
                                       .plural = "cephfilesystems",
                                       .kind = "CephFilesystem"};
inline const Resource kCephObjectStores{.group = "ceph.rook.io",
                                        .version = "v1",
                                        .plural = "cephobjectstores",
                                        .kind = "CephObjectStore"};
}  // namespace resources

}  // namespace ekco::kube
