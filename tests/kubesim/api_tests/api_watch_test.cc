// kubesim's watches at the HTTP level (after a list, replays, compaction, bookmarks, timeouts,
// selectors), exec over WebSocket, injected faults, concurrent clients. (api_test.cc: the other
// verbs.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "base/clock.h"
#include "tests/kubesim/api_tests/api_test_support.h"
#include "tests/kubesim/api_tests/test_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using testing::configMap;
using ::testing::HasSubstr;
using testing::names;
using testing::node;
using testing::pod;
using testing::TestClient;

TEST_F(ApiTest, WatchStreamsAddedModifiedAndDeletedAfterTheListResourceVersion) {
  start();
  std::string rv =
      client_->get("/api/v1/namespaces/ns/configmaps").json()["metadata"]["resourceVersion"];
  std::thread writer;
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return e.size() >= 3; }, std::chrono::seconds(5),
      [&] {
        writer = std::thread([&] {
          json cm = client_->post("/api/v1/namespaces/ns/configmaps", configMap("ns", "a")).json();
          cm["data"]["k"] = "v2";
          client_->put("/api/v1/namespaces/ns/configmaps/a", cm);
          client_->request("DELETE", "/api/v1/namespaces/ns/configmaps/a");
        });
      });
  writer.join();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["type"], "MODIFIED");
  EXPECT_EQ(events[1]["object"]["data"]["k"], "v2");
  EXPECT_EQ(events[2]["type"], "DELETED");
}

TEST_F(ApiTest, WatchFromAnOlderResourceVersionReplaysHistory) {
  start();
  std::uint64_t before = server_->store().resourceVersion();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  ASSERT_TRUE(server_->put(configMap("ns", "b")));
  ASSERT_TRUE(server_->put(configMap("other", "c")));
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=1&resourceVersion=" + std::to_string(before),
      [](const std::vector<json>& e) { return e.size() >= 2; }, std::chrono::seconds(5));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["object"]["metadata"]["name"], "a");
  EXPECT_EQ(events[1]["object"]["metadata"]["name"], "b");
}

TEST_F(ApiTest, WatchWithoutResourceVersionStartsWithTheCurrentObjects) {
  start();
  auto events = client_->watch(
      "/api/v1/nodes?watch=true", [](const std::vector<json>& e) { return e.size() >= 2; },
      std::chrono::seconds(5));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["type"], "ADDED");
}

TEST_F(ApiTest, WatchFromACompactedResourceVersionGetsExpiredErrorEvent) {
  start();
  std::uint64_t old = server_->store().resourceVersion();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  server_->compactHistory();
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=" + std::to_string(old), nullptr,
      std::chrono::seconds(5));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "ERROR");
  EXPECT_EQ(events[0]["object"]["code"], 410);
  EXPECT_EQ(events[0]["object"]["reason"], "Expired");
}

TEST_F(ApiTest, ForcedGoneAppliesToTheNextWatchOnly) {
  start();
  server_->forceGoneOnNextWatch();
  std::string rv = std::to_string(server_->store().resourceVersion());
  auto first = client_->watch("/api/v1/nodes?watch=true&resourceVersion=" + rv, nullptr,
                              std::chrono::seconds(5));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["object"]["code"], 410);
  auto second = client_->watch("/api/v1/nodes?watch=true&timeoutSeconds=1&resourceVersion=" + rv,
                               nullptr, std::chrono::seconds(5));
  EXPECT_TRUE(second.empty());
}

TEST_F(ApiTest, WatchSendsBookmarksWithTheCurrentResourceVersion) {
  ServerOptions options;
  options.bookmark_interval = std::chrono::milliseconds(100);
  start(options);
  std::string rv = std::to_string(server_->store().resourceVersion());
  auto events = client_->watch(
      "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return e.size() >= 3; }, std::chrono::seconds(5));
  ASSERT_EQ(events.size(), 3u);
  for (const json& e : events) {
    EXPECT_EQ(e["type"], "BOOKMARK");
    EXPECT_EQ(e["object"]["kind"], "Pod");
    EXPECT_EQ(e["object"]["metadata"]["resourceVersion"], rv);
  }
}

TEST_F(ApiTest, WatchEndsAfterTimeoutSeconds) {
  start();
  auto begin = std::chrono::steady_clock::now();
  auto events = client_->watch("/api/v1/pods?watch=true&timeoutSeconds=1&resourceVersion=1",
                               nullptr, std::chrono::seconds(5));
  auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_TRUE(events.empty());
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_GE(took, std::chrono::milliseconds(900));
}

TEST_F(ApiTest, WatchWithLabelSelectorSeesAnObjectLeavingTheSelectionAsDeleted) {
  start();
  ASSERT_TRUE(server_->put(pod("ns", "a", "node-a", {{"app", "web"}})));
  std::string rv = std::to_string(server_->store().resourceVersion());
  auto events = client_->watch(
      "/api/v1/namespaces/ns/pods?watch=true&labelSelector=app%3Dweb&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(5),
      [&] {
        auto r = client_->request("PATCH", "/api/v1/namespaces/ns/pods/a",
                                  R"({"metadata":{"labels":{"app":"db"}}})",
                                  "application/merge-patch+json");
        EXPECT_EQ(r.status, 200);
      });
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0]["type"], "DELETED");
}

TEST_F(ApiTest, ExecOverWebSocketAnswersFromTheScriptAndIsLogged) {
  ServerOptions options;
  options.exec_script = {ExecReply{.command_prefix = {"etcdctl", "member"},
                                   .stdout_data = "members\n",
                                   .stderr_data = "warn\n",
                                   .exit_code = 2}};
  start(options);
  ASSERT_TRUE(server_->put(pod("kube-system", "etcd-node-a", "node-a")));
  auto failed = client_->exec(
      "/api/v1/namespaces/kube-system/pods/etcd-node-a/exec?command=etcdctl&command=member&"
      "command=list&stdout=true&stderr=true",
      "v5.channel.k8s.io");
  EXPECT_EQ(failed.protocol, "v5.channel.k8s.io");
  EXPECT_EQ(failed.stdout_data, "members\n");
  EXPECT_EQ(failed.stderr_data, "warn\n");
  EXPECT_EQ(failed.status["status"], "Failure");
  EXPECT_EQ(failed.status["reason"], "NonZeroExitCode");
  EXPECT_EQ(failed.status["details"]["causes"][0]["message"], "2");

  auto ok = client_->exec(
      "/api/v1/namespaces/kube-system/pods/etcd-node-a/exec?command=true&container=main&stdout=1",
      "v4.channel.k8s.io");
  EXPECT_EQ(ok.protocol, "v4.channel.k8s.io");
  EXPECT_EQ(ok.status, (json{{"metadata", json::object()}, {"status", "Success"}}));

  auto log = client_->get("/kubesim/v1/exec-log").json();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], (json{{"namespace", "kube-system"},
                          {"pod", "etcd-node-a"},
                          {"container", "main"},
                          {"command", {"etcdctl", "member", "list"}}}));
}

TEST_F(ApiTest, InjectedFaultsAnswer429WithRetryAfterAnd500) {
  start();
  server_->setFaults(Faults{.latency = std::chrono::milliseconds(0),
                            .rate_429 = 1,
                            .rate_500 = 0,
                            .drop_watch_after_events = 0,
                            .drop_watch_after = std::chrono::milliseconds(0)});
  auto throttled = client_->get("/api/v1/nodes");
  EXPECT_EQ(throttled.status, 429);
  EXPECT_EQ(throttled.retry_after, "1");
  server_->setFaults(Faults{.latency = std::chrono::milliseconds(0),
                            .rate_429 = 0,
                            .rate_500 = 1,
                            .drop_watch_after_events = 0,
                            .drop_watch_after = std::chrono::milliseconds(0)});
  EXPECT_EQ(client_->get("/api/v1/nodes").status, 500);
  server_->setFaults(Faults{});
  EXPECT_EQ(client_->get("/api/v1/nodes").status, 200);
}

TEST_F(ApiTest, InjectedWatchDropEndsTheStreamAfterNEvents) {
  start();
  server_->setFaults(Faults{.latency = std::chrono::milliseconds(0),
                            .rate_429 = 0,
                            .rate_500 = 0,
                            .drop_watch_after_events = 1,
                            .drop_watch_after = std::chrono::milliseconds(0)});
  auto events = client_->watch("/api/v1/nodes?watch=true", nullptr, std::chrono::seconds(5));
  EXPECT_EQ(events.size(), 1u);
}

TEST_F(ApiTest, InjectedWatchDropEndsTheStreamAfterATime) {
  start();
  server_->setFaults(Faults{.latency = std::chrono::milliseconds(0),
                            .rate_429 = 0,
                            .rate_500 = 0,
                            .drop_watch_after_events = 0,
                            .drop_watch_after = std::chrono::milliseconds(300)});
  auto begin = std::chrono::steady_clock::now();
  auto events =
      client_->watch("/api/v1/pods?watch=true&resourceVersion=1", nullptr, std::chrono::seconds(5));
  auto took = std::chrono::steady_clock::now() - begin;
  EXPECT_TRUE(events.empty());
  EXPECT_GE(took, std::chrono::milliseconds(300));
  EXPECT_LT(took, std::chrono::seconds(2));
}

TEST_F(ApiTest, InjectedLatencyDelaysEveryAnswer) {
  start();
  server_->setFaults(Faults{.latency = std::chrono::milliseconds(200),
                            .rate_429 = 0,
                            .rate_500 = 0,
                            .drop_watch_after_events = 0,
                            .drop_watch_after = std::chrono::milliseconds(0)});
  auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ(client_->get("/api/v1/nodes").status, 200);
  EXPECT_GE(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(200));
}

TEST_F(ApiTest, ConcurrentClientsAreServedWhileAWatchIsOpen) {
  start();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=1",
      [](const std::vector<json>& e) { return e.size() >= 8; }, std::chrono::seconds(10),
      [&] {
        for (int i = 0; i < 8; ++i) {
          threads.emplace_back([&, i] {
            if (client_
                    ->post("/api/v1/namespaces/ns/configmaps",
                           configMap("ns", "c" + std::to_string(i)))
                    .status == 201) {
              ++ok;
            }
          });
        }
      });
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 8);
  EXPECT_EQ(events.size(), 8u);
}

}  // namespace
}  // namespace ekco::kubesim
