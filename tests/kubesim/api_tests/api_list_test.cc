// kubesim's lists and watches as kube-apiserver serves them: exact and paged snapshots, expired
// continue tokens, list option validation, typed field selectors, sendInitialEvents and the
// shape of a watch's first and last events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <tuple>
#include <vector>

#include "tests/kubesim/api_tests/api_test_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::ApiTest;
using testing::configMap;
using ::testing::HasSubstr;
using testing::names;
using V = std::vector<std::string>;

TEST_F(ApiTest, ExactListServesTheObjectsAsTheyWereAtThatResourceVersion) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  ASSERT_TRUE(server_->put(configMap("ns", "b")));
  std::string rv =
      client_->get("/api/v1/namespaces/ns/configmaps").json()["metadata"]["resourceVersion"];
  json a = configMap("ns", "a");
  a["data"]["k"] = "changed";
  ASSERT_TRUE(server_->put(a));
  ASSERT_TRUE(server_->store().remove("configmaps", "ns", "b"));
  ASSERT_TRUE(server_->put(configMap("ns", "c")));
  json exact = client_
                   ->get(
                       "/api/v1/namespaces/ns/configmaps?resourceVersionMatch=Exact&"
                       "resourceVersion=" +
                       rv)
                   .json();
  EXPECT_EQ(names(exact), (V{"a", "b"}));
  EXPECT_EQ(exact["items"][0]["data"]["k"], "v");
  EXPECT_EQ(exact["metadata"]["resourceVersion"], rv);
  json now = client_->get("/api/v1/namespaces/ns/configmaps").json();
  EXPECT_EQ(names(now), (V{"a", "c"}));
}

TEST_F(ApiTest, LaterPagesAreServedAsOfTheFirstPagesResourceVersion) {
  start();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(server_->put(configMap("ns", "cm-" + std::to_string(i))));
  json first = client_->get("/api/v1/namespaces/ns/configmaps?limit=2").json();
  EXPECT_EQ(names(first), (V{"cm-0", "cm-1"}));
  ASSERT_TRUE(server_->store().remove("configmaps", "ns", "cm-3"));
  ASSERT_TRUE(server_->put(configMap("ns", "cm-25")));
  json second = client_
                    ->get("/api/v1/namespaces/ns/configmaps?limit=2&continue=" +
                          first["metadata"]["continue"].get<std::string>())
                    .json();
  EXPECT_EQ(names(second), (V{"cm-2", "cm-3"}));
  EXPECT_EQ(second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"]);
  EXPECT_FALSE(second["metadata"].contains("continue"));
}

TEST_F(ApiTest, AnExpiredContinueTokenIsGoneWithAFreshTokenForTheRest) {
  start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(server_->put(configMap("ns", "cm-" + std::to_string(i))));
  json first = client_->get("/api/v1/namespaces/ns/configmaps?limit=1").json();
  ASSERT_TRUE(server_->put(configMap("ns", "cm-9")));
  server_->compactHistory();
  auto gone = client_->get("/api/v1/namespaces/ns/configmaps?limit=1&continue=" +
                           first["metadata"]["continue"].get<std::string>());
  ASSERT_EQ(gone.status, 410);
  json status = gone.json();
  EXPECT_EQ(status["reason"], "Expired");
  EXPECT_THAT(status["message"].get<std::string>(), HasSubstr("use the continue token"));
  std::string fresh = status["metadata"]["continue"];
  ASSERT_FALSE(fresh.empty());
  // The fresh token continues after cm-0 in the current state (an inconsistent list).
  json rest = client_->get("/api/v1/namespaces/ns/configmaps?continue=" + fresh).json();
  EXPECT_EQ(names(rest), (V{"cm-1", "cm-2", "cm-9"}));
}

TEST_F(ApiTest, InvalidListOptionsAre422WithTheApiServersCauses) {
  start();
  auto no_rv = client_->get("/api/v1/configmaps?resourceVersionMatch=NotOlderThan");
  ASSERT_EQ(no_rv.status, 422);
  json s = no_rv.json();
  EXPECT_EQ(s["reason"], "Invalid");
  EXPECT_EQ(s["message"],
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
            "resourceVersionMatch is forbidden unless resourceVersion is provided");
  EXPECT_EQ(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
  EXPECT_EQ(s["details"]["causes"][0]["field"], "resourceVersionMatch");
  auto bogus = client_->get("/api/v1/configmaps?resourceVersion=1&resourceVersionMatch=Bogus");
  EXPECT_EQ(bogus.status, 422);
  EXPECT_THAT(bogus.json()["message"].get<std::string>(),
              HasSubstr("Unsupported value: \"Bogus\": supported values: \"Exact\", "
                        "\"NotOlderThan\", \"\""));
  auto watch_match = client_->get("/api/v1/configmaps?watch=true&resourceVersionMatch=Exact");
  EXPECT_EQ(watch_match.status, 422);
  auto list_initial = client_->get("/api/v1/configmaps?sendInitialEvents=true");
  EXPECT_EQ(list_initial.status, 422);
  EXPECT_THAT(list_initial.json()["message"].get<std::string>(),
              HasSubstr("sendInitialEvents is forbidden for list"));
}

TEST_F(ApiTest, UnsupportedFieldLabelsAre400AsEachKindsConversionSaysIt) {
  start();
  auto pods = client_->get("/api/v1/pods?fieldSelector=spec.containers%3Dx");
  EXPECT_EQ(pods.status, 400);
  EXPECT_EQ(pods.json()["message"], "field label not supported: spec.containers");
  auto cms = client_->get("/api/v1/configmaps?fieldSelector=data.k%3Dv");
  EXPECT_EQ(cms.status, 400);
  EXPECT_EQ(cms.json()["message"],
            "\"data.k\" is not a known field selector: only \"metadata.name\", "
            "\"metadata.namespace\"");
  auto watch = client_->get("/api/v1/nodes?watch=1&fieldSelector=status.phase%3DReady");
  EXPECT_EQ(watch.status, 400);
}

TEST_F(ApiTest, AResourceVersionFromTheFutureTimesOutWithTheTooLargeCause) {
  start();
  std::uint64_t future = server_->store().resourceVersion() + 1000;
  auto start_time = std::chrono::steady_clock::now();
  auto r = client_->get("/api/v1/configmaps?resourceVersion=" + std::to_string(future));
  EXPECT_GE(std::chrono::steady_clock::now() - start_time, std::chrono::milliseconds(2900));
  ASSERT_EQ(r.status, 504);
  json s = r.json();
  EXPECT_EQ(s["reason"], "Timeout");
  EXPECT_THAT(s["message"].get<std::string>(),
              HasSubstr("Timeout: Too large resource version: " + std::to_string(future)));
  EXPECT_EQ(s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
  EXPECT_EQ(s["details"]["retryAfterSeconds"], 1);
}

TEST_F(ApiTest, FieldSelectorsCompareTheTypedValueSoUnsetBooleansAreFalse) {
  start();
  auto list = [&](const std::string& sel) {
    return names(client_->get("/api/v1/nodes?fieldSelector=" + sel).json());
  };
  EXPECT_EQ(list("spec.unschedulable%3Dfalse"), (V{"node-a", "node-b"}));
  json cordoned = testing::node("node-b", "True");
  cordoned["spec"]["unschedulable"] = true;
  ASSERT_TRUE(server_->put(cordoned));
  EXPECT_EQ(list("spec.unschedulable%3Dfalse"), V{"node-a"});
  EXPECT_EQ(list("spec.unschedulable%3Dtrue"), V{"node-b"});
}

TEST_F(ApiTest, OneNodesPodsComeFromTheNodeNameIndexExactlyAsFromAScan) {
  start();
  for (const auto& [ns, name, node] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"ns", "p1", "node-a"},
                                                                      {"ns", "p2", "node-b"},
                                                                      {"ns", "p3", "node-a"},
                                                                      {"kurl", "p4", "node-a"},
                                                                      {"ns", "p5", ""}}) {
    ASSERT_TRUE(server_->put(testing::pod(ns, name, node)));
  }
  auto list = [&](const std::string& path) { return names(client_->get(path).json()); };
  const std::string on_a = "fieldSelector=spec.nodeName%3Dnode-a";
  EXPECT_EQ(list("/api/v1/pods?" + on_a), (V{"p4", "p1", "p3"}));
  EXPECT_EQ(list("/api/v1/namespaces/ns/pods?" + on_a), (V{"p1", "p3"}));
  EXPECT_EQ(list("/api/v1/pods?fieldSelector=spec.nodeName%3D"), V{"p5"});
  EXPECT_EQ(list("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-x"), V{});
  EXPECT_EQ(list("/api/v1/pods?fieldSelector=spec.nodeName%21%3Dnode-a"), (V{"p2", "p5"}));
  EXPECT_EQ(list("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-a,status.phase%3DPending"), V{});
  // Pages of one in key order, each with a token but the last.
  V paged;
  std::string token;
  for (int page = 0; page < 5; ++page) {
    json got =
        client_->get("/api/v1/pods?limit=1&" + on_a + (token.empty() ? "" : "&continue=" + token))
            .json();
    for (const auto& n : names(got)) paged.push_back(n);
    if (!got["metadata"].contains("continue")) break;
    token = got["metadata"]["continue"];
  }
  EXPECT_EQ(paged, (V{"p4", "p1", "p3"}));
  // The index follows deletes and a pod created again on another node; an older resourceVersion
  // still lists the pods as they were then.
  const std::string rv = client_->get("/api/v1/pods").json()["metadata"]["resourceVersion"];
  ASSERT_TRUE(server_->store().remove("pods", "ns", "p1"));
  ASSERT_TRUE(server_->store().remove("pods", "ns", "p3"));
  ASSERT_TRUE(server_->put(testing::pod("ns", "p3", "node-b")));
  EXPECT_EQ(list("/api/v1/pods?" + on_a), V{"p4"});
  EXPECT_EQ(list("/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-b"), (V{"p2", "p3"}));
  EXPECT_EQ(list("/api/v1/pods?resourceVersionMatch=Exact&resourceVersion=" + rv + "&" + on_a),
            (V{"p4", "p1", "p3"}));
}

TEST_F(ApiTest, WatchAcceptsEveryGoBooleanSpellingOfTrue) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  for (const char* flag : {"True", "true", "1", "t"}) {
    auto events = client_->watch(
        std::string("/api/v1/namespaces/ns/configmaps?watch=") + flag,
        [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(5));
    ASSERT_EQ(events.size(), 1U) << flag;
    EXPECT_EQ(events[0]["type"], "ADDED") << flag;
  }
  // "false" is a list.
  EXPECT_EQ(client_->get("/api/v1/namespaces/ns/configmaps?watch=false").json()["kind"],
            "ConfigMapList");
}

TEST_F(ApiTest, SendInitialEventsStreamsTheStateThenTheInitialEventsEndBookmark) {
  start();
  ASSERT_TRUE(server_->put(configMap("ns", "a")));
  ASSERT_TRUE(server_->put(configMap("ns", "b")));
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&sendInitialEvents=true&"
      "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
      [](const std::vector<json>& e) { return e.size() >= 3; }, std::chrono::seconds(5));
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[0]["type"], "ADDED");
  EXPECT_EQ(events[1]["type"], "ADDED");
  EXPECT_EQ(events[2]["type"], "BOOKMARK");
  EXPECT_EQ(events[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
  EXPECT_EQ(events[2]["object"]["metadata"]["resourceVersion"],
            std::to_string(server_->store().resourceVersion()));
  // sendInitialEvents=false: only changes from now on.
  auto none = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&sendInitialEvents=false&"
      "resourceVersionMatch=NotOlderThan&timeoutSeconds=1",
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(3));
  EXPECT_TRUE(none.empty());
}

TEST_F(ApiTest, AWatchDoesNotStartWithABookmark) {
  start();  // bookmark_interval: 1 s
  std::string rv = std::to_string(server_->store().resourceVersion());
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::milliseconds(500));
  EXPECT_TRUE(events.empty());
  auto later = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(3));
  ASSERT_EQ(later.size(), 1U);
  EXPECT_EQ(later[0]["type"], "BOOKMARK");
}

TEST_F(ApiTest, RemovingTheLastFinalizerOfADeletedObjectIsOnlyDeleted) {
  start();
  json cm = configMap("ns", "a");
  cm["metadata"]["finalizers"] = {"example.com/hold"};
  ASSERT_TRUE(server_->put(cm));
  ASSERT_EQ(client_->request("DELETE", "/api/v1/namespaces/ns/configmaps/a").status, 200);
  std::string rv = std::to_string(server_->store().resourceVersion());
  auto events = client_->watch(
      "/api/v1/namespaces/ns/configmaps?watch=true&resourceVersion=" + rv,
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(5),
      [&] {
        auto r =
            client_->request("PATCH", "/api/v1/namespaces/ns/configmaps/a",
                             R"({"metadata":{"finalizers":null}})", "application/merge-patch+json");
        EXPECT_EQ(r.status, 200) << r.body;
      });
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0]["type"], "DELETED");
  EXPECT_FALSE(server_->get("configmaps", "ns", "a"));
}

}  // namespace
}  // namespace ekco::kubesim
