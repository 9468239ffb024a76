// PodDisruptionBudgets: the simulated disruption controller's status and evictions that spend
// it (over HTTPS), and an unobserved budget (on a bare Store, where no controller runs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using ::testing::HasSubstr;

json readyPod(const std::string& name, const std::string& app) {
  json p = testing::pod("ns", name, "node-a", {{"app", app}});
  p["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  return p;
}

json budget(const std::string& name, json spec) {
  return {{"apiVersion", "policy/v1"},
          {"kind", "PodDisruptionBudget"},
          {"metadata", {{"name", name}, {"namespace", "ns"}}},
          {"spec", std::move(spec)}};
}

json eviction(const std::string& name) {
  return {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", name}}}};
}

class PdbTest : public ApiTest {
 protected:
  // The budget's status once the controller has observed its generation and `ready(status)`.
  json statusOf(
      const std::string& name,
      const std::function<bool(const json&)>& ready = [](const json&) { return true; }) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    json status;
    while (std::chrono::steady_clock::now() < deadline) {
      auto pdb = server_->get("poddisruptionbudgets.policy", "ns", name);
      if (pdb) {
        status = (*pdb).value("status", json::object());
        if (status.value("observedGeneration", 0) >= (*pdb)["metadata"].value("generation", 1) &&
            ready(status)) {
          return status;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status;
  }
};

TEST_F(PdbTest, StatusCountsHealthyPodsAgainstMinAvailable) {
  start();
  for (const char* n : {"db-0", "db-1", "db-2"}) ASSERT_TRUE(server_->put(readyPod(n, "db")));
  json unready = testing::pod("ns", "db-3", "node-a", {{"app", "db"}});
  ASSERT_TRUE(server_->put(unready));
  ASSERT_TRUE(server_->put(readyPod("web-0", "web")));
  ASSERT_EQ(client_
                ->post("/apis/policy/v1/namespaces/ns/poddisruptionbudgets",
                       budget("db", {{"minAvailable", 2},
                                     {"selector", {{"matchLabels", {{"app", "db"}}}}}}))
                .status,
            201);
  json s = statusOf("db");
  EXPECT_EQ(s["currentHealthy"], 3);
  EXPECT_EQ(s["desiredHealthy"], 2);
  EXPECT_EQ(s["expectedPods"], 4);
  EXPECT_EQ(s["disruptionsAllowed"], 1);
  EXPECT_EQ(s["conditions"][0]["type"], "DisruptionAllowed");
  EXPECT_EQ(s["conditions"][0]["status"], "True");
}

TEST_F(PdbTest, AnEvictionSpendsTheBudgetAndTheNextIsTooManyRequests) {
  start();
  for (const char* n : {"db-0", "db-1"}) ASSERT_TRUE(server_->put(readyPod(n, "db")));
  ASSERT_TRUE(server_->put(
      budget("db", {{"maxUnavailable", 1}, {"selector", {{"matchLabels", {{"app", "db"}}}}}})));
  // maxUnavailable needs the pods' controllers: without any, the expected count is 0.
  EXPECT_EQ(statusOf("db")["disruptionsAllowed"], 0);
  ASSERT_TRUE(server_->put(
      budget("db", {{"minAvailable", "50%"}, {"selector", {{"matchLabels", {{"app", "db"}}}}}})));
  ASSERT_TRUE(server_->store().remove("poddisruptionbudgets.policy", "ns", "db"));
  ASSERT_TRUE(server_->put(
      budget("db", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "db"}}}}}})));
  EXPECT_EQ(statusOf("db",
                     [](const json& s) {
                       return s.value("disruptionsAllowed", 0) == 1;
                     })["disruptionsAllowed"],
            1);
  auto first = client_->post("/api/v1/namespaces/ns/pods/db-0/eviction", eviction("db-0"));
  EXPECT_EQ(first.status, 201) << first.body;
  auto pdb = server_->get("poddisruptionbudgets.policy", "ns", "db");
  EXPECT_EQ((*pdb)["status"]["disruptionsAllowed"], 0);
  EXPECT_TRUE((*pdb)["status"]["disruptedPods"].contains("db-0"));
  auto second = client_->post("/api/v1/namespaces/ns/pods/db-1/eviction", eviction("db-1"));
  ASSERT_EQ(second.status, 429) << second.body;
  json s = second.json();
  EXPECT_EQ(s["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
  EXPECT_EQ(s["details"]["causes"][0]["reason"], "DisruptionBudget");
  EXPECT_THAT(s["details"]["causes"][0]["message"].get<std::string>(),
              HasSubstr("The disruption budget db needs 1 healthy pods and has"));
}

TEST_F(PdbTest, MatchExpressionsSelectOnlyTheirPods) {
  start();
  ASSERT_TRUE(server_->put(readyPod("db-0", "db")));
  ASSERT_TRUE(server_->put(readyPod("web-0", "web")));
  ASSERT_TRUE(server_->put(
      budget("db", {{"minAvailable", 1},
                    {"selector",
                     {{"matchExpressions",
                       {{{"key", "app"}, {"operator", "In"}, {"values", {"db", "cache"}}}}}}}})));
  EXPECT_EQ(statusOf("db")["expectedPods"], 1);
  EXPECT_EQ(client_->post("/api/v1/namespaces/ns/pods/db-0/eviction", eviction("db-0")).status,
            429);
  EXPECT_EQ(client_->post("/api/v1/namespaces/ns/pods/web-0/eviction", eviction("web-0")).status,
            201);
}

TEST_F(PdbTest, PercentagesScaleWithTheControllersReplicas) {
  start();
  ASSERT_TRUE(server_->put({{"apiVersion", "apps/v1"},
                            {"kind", "ReplicaSet"},
                            {"metadata", {{"name", "db"}, {"namespace", "ns"}, {"uid", "rs-db"}}},
                            {"spec", {{"replicas", 4}}}}));
  for (int i = 0; i < 4; ++i) {
    json p = readyPod("db-" + std::to_string(i), "db");
    p["metadata"]["ownerReferences"] = {{{"apiVersion", "apps/v1"},
                                         {"kind", "ReplicaSet"},
                                         {"name", "db"},
                                         {"uid", "rs-db"},
                                         {"controller", true}}};
    ASSERT_TRUE(server_->put(p));
  }
  ASSERT_TRUE(server_->put(
      budget("db", {{"maxUnavailable", "25%"}, {"selector", {{"matchLabels", {{"app", "db"}}}}}})));
  json s = statusOf("db", [](const json& st) { return st.value("expectedPods", 0) == 4; });
  EXPECT_EQ(s["expectedPods"], 4);
  EXPECT_EQ(s["desiredHealthy"], 3);
  EXPECT_EQ(s["disruptionsAllowed"], 1);
}

TEST(PdbStore, ABudgetTheControllerHasNotObservedIsTooManyRequests) {
  base::ManualClock clock;
  Store store(clock, 100);
  json pod = readyPod("db-0", "db");
  ASSERT_TRUE(store.put(pod));
  ASSERT_TRUE(store.put(
      budget("db", {{"minAvailable", 0}, {"selector", {{"matchLabels", {{"app", "db"}}}}}})));
  Reply early = store.evict("ns", "db-0", eviction("db-0"));
  ASSERT_EQ(early.code, 429) << early.body.dump();
  EXPECT_EQ(early.body["details"]["causes"][0]["message"],
            "The disruption budget db is still being processed by the server.");
  EXPECT_EQ(early.body["details"]["retryAfterSeconds"], 10);
  store.disruptionControllerPass();
  EXPECT_EQ(store.evict("ns", "db-0", eviction("db-0")).code, 201);
}

}  // namespace
}  // namespace ekco::kubesim
