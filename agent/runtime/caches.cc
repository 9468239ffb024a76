#include "agent/runtime/caches.h"

#include "agent/features/internal_lb/internal_lb.h"
#include "base/result.h"
#include "base/thread.h"
#include "kube/objects.h"
#include "kube/resource.h"

namespace ekco::agent {

namespace {

// Not Ready, or tainted by the node lifecycle controller as unreachable or not ready: the nodes
// whose pods the leader watches (clearing and purging decide on them).
bool nodeUnhealthy(const kube::NodeRecord& node) {
  const kube::ConditionRecord* ready = node.condition("Ready");
  if (ready == nullptr || ready->status != "True") return true;
  return node.taint("node.kubernetes.io/unreachable") != nullptr ||
         node.taint("node.kubernetes.io/not-ready") != nullptr;
}

}  // namespace

std::string_view cacheName(CacheName name) {
  switch (name) {
    case CacheName::kOwnNode:
      return "own-node";
    case CacheName::kOwnPods:
      return "own-pods";
    case CacheName::kApiservers:
      return "apiservers";
    case CacheName::kClusterNodes:
      return "cluster-nodes";
    case CacheName::kUnhealthyNodePods:
      return "unhealthy-node-pods";
    case CacheName::kKubeletServingCsrs:
      return "kubelet-serving-csrs";
    case CacheName::kEnvoyPods:
      return "envoy-pods";
    case CacheName::kHostJobs:
      return "hostjobs";
    case CacheName::kNodeLeases:
      return "node-leases";
  }
  return "?";
}

template <typename Record>
void Caches::Running<Record>::start() {
  if (informer && !thread.joinable())
    thread = base::startThread("informer", [this] { informer->run(); });
}

template <typename Record>
void Caches::Running<Record>::stop() {
  if (informer) informer->stop();
  if (thread.joinable()) thread.join();
}

Caches::Caches(kube::KubeClient& client, const base::Clock& clock, CachesOptions options)
    : client_(client), clock_(clock), options_(std::move(options)) {
  // This node and its pods: always (readiness, the node controllers).
  own_node_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.field_selector = "metadata.name=" + options_.node_name,
                            .max_backoff = kCacheMaxBackoff},
      kube::decodeNode, handlers<kube::NodeRecord>(CacheName::kOwnNode, "node cache"));
  own_pods_.informer = std::make_unique<kube::Informer<kube::PodRecord>>(
      client_, clock_, kube::resources::kPods, "",
      kube::InformerOptions{.field_selector = "spec.nodeName=" + options_.node_name,
                            .max_backoff = kCacheMaxBackoff},
      kube::decodePod, handlers<kube::PodRecord>(CacheName::kOwnPods, "pod cache"));
}

Caches::~Caches() { stop(); }

void Caches::wake(CacheName name) const {
  auto it = wakes_.find(name);
  if (it == wakes_.end()) return;
  for (const auto& f : it->second) f();
}

template <typename Record>
kube::InformerHandlers<Record> Caches::handlers(CacheName name, std::string what,
                                                std::atomic<bool>* absent) {
  auto changed = [this, name] { wake(name); };
  return {.on_add = [changed](const Record&) { changed(); },
          .on_update = [changed](const Record&, const Record&) { changed(); },
          .on_delete = [changed](const Record&) { changed(); },
          .on_error =
              [this, name, what = std::move(what), absent](const base::Error& e) {
                // A 404 on the resource means this cluster does not serve it (Kubernetes
                // before 1.21 for EndpointSlices): the source counts as listed and empty, not as an
                // outage.
                if (absent != nullptr && e.code() == base::ErrorCode::kNotFound) {
                  if (!absent->exchange(true)) wake(name);
                  return;
                }
                if (options_.on_error) options_.on_error(name, what, e);
              },
          // A controller woken by on_add during the first list may have read the cache as not
          // synced yet and gone back to sleep: wake it once the list is done.
          .on_synced = [changed] { changed(); }};
}

void Caches::require(CacheName name, std::function<void()> on_change) {
  if (on_change) wakes_[name].push_back(std::move(on_change));
  switch (name) {
    case CacheName::kOwnNode:
    case CacheName::kOwnPods:
      return;  // always built
    case CacheName::kClusterNodes: {
      std::lock_guard lock(leader_mu_);
      cluster_nodes_wanted_ = true;
      return;
    }
    case CacheName::kUnhealthyNodePods: {
      // The pods of unhealthy nodes are found from the cluster's node cache.
      std::lock_guard lock(leader_mu_);
      cluster_nodes_wanted_ = true;
      unhealthy_pods_wanted_ = true;
      return;
    }
    case CacheName::kKubeletServingCsrs: {
      std::lock_guard lock(leader_mu_);
      csrs_wanted_ = true;
      return;
    }
    case CacheName::kEnvoyPods: {
      std::lock_guard lock(leader_mu_);
      envoy_pods_wanted_ = !options_.envoy_namespace.empty();
      return;
    }
    case CacheName::kHostJobs:
      if (!host_jobs_.informer) {
        host_jobs_.informer = std::make_unique<kube::Informer<HostJobRecord>>(
            client_, clock_, kHostJobResource, "",
            kube::InformerOptions{.max_backoff = kCacheMaxBackoff}, projectHostJob,
            handlers<HostJobRecord>(CacheName::kHostJobs, "hostjob cache", &host_jobs_absent_));
      }
      return;
    case CacheName::kNodeLeases: {
      std::lock_guard lock(leader_mu_);
      node_leases_wanted_ = true;
      return;
    }
    case CacheName::kApiservers:
      break;
  }
  if (apiservers_) return;
  apiservers_ = true;
  lb_slices_.informer = std::make_unique<kube::Informer<EndpointList>>(
      client_, clock_, kube::resources::kEndpointSlices, "default",
      kube::InformerOptions{.label_selector = "kubernetes.io/service-name=kubernetes",
                            .max_backoff = kCacheMaxBackoff},
      endpointsOfSlice,
      handlers<EndpointList>(CacheName::kApiservers, "apiserver endpointslices",
                             &lb_slices_absent_));
  lb_endpoints_.informer = std::make_unique<kube::Informer<EndpointList>>(
      client_, clock_, kube::resources::kEndpoints, "default",
      kube::InformerOptions{.field_selector = "metadata.name=kubernetes",
                            .max_backoff = kCacheMaxBackoff},
      endpointsOfEndpoints,
      handlers<EndpointList>(CacheName::kApiservers, "apiserver endpoints", &lb_endpoints_absent_));
  // Label selectors cannot say "a or b": one narrow informer per role label.
  lb_control_plane_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.label_selector = "node-role.kubernetes.io/control-plane",
                            .max_backoff = kCacheMaxBackoff},
      kube::decodeNode, handlers<kube::NodeRecord>(CacheName::kApiservers, "control-plane nodes"));
  lb_master_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
      client_, clock_, kube::resources::kNodes, "",
      kube::InformerOptions{.label_selector = "node-role.kubernetes.io/master",
                            .max_backoff = kCacheMaxBackoff},
      kube::decodeNode, handlers<kube::NodeRecord>(CacheName::kApiservers, "master nodes"));
}

void Caches::start() {
  own_node_.start();
  own_pods_.start();
  lb_slices_.start();
  host_jobs_.start();
}

void Caches::stop() {
  {
    std::lock_guard lock(leader_mu_);
    cluster_nodes_.stop();
    csrs_.stop();
    envoy_pods_.stop();
    node_leases_.stop();
    for (auto& [name, running] : unhealthy_pods_) running->stop();
    unhealthy_pods_.clear();
  }
  own_node_.stop();
  own_pods_.stop();
  lb_slices_.stop();
  {
    std::lock_guard lock(lb_mu_);
    lb_stopped_ = true;
    lb_endpoints_.stop();
    lb_control_plane_nodes_.stop();
    lb_master_nodes_.stop();
  }
  host_jobs_.stop();
}

namespace {

// Moves a running informer out so that it is stopped (its thread joined) after the caller has
// released its lock: a watch stuck in a request to a hung API must not hold up the readers of
// the other caches (/readyz, /status) while it winds down.
template <typename Running>
std::function<void()> retired(Running& running) {
  return [r = std::make_shared<Running>(std::move(running))] { r->stop(); };
}

}  // namespace

void Caches::setLeading(bool leading) {
  std::vector<std::function<void()>> retire;
  {
    std::lock_guard lock(leader_mu_);
    setLeadingLocked(leading, retire);
  }
  for (auto& stop : retire) stop();
}

void Caches::setLeadingLocked(bool leading, std::vector<std::function<void()>>& retire) {
  if (leading && cluster_nodes_wanted_ && !cluster_nodes_.informer) {
    cluster_nodes_.informer = std::make_unique<kube::Informer<kube::NodeRecord>>(
        client_, clock_, kube::resources::kNodes, "",
        kube::InformerOptions{.max_backoff = kCacheMaxBackoff}, kube::decodeNode,
        handlers<kube::NodeRecord>(CacheName::kClusterNodes, "cluster node cache"));
    cluster_nodes_.start();
  } else if (!leading && cluster_nodes_.informer) {
    retire.push_back(retired(cluster_nodes_));
    for (auto& [name, running] : unhealthy_pods_) retire.push_back(retired(*running));
    unhealthy_pods_.clear();
  }
  if (leading && csrs_wanted_ && !csrs_.informer) {
    // Only the kubelet-serving signer's requests: the field selector kube-apiserver supports
    // for CSRs, so a cluster's other CSRs cost nothing here. Watched, never re-listed per CSR.
    csrs_absent_ = false;
    csrs_.informer = std::make_unique<kube::Informer<kube::CertificateSigningRequest>>(
        client_, clock_, kube::resources::kCertificateSigningRequests, "",
        kube::InformerOptions{.field_selector = "spec.signerName=kubernetes.io/kubelet-serving",
                              .max_backoff = kCacheMaxBackoff},
        kube::parseCertificateSigningRequest,
        handlers<kube::CertificateSigningRequest>(CacheName::kKubeletServingCsrs,
                                                  "kubelet-serving CSR cache", &csrs_absent_));
    csrs_.start();
  } else if (!leading && csrs_.informer) {
    retire.push_back(retired(csrs_));
  }
  if (leading && envoy_pods_wanted_ && !envoy_pods_.informer) {
    // Full pods (container states and conditions), but only Envoy's: a few per cluster.
    envoy_pods_.informer = std::make_unique<kube::Informer<kube::Pod>>(
        client_, clock_, kube::resources::kPods, options_.envoy_namespace,
        kube::InformerOptions{.label_selector = "app=envoy", .max_backoff = kCacheMaxBackoff},
        kube::parsePod, handlers<kube::Pod>(CacheName::kEnvoyPods, "envoy pod cache"));
    envoy_pods_.start();
  } else if (!leading && envoy_pods_.informer) {
    retire.push_back(retired(envoy_pods_));
  }
  if (leading && node_leases_wanted_ && !node_leases_.informer) {
    // One small object per node; a renewal (every 10 s per kubelet) changes renew_time only.
    node_leases_.informer = std::make_unique<kube::Informer<NodeLease>>(
        client_, clock_, kube::resources::kLeases, "kube-node-lease",
        kube::InformerOptions{.max_backoff = kCacheMaxBackoff},
        [](const nlohmann::json& object) -> base::Result<NodeLease> {
          auto lease = kube::parseLease(object);
          if (!lease) return std::move(lease).error();
          return NodeLease{.name = lease->name, .renew_time = lease->renew_time};
        },
        handlers<NodeLease>(CacheName::kNodeLeases, "node lease cache"));
    node_leases_.start();
  } else if (!leading && node_leases_.informer) {
    retire.push_back(retired(node_leases_));
  }
}

void Caches::superviseUnhealthyNodePods() {
  std::vector<std::function<void()>> retire;
  {
    std::lock_guard lock(leader_mu_);
    superviseUnhealthyNodePodsLocked(retire);
  }
  for (auto& stop : retire) stop();
}

void Caches::superviseUnhealthyNodePodsLocked(std::vector<std::function<void()>>& retire) {
  if (!unhealthy_pods_wanted_ || !cluster_nodes_.informer || !cluster_nodes_.informer->synced()) {
    return;
  }
  std::set<std::string> unhealthy;
  cluster_nodes_.informer->forEach([&](const kube::NodeRecord& n) {
    if (nodeUnhealthy(n)) unhealthy.insert(n.name.str());
  });
  for (auto it = unhealthy_pods_.begin(); it != unhealthy_pods_.end();) {
    if (unhealthy.count(it->first) == 0) {
      retire.push_back(retired(*it->second));
      it = unhealthy_pods_.erase(it);
    } else {
      ++it;
    }
  }
  for (const std::string& name : unhealthy) {
    if (unhealthy_pods_.count(name) != 0) continue;
    auto running = std::make_unique<Running<kube::PodRecord>>();
    running->informer = std::make_unique<kube::Informer<kube::PodRecord>>(
        client_, clock_, kube::resources::kPods, "",
        kube::InformerOptions{.field_selector = "spec.nodeName=" + name,
                              .max_backoff = kCacheMaxBackoff},
        kube::decodePod,
        handlers<kube::PodRecord>(CacheName::kUnhealthyNodePods, "pods on " + name));
    running->start();
    unhealthy_pods_.emplace(name, std::move(running));
  }
}

ObservedNode Caches::ownNode() const {
  return {.synced = own_node_.informer->synced(),
          .node = own_node_.informer->get("", options_.node_name)};
}

std::vector<kube::PodRecord> Caches::ownPods() const { return own_pods_.informer->list(); }

ObservedNodes Caches::clusterNodes() const {
  ObservedNodes observed;
  std::lock_guard lock(leader_mu_);
  if (!cluster_nodes_.informer) return observed;
  observed.synced = cluster_nodes_.informer->synced();
  observed.nodes = cluster_nodes_.informer->list();
  return observed;
}

ObservedNodeLeases Caches::nodeLeases() const {
  ObservedNodeLeases observed;
  std::lock_guard lock(leader_mu_);
  if (!node_leases_.informer) return observed;
  observed.synced = node_leases_.informer->synced();
  observed.leases = node_leases_.informer->list();
  return observed;
}

std::vector<kube::PodRecord> Caches::unhealthyNodePods() const {
  std::vector<kube::PodRecord> pods;
  std::lock_guard lock(leader_mu_);
  for (const auto& [name, running] : unhealthy_pods_) {
    running->informer->forEach([&](const kube::PodRecord& p) { pods.push_back(p); });
  }
  return pods;
}

ObservedCsrs Caches::kubeletServingCsrs() const {
  ObservedCsrs observed;
  std::lock_guard lock(leader_mu_);
  if (!csrs_.informer) return observed;
  observed.synced = csrs_absent_.load() || csrs_.informer->synced();
  if (!csrs_absent_.load()) observed.csrs = csrs_.informer->list();
  return observed;
}

ObservedPods Caches::envoyPods() const {
  ObservedPods observed;
  std::lock_guard lock(leader_mu_);
  if (!envoy_pods_.informer) return observed;
  observed.synced = envoy_pods_.informer->synced();
  observed.pods = envoy_pods_.informer->list();
  return observed;
}

bool Caches::unhealthyNodePodsListed(const std::string& node) const {
  std::lock_guard lock(leader_mu_);
  const auto it = unhealthy_pods_.find(node);
  return it != unhealthy_pods_.end() && it->second->informer->synced();
}

ObservedApiservers Caches::apiservers() const {
  ObservedApiservers observed;
  if (!apiservers_) return observed;
  auto gather = [](const kube::Informer<EndpointList>& informer, bool absent) {
    ApiserverSource source{.settled = absent || informer.synced()};
    if (absent) return source;
    informer.forEach([&](const EndpointList& list) {
      source.endpoints.insert(source.endpoints.end(), list.begin(), list.end());
    });
    return source;
  };
  observed.slices = gather(*lb_slices_.informer, lb_slices_absent_.load());
  // A fallback source is started when every source before it is listed and empty; until it has
  // listed, it is unsettled (the controller looks again every 250 ms meanwhile).
  std::lock_guard lock(lb_mu_);
  if (!observed.slices.settled || !observed.slices.endpoints.empty() || lb_stopped_) {
    return observed;
  }
  lb_endpoints_.start();
  observed.endpoints = gather(*lb_endpoints_.informer, lb_endpoints_absent_.load());
  if (!observed.endpoints.settled || !observed.endpoints.endpoints.empty()) return observed;
  lb_control_plane_nodes_.start();
  lb_master_nodes_.start();
  observed.nodes.settled =
      lb_control_plane_nodes_.informer->synced() && lb_master_nodes_.informer->synced();
  std::vector<kube::NodeRecord> nodes = lb_control_plane_nodes_.informer->list();
  for (auto& n : lb_master_nodes_.informer->list()) nodes.push_back(std::move(n));
  observed.nodes.endpoints = endpointsOfNodes(nodes);
  return observed;
}

ObservedHostJobs Caches::hostJobs() const {
  ObservedHostJobs observed;
  if (!host_jobs_.informer) return observed;
  observed.synced = host_jobs_absent_.load() || host_jobs_.informer->synced();
  // A CRD installed later is listed by the informer's next attempt: its store is the truth.
  observed.jobs = host_jobs_.informer->list();
  return observed;
}

void Caches::forEachStats(const std::function<void(const std::string& label,
                                                   const kube::InformerStats& stats)>& f) const {
  f("node", own_node_.informer->stats());
  f("pods", own_pods_.informer->stats());
  if (apiservers_) {
    f("apiserver-endpointslices", lb_slices_.informer->stats());
    std::lock_guard lock(lb_mu_);
    // The fallback sources only once started (see apiservers()).
    if (lb_endpoints_.thread.joinable()) f("apiserver-endpoints", lb_endpoints_.informer->stats());
    if (lb_control_plane_nodes_.thread.joinable()) {
      f("control-plane-nodes", lb_control_plane_nodes_.informer->stats());
      f("master-nodes", lb_master_nodes_.informer->stats());
    }
  }
  if (host_jobs_.informer) f("hostjobs", host_jobs_.informer->stats());
  std::lock_guard lock(leader_mu_);
  if (cluster_nodes_.informer) f("cluster-nodes", cluster_nodes_.informer->stats());
  if (csrs_.informer) f("kubelet-serving-csrs", csrs_.informer->stats());
  if (envoy_pods_.informer) f("envoy-pods", envoy_pods_.informer->stats());
  if (node_leases_.informer) f("node-leases", node_leases_.informer->stats());
  for (const auto& [name, running] : unhealthy_pods_) {
    f("pods on " + name, running->informer->stats());
  }
}

kube::InformerStats Caches::ownNodeStats() const { return own_node_.informer->stats(); }
kube::InformerStats Caches::ownPodsStats() const { return own_pods_.informer->stats(); }

std::optional<kube::InformerStats> Caches::clusterNodesStats() const {
  std::lock_guard lock(leader_mu_);
  if (!cluster_nodes_.informer) return std::nullopt;
  return cluster_nodes_.informer->stats();
}

}  // namespace ekco::agent
