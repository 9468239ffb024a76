// kubesim's simulated kubelets and kube-controller-manager controllers (node_lifecycle.h), on a
// ManualClock with the passes run by hand (Server::runKubelet): heartbeats, Ready → Unknown and
// the unreachable taints after the node-monitor grace period, the taint manager's evictions at
// tolerationSeconds, the pod GC's out-of-service force deletes, the attach-detach controller's
// releases and the StatefulSet pod's way to another node.
#include "tests/kubesim/controllers/node_lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "base/clock.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

json node(const std::string& name, bool unschedulable = false) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", name}}},
            {"spec", {{"unschedulable", unschedulable}}},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  return n;
}

class NodeLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kubesim-lifecycle-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::vector<json> objects = {namespaceObject("storage"), node("node-a", true), node("node-b"),
                                 node("node-c")};
    for (json& o : statefulSetWithVolume("storage", "db", 30)) objects.push_back(o);
    ClusterControllersOptions controllers;  // Kubernetes' own timings
    controllers.enabled = true;
    auto server = Server::start({.out_dir = dir_.string(),
                                 .objects = objects,
                                 .clock = &clock_,
                                 .kubelet_interval = hours(1),  // passes run by hand only
                                 .controllers = controllers});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    for (const char* n : {"node-a", "node-b", "node-c"}) {
      server_->nodeLifecycle().startKubelet(n, std::string("boot-") + n);
    }
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // One pass after `d` of simulated time.
  void after(std::chrono::milliseconds d) {
    clock_.advance(d);
    server_->runKubelet();
  }
  json get(const std::string& resource, const std::string& ns, const std::string& name) {
    return server_->get(resource, ns, name).value_or(json());
  }
  std::string ready(const std::string& n) {
    const json node_object = get("nodes", "", n);
    for (const json& c : node_object["status"]["conditions"]) {
      if (c["type"] == "Ready") return c["status"];
    }
    return "";
  }
  std::vector<std::string> taints(const std::string& n) {
    std::vector<std::string> out;
    for (const json& t : get("nodes", "", n)["spec"].value("taints", json::array())) {
      out.push_back(t.value("key", "") + ":" + t.value("effect", ""));
    }
    return out;
  }
  std::vector<std::string> attachments() {
    std::vector<std::string> out;
    auto r = server_->store().findQualified("volumeattachments.storage.k8s.io");
    if (!r) return out;
    const Reply list = server_->store().list(*r, "", {});
    for (const json& va : list.body["items"]) {
      out.push_back(va["spec"]["source"].value("persistentVolumeName", "") + "@" +
                    va["spec"].value("nodeName", ""));
    }
    return out;
  }
  // db-0 running on node-b with its volume attached there.
  void runOnB() {
    after(milliseconds(10));  // create + bind
    after(milliseconds(10));  // attach + Running
    json pod = get("pods", "storage", "db-0");
    ASSERT_EQ(pod["spec"]["nodeName"], "node-b");
    ASSERT_EQ(pod["status"]["phase"], "Running");
    ASSERT_THAT(attachments(), ::testing::ElementsAre("pv-db@node-b"));
  }

  fs::path dir_;
  base::ManualClock clock_;
  std::unique_ptr<Server> server_;
};

TEST_F(NodeLifecycleTest, KubeletsHeartbeatAndReportTheirBootId) {
  server_->runKubelet();
  json lease = get("leases.coordination.k8s.io", "kube-node-lease", "node-b");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-b");
  const std::string first = lease["spec"]["renewTime"];
  EXPECT_EQ(get("nodes", "", "node-b")["status"]["nodeInfo"]["bootID"], "boot-node-b");
  after(seconds(5));  // within the 10 s renew interval: not renewed
  EXPECT_EQ(get("leases.coordination.k8s.io", "kube-node-lease", "node-b")["spec"]["renewTime"],
            first);
  after(seconds(5));
  EXPECT_NE(get("leases.coordination.k8s.io", "kube-node-lease", "node-b")["spec"]["renewTime"],
            first);
}

TEST_F(NodeLifecycleTest, ASilentNodeTurnsUnknownAfterTheGraceAndBackWhenItsKubeletReturns) {
  runOnB();
  server_->nodeLifecycle().stopKubelet("node-b");
  after(seconds(35));
  EXPECT_EQ(ready("node-b"), "True");  // the last renewal is 35 s old: within the 40 s grace
  after(seconds(10));
  EXPECT_EQ(ready("node-b"), "Unknown");
  EXPECT_THAT(taints("node-b"),
              ::testing::ElementsAre("node.kubernetes.io/unreachable:NoExecute",
                                     "node.kubernetes.io/unreachable:NoSchedule"));
  EXPECT_EQ(ready("node-c"), "True");
  server_->nodeLifecycle().startKubelet("node-b", "boot-node-b-2");
  after(seconds(1));  // the kubelet posts Ready
  after(seconds(5));  // the next monitor pass removes the taints
  EXPECT_EQ(ready("node-b"), "True");
  EXPECT_TRUE(taints("node-b").empty());
  EXPECT_EQ(get("nodes", "", "node-b")["status"]["nodeInfo"]["bootID"], "boot-node-b-2");
}

TEST_F(NodeLifecycleTest, WithoutOutOfServiceThePodIsEvictedAfter300sAndTheVolumeWaits6Minutes) {
  runOnB();
  server_->nodeLifecycle().stopKubelet("node-b");
  after(seconds(45));  // unreachable since now
  after(seconds(295));
  EXPECT_FALSE(get("pods", "storage", "db-0")["metadata"].contains("deletionTimestamp"));
  after(seconds(10));  // DefaultTolerationSeconds 300 passed: evicted, never confirmed
  json pod = get("pods", "storage", "db-0");
  EXPECT_TRUE(pod["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(pod["spec"]["nodeName"], "node-b");
  // A person (or clear-nodes) force-deletes it: re-created on node-c, but the volume is still
  // attached to node-b (Multi-Attach) until the attach-detach controller gives up waiting.
  ASSERT_TRUE(server_->store()
                  .remove(*server_->store().findQualified("pods"), "storage", "db-0",
                          {.grace_period_seconds = 0})
                  .code == 200);
  after(seconds(1));
  after(seconds(1));
  pod = get("pods", "storage", "db-0");
  EXPECT_EQ(pod["spec"]["nodeName"], "node-c");
  EXPECT_EQ(pod["status"]["phase"], "Pending");
  EXPECT_THAT(attachments(), ::testing::ElementsAre("pv-db@node-b"));
  after(seconds(358));
  EXPECT_EQ(get("pods", "storage", "db-0")["status"]["phase"], "Pending");
  after(seconds(2));  // 6 minutes: force detach; then attach on node-c
  after(milliseconds(10));
  EXPECT_EQ(get("pods", "storage", "db-0")["status"]["phase"], "Running");
  EXPECT_THAT(attachments(), ::testing::ElementsAre("pv-db@node-c"));
}

TEST_F(NodeLifecycleTest, OutOfServiceMakesThePodGcForceDeleteAndTheVolumeMoveAtOnce) {
  runOnB();
  server_->nodeLifecycle().stopKubelet("node-b");
  after(seconds(45));
  ASSERT_EQ(ready("node-b"), "Unknown");
  json b = get("nodes", "", "node-b");
  b["spec"]["taints"].push_back({{"key", "node.kubernetes.io/out-of-service"},
                                 {"value", "nodeshutdown"},
                                 {"effect", "NoExecute"}});
  ASSERT_TRUE(server_->put(b));
  after(milliseconds(10));  // the taint manager evicts at once (not tolerated)
  EXPECT_TRUE(get("pods", "storage", "db-0")["metadata"].contains("deletionTimestamp"));
  after(seconds(20));  // the pod GC's next pass: deleted without grace; volume released
  after(milliseconds(10));
  after(milliseconds(10));
  json pod = get("pods", "storage", "db-0");
  EXPECT_EQ(pod["spec"]["nodeName"], "node-c");
  EXPECT_EQ(pod["status"]["phase"], "Running");
  EXPECT_THAT(attachments(), ::testing::ElementsAre("pv-db@node-c"));
}

TEST_F(NodeLifecycleTest, NodesWithoutANodeLeaseAndDisabledSimulationAreLeftAlone) {
  ASSERT_TRUE(server_->put(node("node-x")));
  after(hours(1));
  EXPECT_EQ(ready("node-x"), "True");
  EXPECT_TRUE(taints("node-x").empty());
}

TEST(NodeLifecycleScaled, ScalesEveryPeriod) {
  auto o = ClusterControllersOptions::scaled(0.05);
  EXPECT_TRUE(o.enabled);
  EXPECT_EQ(o.node_monitor_grace_period, milliseconds(2000));
  EXPECT_EQ(o.node_lease_renew_interval, milliseconds(500));
  EXPECT_EQ(o.pod_gc_period, milliseconds(1000));
  EXPECT_EQ(o.max_wait_for_unmount, milliseconds(18000));
  EXPECT_DOUBLE_EQ(o.toleration_scale, 0.05);
}

}  // namespace
}  // namespace ekco::kubesim
