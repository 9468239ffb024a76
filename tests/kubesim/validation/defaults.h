// What kube-apiserver 1.32 fills in on the way in, as kubesim models it: the defaulting every
// decoded body gets (SetDefaults_* of k8s.io/kubernetes pkg/apis/*/v1), the conversion that folds
// a Secret's stringData into data, the admission plugins that mutate pods
// (DefaultTolerationSeconds, ServiceAccount, Priority) and each registry strategy's
// PrepareForCreate/PrepareForUpdate (status dropped or initialised, metadata.generation where the
// strategy keeps it). Pure functions over JSON (defaults_test.cc); the Store calls them.
#pragma once

#include <nlohmann/json.hpp>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {

// Defaulting and conversion of a create or update body (main resource): Pod and pod template
// specs, Deployment/StatefulSet/DaemonSet/ReplicaSet, Service, Namespace, Secret (type Opaque,
// stringData → data).
void applyDefaults(const ResourceInfo& r, nlohmann::json& object);

// The mutating admission plugins for pods: DefaultTolerationSeconds (create and update: the
// not-ready and unreachable NoExecute tolerations for 300 s unless tolerated already) and, on
// create, ServiceAccount (serviceAccountName "default") and Priority (priority 0,
// PreemptLowerPriority).
void admitPod(nlohmann::json& pod, bool create);

// PrepareForCreate: the status a client sent is dropped where the resource has a status
// subresource (Nodes keep theirs, as the kubelet registers with it), Pods start Pending with
// their qosClass, Namespaces Active with the `kubernetes` finalizer, Services with an empty
// load-balancer status; metadata.generation is 1 where the strategy keeps it, else as sent.
void prepareForCreate(const ResourceInfo& r, nlohmann::json& object);

// Whether the resource's registry strategy keeps metadata.generation (Deployments and the other
// apps workloads, Jobs, CronJobs, PDBs, CRDs, EndpointSlices, Ingresses, NetworkPolicies, the
// admission registration and flow control kinds, every custom resource); ConfigMaps, Secrets,
// Pods (before 1.33), Services, Nodes, Namespaces... do not.
bool tracksGeneration(const ResourceInfo& r);

// Whether an update of the main resource bumps generation: the spec (everything but metadata
// and status) changed; for Deployments also the annotations; for a custom resource without a
// status subresource anything but metadata.
bool bumpsGeneration(const ResourceInfo& r, const nlohmann::json& next, const nlohmann::json& old);

// The pod's QoS class from its (defaulted) containers: Guaranteed, Burstable or BestEffort.
std::string qosClass(const nlohmann::json& pod);

}  // namespace ekco::kubesim
