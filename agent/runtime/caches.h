// The informer caches of the agent, built from what the enabled controllers' specs ask for
// (agent/controller/spec.h) and shared when two ask for the same. Controllers read them through
// the observe*() functions, which return copies (slim records, kube/records.h); a change in a
// cache wakes the controllers that asked for it.
//
// Node-scoped caches (this node, its pods, the apiserver endpoints) run from start() to stop();
// the apiserver endpoints' fallback sources (Endpoints, then the control-plane nodes) only once
// the sources before them are listed and empty.
// Leader-scoped caches (every node; the kubelet-serving CSRs; the pods of each unhealthy node, one
// narrow informer per node) run only while this agent leads: setLeading(true) starts them,
// setLeading(false) stops and drops them, and superviseUnhealthyNodePods() follows the set of
// unhealthy nodes.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/controller/observed.h"
#include "base/clock.h"
#include "kube/client.h"
#include "kube/informer.h"
#include "kube/records.h"

namespace ekco::agent {

enum class CacheName {
  kOwnNode,             // this node (always: readiness needs it)
  kOwnPods,             // the pods scheduled to this node (always)
  kApiservers,          // the apiserver endpoints: EndpointSlices, Endpoints, control-plane nodes
  kClusterNodes,        // every node; leader only
  kUnhealthyNodePods,   // the pods of each not-Ready or tainted node; leader only
  kKubeletServingCsrs,  // CertificateSigningRequests for kubernetes.io/kubelet-serving; leader
  kEnvoyPods,           // pods app=envoy in CachesOptions::envoy_namespace; leader only
  kHostJobs,            // HostJobs (hostjobs.ekco.kurl.sh); every node
  kNodeLeases,          // the kubelets' heartbeat Leases in kube-node-lease; leader only
};
std::string_view cacheName(CacheName name);

// The longest an agent's cache waits between attempts while the API fails (client-go's reflector
// waits up to 30 s). An agent runs about five caches, so even a long outage costs the API about
// two requests a second per agent, and every cache is back within 3 s of the API (issue 24: an
// agent recovers within 5 s of a fault's end; with 30 s, an 8 s outage could leave a cache
// waiting 12 s more).
inline constexpr std::chrono::milliseconds kCacheMaxBackoff{3000};

struct CachesOptions {
  std::string node_name{};
  std::string envoy_namespace{};  // contour_namespace, for kEnvoyPods
  // Informer failures: which cache, its label for the agent's rate-limited log ("node cache"),
  // the error.
  std::function<void(CacheName cache, std::string_view what, const base::Error& error)> on_error{};
};

class Caches {
 public:
  Caches(kube::KubeClient& client, const base::Clock& clock, CachesOptions options);
  ~Caches();
  Caches(const Caches&) = delete;
  Caches& operator=(const Caches&) = delete;

  // Before start(): builds the cache (once) and calls `on_change` whenever it changes.
  void require(CacheName name, std::function<void()> on_change);

  void start();  // the node-scoped caches
  void stop();   // every cache; idempotent
  void setLeading(bool leading);
  void superviseUnhealthyNodePods();

  ObservedNode ownNode() const;
  std::vector<kube::PodRecord> ownPods() const;
  ObservedNodes clusterNodes() const;  // synced false while not leading
  std::vector<kube::PodRecord> unhealthyNodePods() const;
  ObservedCsrs kubeletServingCsrs() const;  // synced false while not leading
  ObservedPods envoyPods() const;           // synced false while not leading
  ObservedNodeLeases nodeLeases() const;    // synced false while not leading
  // Whether the pods on `node` have been listed (its informer exists and is synced): until
  // then, unhealthyNodePods() says nothing about that node, not that it has no pods.
  bool unhealthyNodePodsListed(const std::string& node) const;
  ObservedApiservers apiservers() const;
  ObservedHostJobs hostJobs() const;

  // Each running cache's label ("node", "pods", "cluster-nodes", "pods on node-b", ...) and
  // statistics, for /status, /metrics and /readyz.
  void forEachStats(const std::function<void(const std::string& label,
                                             const kube::InformerStats& stats)>& f) const;
  kube::InformerStats ownNodeStats() const;
  kube::InformerStats ownPodsStats() const;
  // nullopt while not leading (or before the cluster node cache exists).
  std::optional<kube::InformerStats> clusterNodesStats() const;

 private:
  template <typename Record>
  struct Running {
    std::unique_ptr<kube::Informer<Record>> informer;
    std::thread thread;
    void start();
    void stop();
  };
  using EndpointList = std::vector<haproxy::Endpoint>;

  void wake(CacheName name) const;
  // Under leader_mu_; the informers to stop go to `retire`, run once the lock is released.
  void setLeadingLocked(bool leading, std::vector<std::function<void()>>& retire);
  void superviseUnhealthyNodePodsLocked(std::vector<std::function<void()>>& retire);
  template <typename Record>
  kube::InformerHandlers<Record> handlers(CacheName name, std::string what,
                                          std::atomic<bool>* absent = nullptr);

  kube::KubeClient& client_;
  const base::Clock& clock_;
  CachesOptions options_;
  std::map<CacheName, std::vector<std::function<void()>>> wakes_;

  Running<kube::NodeRecord> own_node_;
  Running<kube::PodRecord> own_pods_;
  bool apiservers_ = false;
  Running<EndpointList> lb_slices_;
  // The fallback sources start only when the ones before them are listed and empty (a cluster
  // without EndpointSlices for the kubernetes Service): most agents never run them. Started from
  // apiservers() (hence mutable), under lb_mu_.
  mutable std::mutex lb_mu_;
  mutable bool lb_stopped_ = false;
  mutable Running<EndpointList> lb_endpoints_;
  mutable Running<kube::NodeRecord> lb_control_plane_nodes_;
  mutable Running<kube::NodeRecord> lb_master_nodes_;
  std::atomic<bool> lb_slices_absent_{false};  // the API has no discovery.k8s.io/v1
  std::atomic<bool> lb_endpoints_absent_{false};

  mutable std::mutex leader_mu_;
  bool cluster_nodes_wanted_ = false;
  bool unhealthy_pods_wanted_ = false;
  Running<kube::NodeRecord> cluster_nodes_;
  std::map<std::string, std::unique_ptr<Running<kube::PodRecord>>> unhealthy_pods_;
  bool csrs_wanted_ = false;
  Running<kube::CertificateSigningRequest> csrs_;
  std::atomic<bool> csrs_absent_{false};  // the API has no certificates.k8s.io/v1
  bool envoy_pods_wanted_ = false;
  Running<kube::Pod> envoy_pods_;
  Running<HostJobRecord> host_jobs_;           // node-scoped; built when required
  std::atomic<bool> host_jobs_absent_{false};  // the API serves no hostjobs (CRD not installed)
  bool node_leases_wanted_ = false;
  Running<NodeLease> node_leases_;
};

}  // namespace ekco::agent
