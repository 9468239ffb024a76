// The node watches no one feature owns (agent/controller/watch.h): this node and its pods (every
// agent; readiness rests on them), and, on the leader, every node, the pods of each unhealthy
// node and the kubelets' heartbeat Leases. The features that decide on nodes (clear, purge,
// node recovery, the storage controllers, CSR approval) declare them in their specs and read
// them through the functions here.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/controller/watch.h"
#include "base/clock.h"
#include "base/result.h"
#include "kube/decode/records.h"

namespace ekco::agent {

// This node.
struct ObservedNode {
  bool synced = false;
  std::optional<kube::NodeRecord> node = std::nullopt;
};

// Every node of the cluster (the leader's watch).
struct ObservedNodes {
  bool synced = false;  // the node watch has listed (nothing is decided before)
  std::vector<kube::NodeRecord> nodes{};
};

// A kubelet's heartbeat Lease (kube-node-lease/<node>): its node and when it was last renewed.
struct NodeLease {
  std::string name{};
  std::optional<base::WallTime> renew_time = std::nullopt;
  bool operator==(const NodeLease&) const = default;
};

// The heartbeat Leases of every node (the leader's watch).
struct ObservedNodeLeases {
  bool synced = false;
  std::vector<NodeLease> leases{};
};

// "own-node": this node (node scope; reachability).
WatchSpec ownNodeWatch();
// "own-pods": the pods scheduled to this node (node scope; reachability).
WatchSpec ownPodsWatch();
// "cluster-nodes": every node (leader scope; reachability).
WatchSpec clusterNodesWatch();
// "unhealthy-node-pods": the pods of each not-Ready or tainted node, one narrow informer per
// node, following "cluster-nodes" (leader scope).
WatchSpec unhealthyNodePodsWatch();
// "node-leases": the Leases in kube-node-lease (leader scope).
WatchSpec nodeLeasesWatch();

// Not Ready, or tainted by the node lifecycle controller as unreachable or not ready: the nodes
// whose pods the leader watches (clearing and purging decide on them).
bool nodeUnhealthy(const kube::NodeRecord& node);

// The pods of each unhealthy node: one informer per node, started and stopped by supervise() as
// the cluster's node watch shows nodes turning unhealthy or healthy again.
class UnhealthyNodePodsWatch final : public Watch {
 public:
  UnhealthyNodePodsWatch(const WatchContext& context,
                         std::shared_ptr<InformerWatch<kube::NodeRecord>> nodes);
  ~UnhealthyNodePodsWatch() override;

  void start() override;
  void stop() override;
  void supervise() override;
  void forEachStats(const WatchStatsFn& f) const override;

  // The pods of every unhealthy node whose informer runs.
  std::vector<kube::PodRecord> pods() const;
  // Whether the pods on `node` have been listed (its informer exists and has synced): until
  // then, pods() says nothing about that node, not that it has no pods.
  bool listed(const std::string& node) const;

 private:
  using PodWatch = InformerWatch<kube::PodRecord>;
  WatchContext context_;
  std::shared_ptr<InformerWatch<kube::NodeRecord>> nodes_;
  mutable std::mutex mu_;
  bool running_ = false;
  std::map<std::string, std::shared_ptr<PodWatch>> per_node_;
};

// Readers for a controller's build, from the watches its spec declares.
base::Result<std::function<ObservedNode()>> observeOwnNode(Watches& watches);
base::Result<std::function<ObservedNodes()>> observeClusterNodes(Watches& watches);
base::Result<std::function<ObservedNodeLeases()>> observeNodeLeases(Watches& watches);
base::Result<std::shared_ptr<UnhealthyNodePodsWatch>> unhealthyNodePods(Watches& watches);

}  // namespace ekco::agent
