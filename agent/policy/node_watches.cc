#include "agent/policy/node_watches.h"

#include <set>
#include <utility>

#include "kube/decode/objects.h"
#include "kube/resource.h"

namespace ekco::agent {

WatchSpec ownNodeWatch() {
  return {.key = "own-node",
          .scope = Scope::kNode,
          .reachability = true,
          .build = informerWatch<kube::NodeRecord>([](const WatchContext& c) {
            return InformerSource<kube::NodeRecord>{
                .resource = kube::resources::kNodes,
                .field_selector = "metadata.name=" + c.node_name,
                .decode = kube::decodeNode,
                .label = "node",
                .what = "node cache"};
          })};
}

WatchSpec ownPodsWatch() {
  return {.key = "own-pods",
          .scope = Scope::kNode,
          .reachability = true,
          .build = informerWatch<kube::PodRecord>([](const WatchContext& c) {
            return InformerSource<kube::PodRecord>{.resource = kube::resources::kPods,
                                                   .field_selector = "spec.nodeName=" + c.node_name,
                                                   .decode = kube::decodePod,
                                                   .label = "pods",
                                                   .what = "pod cache"};
          })};
}

WatchSpec clusterNodesWatch() {
  return {.key = "cluster-nodes",
          .scope = Scope::kLeader,
          .reachability = true,
          .build = informerWatch<kube::NodeRecord>([](const WatchContext&) {
            return InformerSource<kube::NodeRecord>{.resource = kube::resources::kNodes,
                                                    .decode = kube::decodeNode,
                                                    .label = "cluster-nodes",
                                                    .what = "cluster node cache"};
          })};
}

WatchSpec unhealthyNodePodsWatch() {
  return {.key = "unhealthy-node-pods",
          .scope = Scope::kLeader,
          .build = [](const WatchContext& context) -> std::shared_ptr<Watch> {
            // The unhealthy nodes are found from the cluster's node watch.
            auto nodes =
                context.watches.require<InformerWatch<kube::NodeRecord>>(clusterNodesWatch());
            if (!nodes) return nullptr;
            return std::make_shared<UnhealthyNodePodsWatch>(context, std::move(*nodes));
          }};
}

WatchSpec nodeLeasesWatch() {
  return {.key = "node-leases",
          .scope = Scope::kLeader,
          .build = informerWatch<NodeLease>([](const WatchContext&) {
            // One small object per node; a renewal (every 10 s per kubelet) changes renew_time
            // only.
            return InformerSource<NodeLease>{
                .resource = kube::resources::kLeases,
                .ns = "kube-node-lease",
                .project = [](const nlohmann::json& object) -> base::Result<NodeLease> {
                  auto lease = kube::parseLease(object);
                  if (!lease) return std::move(lease).error();
                  return NodeLease{.name = lease->name, .renew_time = lease->renew_time};
                },
                .label = "node-leases",
                .what = "node lease cache"};
          })};
}

bool nodeUnhealthy(const kube::NodeRecord& node) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  if (ready == nullptr || ready->status != "True") return true;
  return node.taint("node.kubernetes.io/unreachable") != nullptr ||
         node.taint("node.kubernetes.io/not-ready") != nullptr;
}

UnhealthyNodePodsWatch::UnhealthyNodePodsWatch(
    const WatchContext& context, std::shared_ptr<InformerWatch<kube::NodeRecord>> nodes)
    : context_(context), nodes_(std::move(nodes)) {}

UnhealthyNodePodsWatch::~UnhealthyNodePodsWatch() { stop(); }

void UnhealthyNodePodsWatch::start() {
  std::lock_guard lock(mu_);
  running_ = true;  // supervise() starts the per-node informers once the nodes have listed
}

void UnhealthyNodePodsWatch::stop() {
  std::map<std::string, std::shared_ptr<PodWatch>> retired;
  {
    std::lock_guard lock(mu_);
    running_ = false;
    retired = std::move(per_node_);
    per_node_.clear();
  }
  // Outside the lock (InformerWatch::stop).
  for (auto& [node, watch] : retired) watch->stop();
}

void UnhealthyNodePodsWatch::supervise() {
  std::vector<std::shared_ptr<PodWatch>> retired;
  {
    std::lock_guard lock(mu_);
    if (!running_ || !nodes_->synced()) return;
    std::set<std::string> unhealthy;
    nodes_->forEach([&](const kube::NodeRecord& n) {
      if (nodeUnhealthy(n)) unhealthy.insert(n.name.str());
    });
    for (auto it = per_node_.begin(); it != per_node_.end();) {
      if (unhealthy.count(it->first) == 0) {
        retired.push_back(std::move(it->second));
        it = per_node_.erase(it);
      } else {
        ++it;
      }
    }
    for (const std::string& name : unhealthy) {
      if (per_node_.count(name) != 0) continue;
      auto watch = std::make_shared<PodWatch>(
          context_, InformerSource<kube::PodRecord>{.resource = kube::resources::kPods,
                                                    .field_selector = "spec.nodeName=" + name,
                                                    .decode = kube::decodePod,
                                                    .label = "pods on " + name,
                                                    .what = "pods on " + name});
      watch->start();
      per_node_.emplace(name, std::move(watch));
    }
  }
  for (auto& watch : retired) watch->stop();
}

void UnhealthyNodePodsWatch::forEachStats(const WatchStatsFn& f) const {
  std::lock_guard lock(mu_);
  for (const auto& [node, watch] : per_node_) watch->forEachStats(f);
}

std::vector<kube::PodRecord> UnhealthyNodePodsWatch::pods() const {
  std::vector<kube::PodRecord> pods;
  std::lock_guard lock(mu_);
  for (const auto& [node, watch] : per_node_) {
    watch->forEach([&](const kube::PodRecord& p) { pods.push_back(p); });
  }
  return pods;
}

bool UnhealthyNodePodsWatch::listed(const std::string& node) const {
  std::lock_guard lock(mu_);
  const auto it = per_node_.find(node);
  return it != per_node_.end() && it->second->synced();
}

base::Result<std::function<ObservedNode()>> observeOwnNode(Watches& watches) {
  auto watch = watches.require<InformerWatch<kube::NodeRecord>>(ownNodeWatch());
  if (!watch) return std::move(watch).error();
  // The watch's field selector holds this node only.
  return std::function<ObservedNode()>([w = std::move(*watch)] {
    Observed<kube::NodeRecord> seen = w->observe();
    ObservedNode out{.synced = seen.synced};
    if (!seen.items.empty()) out.node = std::move(seen.items.front());
    return out;
  });
}

base::Result<std::function<ObservedNodes()>> observeClusterNodes(Watches& watches) {
  auto watch = watches.require<InformerWatch<kube::NodeRecord>>(clusterNodesWatch());
  if (!watch) return std::move(watch).error();
  return std::function<ObservedNodes()>([w = std::move(*watch)] {
    Observed<kube::NodeRecord> seen = w->observe();
    return ObservedNodes{.synced = seen.synced, .nodes = std::move(seen.items)};
  });
}

base::Result<std::function<ObservedNodeLeases()>> observeNodeLeases(Watches& watches) {
  auto watch = watches.require<InformerWatch<NodeLease>>(nodeLeasesWatch());
  if (!watch) return std::move(watch).error();
  return std::function<ObservedNodeLeases()>([w = std::move(*watch)] {
    Observed<NodeLease> seen = w->observe();
    return ObservedNodeLeases{.synced = seen.synced, .leases = std::move(seen.items)};
  });
}

base::Result<std::shared_ptr<UnhealthyNodePodsWatch>> unhealthyNodePods(Watches& watches) {
  return watches.require<UnhealthyNodePodsWatch>(unhealthyNodePodsWatch());
}

}  // namespace ekco::agent
