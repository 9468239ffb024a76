// Server-side Tables (table.h): the printers' columns and cells, content negotiation, and the
// Table as kubesim serves it over HTTPS (ages measured on the server's clock).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/features/table.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;

TEST(Table, HumanDurationMatchesApimachinery) {
  using std::chrono::hours;
  using std::chrono::minutes;
  using std::chrono::seconds;
  EXPECT_EQ(table::humanDuration(seconds(-5)), "<invalid>");
  EXPECT_EQ(table::humanDuration(seconds(-1)), "0s");
  EXPECT_EQ(table::humanDuration(seconds(119)), "119s");
  EXPECT_EQ(table::humanDuration(seconds(125)), "2m5s");
  EXPECT_EQ(table::humanDuration(minutes(9)), "9m");
  EXPECT_EQ(table::humanDuration(minutes(179)), "179m");
  EXPECT_EQ(table::humanDuration(hours(3) + minutes(20)), "3h20m");
  EXPECT_EQ(table::humanDuration(hours(8)), "8h");
  EXPECT_EQ(table::humanDuration(hours(47)), "47h");
  EXPECT_EQ(table::humanDuration(hours(50)), "2d2h");
  EXPECT_EQ(table::humanDuration(hours(24 * 30)), "30d");
  EXPECT_EQ(table::humanDuration(hours(24 * 365 * 3 + 24 * 10)), "3y10d");
  EXPECT_EQ(table::humanDuration(hours(24 * 365 * 9)), "9y");
}

json podWith(json status, json meta = json::object()) {
  meta["name"] = "p";
  return {{"metadata", meta},
          {"spec", {{"containers", {{{"name", "a"}}, {{"name", "b"}}}}}},
          {"status", std::move(status)}};
}

json container(json state, bool ready = false, json last = json::object()) {
  return {{"ready", ready}, {"state", std::move(state)}, {"lastState", std::move(last)}};
}

TEST(Table, PodStatusIsWhatKubectlShows) {
  EXPECT_EQ(table::podStatus(podWith({{"phase", "Pending"}})), "Pending");
  EXPECT_EQ(
      table::podStatus(podWith({{"phase", "Running"},
                                {"containerStatuses",
                                 {container({{"running", json::object()}}, true),
                                  container({{"waiting", {{"reason", "CrashLoopBackOff"}}}})}}})),
      "CrashLoopBackOff");
  EXPECT_EQ(table::podStatus(podWith(
                {{"phase", "Succeeded"},
                 {"containerStatuses",
                  {container({{"terminated", {{"reason", "Completed"}, {"exitCode", 0}}}}),
                   container({{"terminated", {{"reason", "Completed"}, {"exitCode", 0}}}})}}})),
            "Completed");
  EXPECT_EQ(table::podStatus(podWith(
                {{"phase", "Running"},
                 {"containerStatuses", {container({{"terminated", {{"exitCode", 137}}}})}}})),
            "ExitCode:137");
  EXPECT_EQ(table::podStatus(
                podWith({{"phase", "Running"}}, {{"deletionTimestamp", "2026-01-01T00:00:00Z"}})),
            "Terminating");
  EXPECT_EQ(table::podStatus(podWith({{"phase", "Running"}, {"reason", "NodeLost"}},
                                     {{"deletionTimestamp", "2026-01-01T00:00:00Z"}})),
            "Unknown");
  EXPECT_EQ(table::podStatus(podWith({{"phase", "Failed"}, {"reason", "Evicted"}})), "Evicted");
  json init = podWith({{"phase", "Pending"},
                       {"initContainerStatuses",
                        {container({{"terminated", {{"exitCode", 0}}}}),
                         container({{"running", json::object()}})}}});
  init["spec"]["initContainers"] = {{{"name", "i1"}}, {{"name", "i2"}}};
  EXPECT_EQ(table::podStatus(init), "Init:1/2");
  init["status"]["initContainerStatuses"][1] =
      container({{"waiting", {{"reason", "ErrImagePull"}}}});
  EXPECT_EQ(table::podStatus(init), "Init:ErrImagePull");
}

TEST(Table, AcceptHeadersChooseTheTable) {
  EXPECT_EQ(table::wantsTable("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as="
                              "Table;v=v1beta1;g=meta.k8s.io,application/json"),
            "v1");
  EXPECT_EQ(table::wantsTable("application/json;as=Table;v=v1beta1;g=meta.k8s.io"), "v1beta1");
  EXPECT_EQ(table::wantsTable("application/json"), "");
  EXPECT_EQ(table::wantsTable(""), "");
  EXPECT_EQ(table::wantsTable("application/vnd.kubernetes.protobuf,application/json"), "");
  EXPECT_EQ(table::wantsTable("application/json, application/json;as=Table;v=v1;g=meta.k8s.io"),
            "");
  EXPECT_EQ(table::wantsTable("text/csv"), std::nullopt);
  EXPECT_EQ(table::wantsTable("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"),
            std::nullopt);
}

using TableServerTest = ApiTest;

constexpr const char* kTableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io";

TEST_F(TableServerTest, ListsAndObjectsComeAsTablesWithAgesOnTheServerClock) {
  start();
  ASSERT_TRUE(server_->put(testing::pod("default", "web", "node-a")));
  clock_.advance(std::chrono::minutes(5));
  testing::TestClient client(*server_);
  client.setAccept(kTableAccept);
  auto r = client.get("/api/v1/namespaces/default/pods?includeObject=Object");
  ASSERT_EQ(r.status, 200) << r.body;
  json t = r.json();
  EXPECT_EQ(t["kind"], "Table");
  EXPECT_EQ(t["metadata"]["resourceVersion"].is_string(), true);
  ASSERT_EQ(t["rows"].size(), 1u);
  EXPECT_EQ(t["rows"][0]["cells"],
            json({"web", "0/1", "Running", "0", "5m", "<none>", "node-a", "<none>", "<none>"}));
  EXPECT_EQ(t["rows"][0]["object"]["kind"], "Pod");
  auto nodes = client.get("/api/v1/nodes/node-b");
  EXPECT_EQ(nodes.json()["rows"][0]["cells"],
            json({"node-b", "NotReady", "<none>", "5m", "", "<none>", "<none>", "<unknown>",
                  "<unknown>", "<unknown>"}));
  EXPECT_EQ(nodes.json()["rows"][0]["object"]["kind"], "PartialObjectMetadata");
  EXPECT_EQ(client_->get("/api/v1/namespaces/default/pods").json()["kind"], "PodList");
  client.setAccept("text/csv");
  auto refused = client.get("/api/v1/pods");
  EXPECT_EQ(refused.status, 406);
  EXPECT_EQ(refused.json()["reason"], "NotAcceptable");
}

TEST_F(TableServerTest, AWatchAskingForTablesGetsOneRowTablesPerEvent) {
  start();
  ASSERT_TRUE(server_->put(testing::pod("default", "web", "node-a")));
  testing::TestClient client(*server_);
  client.setAccept(kTableAccept);
  auto events = client.watch(
      "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=2",
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(5));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[0]["object"]["kind"], "Table");
  EXPECT_EQ(events[0]["object"]["rows"][0]["cells"][0], "web");
}

}  // namespace
}  // namespace ekco::kubesim
