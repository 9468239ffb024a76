// resource-scaling: the replica rule as a table, and the controller against ekco-kubesim as the
// ekco ServiceAccount with deploy/ and deploy-monitoring/ RBAC enforced (a call the manifests do
// not grant fails the test), with kURL's Prometheus and Alertmanager custom resources.
#include "agent/features/scaling/resource_scaling.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;
using ::testing::HasSubstr;

TEST(ResourceScalingRule, ReplicasFollowTheNodeCountUpToTheCapAndNeverFightAHigherHandSetCount) {
  struct Case {
    std::int64_t current, nodes, cap;
    std::optional<std::int64_t> want;
  };
  const Case cases[] = {
      {1, 1, 2, std::nullopt},  // one node: one Prometheus, as installed
      {1, 2, 2, 2},             // a node joined
      {1, 5, 2, 2},             // capped
      {2, 1, 2, 1},             // a node left (EKCO lowers too)
      {3, 1, 3, 1},             // Alertmanager installed with 3 on a one-node cluster
      {3, 2, 3, 2},
      {3, 3, 3, std::nullopt},
      {5, 3, 3, std::nullopt},  // set by hand above the cap: left alone
      {4, 1, 2, std::nullopt},
      {0, 3, 2, 2},             // scaled to zero by hand: within the cap, so raised (as EKCO)
      {1, 0, 2, std::nullopt},  // no nodes seen: nothing to decide on
  };
  for (const Case& c : cases) {
    EXPECT_EQ(desiredReplicas(c.current, c.nodes, c.cap), c.want)
        << "current=" << c.current << " nodes=" << c.nodes << " cap=" << c.cap;
  }
}

json monitoringObject(const std::string& kind, const std::string& name,
                      std::optional<int> replicas) {
  json spec = json::object();
  if (replicas) spec["replicas"] = *replicas;
  return {{"apiVersion", "monitoring.coreos.com/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}, {"namespace", "monitoring"}}},
          {"spec", spec}};
}

kube::NodeRecord node(const std::string& name) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  return n;
}

class ResourceScalingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<json> objects = {monitoringObject("Prometheus", "k8s", std::nullopt),
                                 monitoringObject("Alertmanager", "prometheus-alertmanager", 3)};
    ASSERT_NO_FATAL_FAILURE(sa_.start(dir_.path(), std::move(objects),
                                      {"/deploy", "/deploy-monitoring"}, clock_, "node-a"));
    server_ = &sa_.server();
    client_ = &sa_.client();
  }
  void TearDown() override {
    // Every call the controller made is one the manifests grant.
    // Every call the code under test made is one the manifests grant.
    sa_.expectEveryRequestAllowed();
  }

  ResourceScalingController controller(bool dry_run = false) {
    return ResourceScalingController(
        [this] { return ObservedNodes{.synced = synced_, .nodes = nodes_}; }, *client_,
        ResourceScalingOptions{
            .effects = {.dry_run = dry_run,
                        .is_leader_fresh = [this] { return leader_fresh_; },
                        .record_event =
                            [this](const kube::EventSpec& e) {
                              ASSERT_TRUE(client_->recordEvent(e));
                              events_.push_back(e.involved_name + " " + e.reason + ": " +
                                                e.message);
                            },
                        .count_action = [this](std::string_view) { ++actions_; }}});
  }
  void setNodes(int count) {
    nodes_.clear();
    for (int i = 0; i < count; ++i) nodes_.push_back(node("node-" + std::to_string(i)));
  }
  json replicas(const std::string& plural, const std::string& name) const {
    auto object = server_->get(plural + ".monitoring.coreos.com", "monitoring", name);
    if (!object) return "absent";
    return (*object)["spec"].value("replicas", json(nullptr));
  }

  testing::TempDir dir_{"ekco-scaling"};
  base::SystemClock clock_;
  testing::ServiceAccountCluster sa_;
  kubesim::Server* server_ = nullptr;
  kube::RestClient* client_ = nullptr;
  bool synced_ = true;
  std::vector<kube::NodeRecord> nodes_;
  bool leader_fresh_ = true;
  std::vector<std::string> events_;
  int actions_ = 0;
};

TEST_F(ResourceScalingTest, FollowsNodesJoiningAndLeavingWithAnEventPerChange) {
  auto c = controller();
  setNodes(1);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(replicas("prometheuses", "k8s"), nullptr);  // unset = 1 = min(2, 1): untouched
  EXPECT_EQ(replicas("alertmanagers", "prometheus-alertmanager"), 1);
  EXPECT_THAT(r->plan, HasSubstr("Prometheus monitoring/k8s: 1 replicas, as wanted"));
  EXPECT_THAT(r->plan, HasSubstr("scaled Alertmanager monitoring/prometheus-alertmanager: "
                                 "replicas 3 -> 1 (1 nodes: min(3, 1) = 1)"));
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(std::chrono::minutes(1)));

  setNodes(3);
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(replicas("prometheuses", "k8s"), 2);
  EXPECT_EQ(replicas("alertmanagers", "prometheus-alertmanager"), 3);
  EXPECT_EQ(r->summary, "scaled");

  r = c.reconcile();  // nothing left to do
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "replicas as wanted");
  EXPECT_EQ(actions_, 3);
  EXPECT_THAT(events_,
              ::testing::ElementsAre(
                  "prometheus-alertmanager Scaled: ekco set spec.replicas 3 -> 1 (1 nodes: "
                  "min(3, 1) = 1)",
                  "k8s Scaled: ekco set spec.replicas 1 -> 2 (3 nodes: min(2, 3) = 2)",
                  "prometheus-alertmanager Scaled: ekco set spec.replicas 1 -> 3 (3 nodes: "
                  "min(3, 3) = 3)"));
  const json status = c.status();
  EXPECT_EQ(status["targets"]["prometheuses/monitoring/k8s"]["replicas"], 2);
  EXPECT_EQ(status["history"].size(), 3u);
}

TEST_F(ResourceScalingTest, LeavesAHandSetCountAboveTheCapAlone) {
  ASSERT_TRUE(server_->put(monitoringObject("Prometheus", "k8s", 4)));
  setNodes(3);
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(replicas("prometheuses", "k8s"), 4);
  EXPECT_THAT(r->plan, HasSubstr("4 replicas, above the cap of 2 (set by hand): left alone"));
}

TEST_F(ResourceScalingTest, AbsentResourcesAreSkippedAndADryRunChangesNothing) {
  ASSERT_TRUE(server_->remove("prometheuses.monitoring.coreos.com", "monitoring", "k8s"));
  setNodes(2);
  auto dry = controller(/*dry_run=*/true);
  auto r = dry.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("Prometheus monitoring/k8s: absent"));
  EXPECT_THAT(r->plan, HasSubstr("would scale Alertmanager monitoring/prometheus-alertmanager: "
                                 "replicas 3 -> 2"));
  EXPECT_EQ(r->summary, "would scale (dry run)");
  EXPECT_EQ(replicas("alertmanagers", "prometheus-alertmanager"), 3);
  EXPECT_TRUE(events_.empty());
  EXPECT_EQ(actions_, 0);
}

TEST_F(ResourceScalingTest, NothingIsPatchedWithoutAFreshLeaseOrBeforeTheNodeCacheSynced) {
  setNodes(1);
  synced_ = false;
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "waiting for the node cache");
  synced_ = true;
  leader_fresh_ = false;
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("leadership is not fresh"));
  EXPECT_EQ(replicas("alertmanagers", "prometheus-alertmanager"), 3);
}

// The guarantee the controller's patch rests on, against the API: a JSON patch whose "test" of
// metadata.resourceVersion fails (someone changed the object after ekco read it) is refused
// with kInvalidArgument and changes nothing; the controller then looks again a second later.
TEST_F(ResourceScalingTest, APatchOnAStaleReadIsRefusedByTheApi) {
  const kube::Resource alertmanagers = kurlMonitoringResources()[1].resource;
  auto read = client_->get(alertmanagers, "monitoring", "prometheus-alertmanager");
  ASSERT_TRUE(read) << read.error().message();
  const std::string stale = (*read)["metadata"]["resourceVersion"];
  ASSERT_TRUE(server_->put(monitoringObject("Alertmanager", "prometheus-alertmanager", 5)));
  auto patched = client_->patch(
      alertmanagers, "monitoring", "prometheus-alertmanager", kube::PatchType::kJson,
      json::array({{{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", stale}},
                   {{"op", "add"}, {"path", "/spec/replicas"}, {"value", 1}}}));
  ASSERT_FALSE(patched);
  EXPECT_EQ(patched.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(replicas("alertmanagers", "prometheus-alertmanager"), 5);
}

}  // namespace
}  // namespace ekco::agent
