// kubesim's garbage collector over HTTPS: propagationPolicy Background, Foreground and Orphan
// on a Deployment → ReplicaSet → Pod chain, dependents of a missing owner, an invalid policy.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "tests/kubesim/api_tests/api_test_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using ::testing::HasSubstr;

bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// A valid Deployment or ReplicaSet spec (a selector and a pod template).
json workloadSpec() {
  return {{"replicas", 1},
          {"selector", {{"matchLabels", {{"app", "web"}}}}},
          {"template",
           {{"metadata", {{"labels", {{"app", "web"}}}}},
            {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}};
}

json ownerRef(const json& owner, bool block) {
  return {{"apiVersion", owner["apiVersion"]},
          {"kind", owner["kind"]},
          {"name", owner["metadata"]["name"]},
          {"uid", owner["metadata"]["uid"]},
          {"controller", true},
          {"blockOwnerDeletion", block}};
}

class GcTest : public ApiTest {
 protected:
  // Creates deployment "web", replicaset "web-1" and pod "web-1-a" (on node-a when `on_node`:
  // a graceful 30 s deletion the simulated kubelet finishes once the clock passes it).
  void chain(bool on_node) {
    start();
    deployment_ =
        client_
            ->post("/apis/apps/v1/namespaces/ns/deployments", {{"apiVersion", "apps/v1"},
                                                               {"kind", "Deployment"},
                                                               {"metadata", {{"name", "web"}}},
                                                               {"spec", workloadSpec()}})
            .json();
    ASSERT_TRUE(deployment_["metadata"].contains("uid")) << deployment_.dump();
    json rs = client_
                  ->post("/apis/apps/v1/namespaces/ns/replicasets",
                         {{"apiVersion", "apps/v1"},
                          {"kind", "ReplicaSet"},
                          {"metadata",
                           {{"name", "web-1"}, {"ownerReferences", {ownerRef(deployment_, true)}}}},
                          {"spec", workloadSpec()}})
                  .json();
    ASSERT_TRUE(rs["metadata"].contains("uid")) << rs.dump();
    json p = testing::pod("ns", "web-1-a", on_node ? "node-a" : "");
    p["metadata"]["ownerReferences"] = {ownerRef(rs, true)};
    auto created = client_->post("/api/v1/namespaces/ns/pods", p);
    ASSERT_EQ(created.status, 201) << created.body;
  }
  bool gone(const char* resource, const char* name) {
    return !server_->get(resource, "ns", name).has_value();
  }
  json deployment_;
};

TEST_F(GcTest, BackgroundDeletionRemovesTheOwnerThenItsDependents) {
  chain(false);
  auto r = client_->request("DELETE", "/apis/apps/v1/namespaces/ns/deployments/web");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(gone("deployments.apps", "web"));
  EXPECT_TRUE(eventually([&] { return gone("replicasets.apps", "web-1"); }));
  EXPECT_TRUE(eventually([&] { return gone("pods", "web-1-a"); }));
}

TEST_F(GcTest, ForegroundDeletionKeepsTheOwnersUntilTheBlockingDependentsAreGone) {
  chain(true);
  auto r = client_->request("DELETE", "/apis/apps/v1/namespaces/ns/deployments/web",
                            R"({"kind":"DeleteOptions","propagationPolicy":"Foreground"})");
  ASSERT_EQ(r.status, 200) << r.body;
  json owner = r.json();
  EXPECT_TRUE(owner["metadata"].contains("deletionTimestamp"));
  EXPECT_EQ(owner["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  // The replicaset is deleted in the foreground too; the pod is terminating on a live node.
  ASSERT_TRUE(eventually([&] {
    auto pod = server_->get("pods", "ns", "web-1-a");
    return pod && (*pod)["metadata"].contains("deletionTimestamp");
  }));
  auto rs = server_->get("replicasets.apps", "ns", "web-1");
  ASSERT_TRUE(rs);
  EXPECT_EQ((*rs)["metadata"]["finalizers"], json::array({"foregroundDeletion"}));
  EXPECT_FALSE(gone("deployments.apps", "web"));
  clock_.advance(std::chrono::seconds(31));  // the pod's grace period passes
  EXPECT_TRUE(eventually([&] { return gone("pods", "web-1-a"); }));
  EXPECT_TRUE(eventually([&] { return gone("replicasets.apps", "web-1"); }));
  EXPECT_TRUE(eventually([&] { return gone("deployments.apps", "web"); }));
}

TEST_F(GcTest, OrphanDeletionLeavesTheDependentsWithoutTheOwnerReference) {
  chain(false);
  auto r = client_->request(
      "DELETE", "/apis/apps/v1/namespaces/ns/replicasets/web-1?propagationPolicy=Orphan");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["metadata"]["finalizers"], json::array({"orphan"}));
  EXPECT_TRUE(eventually([&] { return gone("replicasets.apps", "web-1"); }));
  auto pod = server_->get("pods", "ns", "web-1-a");
  ASSERT_TRUE(pod);
  EXPECT_FALSE((*pod)["metadata"].contains("ownerReferences")) << pod->dump();
  EXPECT_FALSE(gone("deployments.apps", "web"));
}

TEST_F(GcTest, ADependentCreatedForAMissingOwnerIsCollected) {
  start();
  json p = testing::pod("ns", "stray", "");
  p["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                       {"kind", "ReplicaSet"},
                                       {"name", "nope"},
                                       {"uid", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"}}};
  ASSERT_EQ(client_->post("/api/v1/namespaces/ns/pods", p).status, 201);
  EXPECT_TRUE(eventually([&] { return gone("pods", "stray"); }));
}

TEST_F(GcTest, AnUnknownPropagationPolicyIsInvalid) {
  start();
  ASSERT_TRUE(server_->put(testing::configMap("ns", "a")));
  auto r = client_->request("DELETE", "/api/v1/namespaces/ns/configmaps/a?propagationPolicy=Bogus");
  ASSERT_EQ(r.status, 422);
  EXPECT_EQ(r.json()["message"],
            "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: "
            "\"Bogus\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"");
  EXPECT_FALSE(gone("configmaps", "a"));
}

}  // namespace
}  // namespace ekco::kubesim
