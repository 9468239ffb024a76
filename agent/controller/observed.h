// What the controllers read from the agent's caches (agent/runtime/caches.h): copies of slim
// records, plus whether the cache has listed yet (nothing is decided on an unsynced cache).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/features/host_jobs/host_job_spec.h"
#include "base/clock.h"

#include "haproxy/render.h"
#include "kube/objects.h"
#include "kube/records.h"

namespace ekco::agent {

// This node.
struct ObservedNode {
  bool synced = false;
  std::optional<kube::NodeRecord> node = std::nullopt;
};

// The HostJobs (every agent's cache, with enable_host_jobs).
struct ObservedHostJobs {
  bool synced = false;  // listed at least once, or the API does not serve hostjobs (no CRD)
  std::vector<HostJobRecord> jobs{};
};

// Every node of the cluster (the leader's cache).
struct ObservedNodes {
  bool synced = false;  // the node cache has listed (nothing is decided before)
  std::vector<kube::NodeRecord> nodes{};
};

// The CertificateSigningRequests for signer kubernetes.io/kubelet-serving (the leader's cache).
struct ObservedCsrs {
  bool synced = false;  // listed at least once, or the API serves no certificates.k8s.io/v1
  std::vector<kube::CertificateSigningRequest> csrs{};
};

// Full pods of one selection (the leader's Envoy pods: container states, conditions).
struct ObservedPods {
  bool synced = false;
  std::vector<kube::Pod> pods{};
};

// A kubelet's heartbeat Lease (kube-node-lease/<node>): its node and when it was last renewed.
struct NodeLease {
  std::string name{};
  std::optional<base::WallTime> renew_time = std::nullopt;
  bool operator==(const NodeLease&) const = default;
};

// The heartbeat Leases of every node (the leader's cache).
struct ObservedNodeLeases {
  bool synced = false;
  std::vector<NodeLease> leases{};
};

// One source of apiserver addresses for the internal load balancer.
struct ApiserverSource {
  // Listed at least once, or known to be absent from this cluster (404 on the resource): its
  // endpoints are final enough to decide on.
  bool settled = false;
  std::vector<haproxy::Endpoint> endpoints{};
};

struct ObservedApiservers {
  ApiserverSource slices{};
  ApiserverSource endpoints{};
  ApiserverSource nodes{};
};

}  // namespace ekco::agent
