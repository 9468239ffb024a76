#include "agent/features/internal_lb/apiserver_watch.h"

#include "agent/features/internal_lb/internal_lb.h"
#include "kube/resource.h"

namespace ekco::agent {

namespace {

using EndpointList = std::vector<haproxy::Endpoint>;

ApiserverSource gather(const InformerWatch<EndpointList>& watch) {
  Observed<EndpointList> seen = watch.observe();
  ApiserverSource source{.settled = seen.synced};
  for (const EndpointList& list : seen.items) {
    source.endpoints.insert(source.endpoints.end(), list.begin(), list.end());
  }
  return source;
}

}  // namespace

WatchSpec apiserversWatch() {
  return {.key = "apiservers",
          .scope = Scope::kNode,
          .build = [](const WatchContext& context) -> std::shared_ptr<Watch> {
            return std::make_shared<ApiserverWatch>(context);
          }};
}

ApiserverWatch::ApiserverWatch(const WatchContext& context)
    : slices_(context, {.resource = kube::resources::kEndpointSlices,
                        .ns = "default",
                        .label_selector = "kubernetes.io/service-name=kubernetes",
                        .project = endpointsOfSlice,
                        .label = "apiserver-endpointslices",
                        .what = "apiserver endpointslices",
                        .absent_is_empty = true}),
      endpoints_(context, {.resource = kube::resources::kEndpoints,
                           .ns = "default",
                           .field_selector = "metadata.name=kubernetes",
                           .project = endpointsOfEndpoints,
                           .label = "apiserver-endpoints",
                           .what = "apiserver endpoints",
                           .absent_is_empty = true}),
      control_plane_nodes_(context, {.resource = kube::resources::kNodes,
                                     .label_selector = "node-role.kubernetes.io/control-plane",
                                     .decode = kube::decodeNode,
                                     .label = "control-plane-nodes",
                                     .what = "control-plane nodes"}),
      master_nodes_(context, {.resource = kube::resources::kNodes,
                              .label_selector = "node-role.kubernetes.io/master",
                              .decode = kube::decodeNode,
                              .label = "master-nodes",
                              .what = "master nodes"}) {}

ApiserverWatch::~ApiserverWatch() { stop(); }

void ApiserverWatch::start() {
  {
    std::lock_guard lock(mu_);
    stopped_ = false;
  }
  slices_.start();
}

void ApiserverWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  slices_.stop();
  endpoints_.stop();
  control_plane_nodes_.stop();
  master_nodes_.stop();
}

void ApiserverWatch::forEachStats(const WatchStatsFn& f) const {
  // The fallback sources only once started (see observe()).
  slices_.forEachStats(f);
  endpoints_.forEachStats(f);
  control_plane_nodes_.forEachStats(f);
  master_nodes_.forEachStats(f);
}

ObservedApiservers ApiserverWatch::observe() {
  ObservedApiservers observed;
  observed.slices = gather(slices_);
  std::lock_guard lock(mu_);
  if (stopped_ || !observed.slices.settled || !observed.slices.endpoints.empty()) {
    return observed;
  }
  endpoints_.start();
  observed.endpoints = gather(endpoints_);
  if (!observed.endpoints.settled || !observed.endpoints.endpoints.empty()) return observed;
  control_plane_nodes_.start();
  master_nodes_.start();
  observed.nodes.settled = control_plane_nodes_.synced() && master_nodes_.synced();
  std::vector<kube::NodeRecord> nodes = control_plane_nodes_.observe().items;
  for (auto& n : master_nodes_.observe().items) nodes.push_back(std::move(n));
  observed.nodes.endpoints = endpointsOfNodes(nodes);
  return observed;
}

}  // namespace ekco::agent
