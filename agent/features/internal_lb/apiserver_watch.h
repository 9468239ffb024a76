// The internal load balancer's watch of the apiserver addresses (agent/controller/watch.h):
// the kubernetes Service's EndpointSlices, and only when those are listed and empty (a cluster
// without EndpointSlices for it), its Endpoints, and only when those are too, the control-plane
// nodes. Most agents never run the fallbacks: one informer, not four.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "agent/controller/watch.h"
#include "haproxy/render.h"
#include "kube/decode/records.h"

namespace ekco::agent {

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

// "apiservers" (node scope).
WatchSpec apiserversWatch();

class ApiserverWatch final : public Watch {
 public:
  explicit ApiserverWatch(const WatchContext& context);
  ~ApiserverWatch() override;

  void start() override;  // the EndpointSlices
  void stop() override;
  void forEachStats(const WatchStatsFn& f) const override;

  // A fallback source is started when every source before it is listed and empty; until it has
  // listed, it is unsettled (the controller looks again every 250 ms meanwhile).
  ObservedApiservers observe();

 private:
  using EndpointList = std::vector<haproxy::Endpoint>;
  InformerWatch<EndpointList> slices_;
  InformerWatch<EndpointList> endpoints_;
  // Label selectors cannot say "a or b": one narrow informer per role label.
  InformerWatch<kube::NodeRecord> control_plane_nodes_;
  InformerWatch<kube::NodeRecord> master_nodes_;
  std::mutex mu_;
  bool stopped_ = true;
};

}  // namespace ekco::agent
