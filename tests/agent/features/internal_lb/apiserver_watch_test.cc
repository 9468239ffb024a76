// The internal load balancer's apiserver watch (agent/features/internal_lb/apiserver_watch.h), run
// by the runtime's watch registry, against ekco-kubesim with the ekco
// ServiceAccount's RBAC: the fallback sources (Endpoints, then the control-plane nodes) start
// only when the sources before them are listed and empty, so an agent on a cluster with the
// kubernetes EndpointSlices runs one informer for them, not four.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>

#include "agent/features/internal_lb/apiserver_watch.h"
#include "agent/runtime/watches.h"
#include "tests/agent/sa_client.h"
#include "tests/kube/temp_root.h"

namespace ekco::agent {
namespace {

using std::chrono::milliseconds;
using ::testing::Contains;
using ::testing::Not;

class ApiserverWatchTest : public ::testing::Test {
 protected:
  void start(std::vector<nlohmann::json> objects) {
    ASSERT_NO_FATAL_FAILURE(cluster_.start(dir_.dir(), std::move(objects), {"/deploy"}, clock_));
    watches_ = std::make_unique<WatchRegistry>(cluster_.client(), clock_, config_, "a");
    auto watch = watches_->require<ApiserverWatch>(apiserversWatch());
    ASSERT_TRUE(watch) << watch.error().message();
    watch_ = std::move(*watch);
    watches_->start();
  }
  void TearDown() override {
    if (watches_) watches_->stop();
    cluster_.expectEveryRequestAllowed();
  }

  // Polls apiservers() as the controller does while unsettled (every 250 ms) until `done`.
  template <typename F>
  ObservedApiservers waitFor(F done) {
    ObservedApiservers observed;
    for (int i = 0; i < 200; ++i) {
      observed = watch_->observe();
      if (done(observed)) break;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return observed;
  }

  std::set<std::string> cacheLabels() const {
    std::set<std::string> labels;
    watches_->forEachStats(
        [&](const std::string& label, const kube::InformerStats&) { labels.insert(label); });
    return labels;
  }

  // Requests of the caches for a resource (list or watch).
  int requestsFor(const std::string& resource) {
    int n = 0;
    for (const auto& r : cluster_.server().requestLog()) {
      if (r.resource == resource && (r.verb == "list" || r.verb == "watch")) ++n;
    }
    return n;
  }

  kube::testing::TempRoot dir_;
  base::SystemClock clock_;
  testing::ServiceAccountCluster cluster_;
  Config config_;
  std::unique_ptr<WatchRegistry> watches_;
  std::shared_ptr<ApiserverWatch> watch_;
};

nlohmann::json controlPlaneNode(const std::string& name, const std::string& ip) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", name}, {"labels", {{"node-role.kubernetes.io/control-plane", ""}}}}},
      {"status", {{"addresses", {{{"type", "InternalIP"}, {"address", ip}}}}}}};
}

TEST_F(ApiserverWatchTest, WithEndpointSlicesTheFallbackSourcesNeverStart) {
  ASSERT_NO_FATAL_FAILURE(start({kubesim::kubernetesEndpointSlice("kubernetes", {"10.0.0.1"}, 6443),
                                 controlPlaneNode("cp-1", "10.0.0.9")}));
  auto observed = waitFor([](const ObservedApiservers& o) { return o.slices.settled; });
  ASSERT_TRUE(observed.slices.settled);
  ASSERT_EQ(observed.slices.endpoints.size(), 1U);
  std::this_thread::sleep_for(milliseconds(300));
  (void)watch_->observe();
  EXPECT_FALSE(observed.endpoints.settled);  // not asked: the slices decide
  EXPECT_THAT(cacheLabels(), Contains("apiserver-endpointslices"));
  EXPECT_THAT(cacheLabels(), Not(Contains("apiserver-endpoints")));
  EXPECT_THAT(cacheLabels(), Not(Contains("control-plane-nodes")));
  EXPECT_EQ(requestsFor("endpoints"), 0);
}

TEST_F(ApiserverWatchTest, WithoutEndpointSlicesTheNodesAreTheLastResort) {
  ASSERT_NO_FATAL_FAILURE(start({controlPlaneNode("cp-1", "10.0.0.9")}));
  auto observed = waitFor([](const ObservedApiservers& o) { return o.nodes.settled; });
  EXPECT_TRUE(observed.slices.settled);
  EXPECT_TRUE(observed.slices.endpoints.empty());
  EXPECT_TRUE(observed.endpoints.settled);
  EXPECT_TRUE(observed.endpoints.endpoints.empty());
  ASSERT_TRUE(observed.nodes.settled);
  ASSERT_EQ(observed.nodes.endpoints.size(), 1U);
  EXPECT_EQ(observed.nodes.endpoints[0].host, "10.0.0.9");
  EXPECT_THAT(cacheLabels(), Contains("apiserver-endpoints"));
  EXPECT_THAT(cacheLabels(), Contains("control-plane-nodes"));
  EXPECT_THAT(cacheLabels(), Contains("master-nodes"));
}

}  // namespace
}  // namespace ekco::agent
