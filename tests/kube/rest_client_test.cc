#include "kube/rest_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "tests/fakes/fake_transport.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using std::chrono::milliseconds;
using ::testing::ElementsAre;
using testing::FakeTransport;
using ::testing::HasSubstr;
using testing::headerOf;

constexpr const char* kNotFound =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"nodes \"node-a\" not found","reason":"NotFound","details":{"name":"node-a","kind":"nodes"},"code":404})";
constexpr const char* kConflict =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","code":409})";

// A client over a fake transport that records its sleeps instead of sleeping.
struct Fixture {
  FakeTransport transport;
  base::ManualClock clock;
  std::vector<milliseconds> sleeps;
  RestClient client{transport, clock,
                    RestClientOptions{
                        .request_timeout = milliseconds(1234),
                        .sleep = [this](milliseconds d) { sleeps.push_back(d); },
                        .random = [] { return 0.0; },
                        .reporting_instance = "node-a",
                    }};
};

TEST(RestClient, GetBuildsTheResourcePathAndReturnsTheObject) {
  Fixture f;
  f.transport.reply(200, R"({"kind":"Node","metadata":{"name":"node-a"}})");
  auto node = f.client.get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(node) << node.error().message();
  EXPECT_EQ((*node)["metadata"]["name"], "node-a");
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.target, "/api/v1/nodes/node-a");
  EXPECT_EQ(request.timeout, milliseconds(1234));
  EXPECT_EQ(headerOf(request, "Accept"), "application/json");
}

// Callers copy and dump responses, which recurses once per level (kube/decode/json_depth.h).
TEST(RestClient, AResponseNestedTooDeeplyIsAParseErrorNotACrash) {
  Fixture f;
  f.transport.reply(
      200, R"({"kind":"Node","x":)" + std::string(100000, '[') + std::string(100000, ']') + "}");
  auto node = f.client.get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code(), ErrorCode::kParse);
  EXPECT_EQ(node.error().message(),
            "get nodes/node-a: response is JSON nested deeper than 1000 levels (HTTP 200)");
}

TEST(RestClient, PathsCoverCoreGroupsNamespacesAndSubresources) {
  EXPECT_EQ(resources::kPods.path("kube-system", "p", "eviction"),
            "/api/v1/namespaces/kube-system/pods/p/eviction");
  EXPECT_EQ(resources::kDeployments.path("ns", "d", "scale"),
            "/apis/apps/v1/namespaces/ns/deployments/d/scale");
  EXPECT_EQ(resources::kCephClusters.path("rook-ceph"),
            "/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters");
  EXPECT_EQ(resources::kPods.path(), "/api/v1/pods");
  EXPECT_EQ(resources::kNodes.path("ignored", "n"), "/api/v1/nodes/n");
  EXPECT_EQ(resources::kLeases.apiVersion(), "coordination.k8s.io/v1");
}

TEST(RestClient, PathSegmentsAndQueryValuesArePercentEncoded) {
  Fixture f;
  ASSERT_TRUE(f.client.get(resources::kConfigMaps, "a b", "x/y?z"));
  EXPECT_EQ(f.transport.last().target, "/api/v1/namespaces/a%20b/configmaps/x%2Fy%3Fz");
  EXPECT_EQ(percentEncode("app=x,tier!=y"), "app%3Dx%2Ctier%21%3Dy");
  EXPECT_EQ(percentEncode("a-b_c.d~e"), "a-b_c.d~e");
  EXPECT_EQ(percentEncode("\xc3\xa9"), "%C3%A9");
}

TEST(RestClient, NotFoundIsReturnedAtOnceWithTheServersMessage) {
  Fixture f;
  f.transport.reply(404, kNotFound);
  auto node = f.client.get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code(), ErrorCode::kNotFound);
  EXPECT_EQ(node.error().message(),
            R"(get nodes/node-a: nodes "node-a" not found (NotFound, 404))");
  EXPECT_EQ(f.transport.requests().size(), 1u);
  EXPECT_TRUE(f.sleeps.empty());
}

TEST(RestClient, ListSendsSelectorsPagingAndResourceVersion) {
  Fixture f;
  f.transport.reply(200, R"({"kind":"PodList","items":[]})");
  auto list = f.client.list(resources::kPods, "kube-system",
                            {.label_selector = "app=x,tier!=y",
                             .field_selector = "spec.nodeName=node-a",
                             .limit = 50,
                             .continue_token = "abc=",
                             .resource_version = "0",
                             .resource_version_match = "NotOlderThan"});
  ASSERT_TRUE(list) << list.error().message();
  EXPECT_EQ(f.transport.last().target,
            "/api/v1/namespaces/kube-system/pods?labelSelector=app%3Dx%2Ctier%21%3Dy"
            "&fieldSelector=spec.nodeName%3Dnode-a&limit=50&continue=abc%3D&resourceVersion=0"
            "&resourceVersionMatch=NotOlderThan");
}

// Issue 34 Medium 8: each kind of call has its own bound on what it may receive.
TEST(RestClient, EachKindOfCallBoundsTheBodyItReceives) {
  Fixture f;
  f.transport.reply(200, R"({"kind":"PodList","items":[]})");
  ASSERT_TRUE(f.client.list(resources::kPods, "", {.limit = 500}));
  EXPECT_EQ(f.transport.last().max_body_bytes, kMaxListPageBytes);
  ASSERT_TRUE(f.client.list(resources::kPods, "", {}));
  EXPECT_EQ(f.transport.last().max_body_bytes, kMaxUnpagedListBytes);
  f.transport.reply(200, R"({"kind":"Node","metadata":{"name":"a"}})");
  ASSERT_TRUE(f.client.get(resources::kNodes, "", "a"));
  EXPECT_EQ(f.transport.last().max_body_bytes, kMaxObjectResponseBytes);
  EXPECT_EQ(kMaxObjectResponseBytes, std::size_t{16} << 20);
  EXPECT_EQ(kMaxListPageBytes, std::size_t{32} << 20);
  EXPECT_EQ(kMaxUnpagedListBytes, std::size_t{64} << 20);
}

TEST(RestClient, ListAllFollowsContinueToTheEnd) {
  Fixture f;
  f.transport.reply(
      200,
      R"({"kind":"PodList","metadata":{"resourceVersion":"10","continue":"t1"},"items":[{"n":1},{"n":2}]})");
  f.transport.reply(
      200,
      R"({"kind":"PodList","metadata":{"resourceVersion":"10","continue":"t2"},"items":[{"n":3}]})");
  f.transport.reply(200,
                    R"({"kind":"PodList","metadata":{"resourceVersion":"10"},"items":[{"n":4}]})");
  auto all = f.client.listAll(resources::kPods, "", {.label_selector = "a=b", .limit = 2});
  ASSERT_TRUE(all) << all.error().message();
  EXPECT_EQ((*all)["items"].size(), 4u);
  EXPECT_EQ((*all)["items"][3]["n"], 4);
  EXPECT_EQ((*all)["metadata"]["resourceVersion"], "10");
  EXPECT_FALSE((*all)["metadata"].contains("continue"));
  const auto requests = f.transport.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].target, "/api/v1/pods?labelSelector=a%3Db&limit=2");
  EXPECT_EQ(requests[1].target, "/api/v1/pods?labelSelector=a%3Db&limit=2&continue=t1");
  EXPECT_EQ(requests[2].target, "/api/v1/pods?labelSelector=a%3Db&limit=2&continue=t2");
}

TEST(RestClient, ListAllWithAnExpiredContinueTokenIsGone) {
  Fixture f;
  f.transport.reply(200, R"({"metadata":{"continue":"t1"},"items":[{"n":1}]})");
  f.transport.reply(
      410,
      R"({"kind":"Status","message":"The provided continue parameter is too old","reason":"Expired","code":410})");
  auto all = f.client.listAll(resources::kPods, "", {.limit = 1});
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().code(), ErrorCode::kGone);
}

TEST(RestClient, CreatePostsTheObjectAsJson) {
  Fixture f;
  f.transport.reply(201, R"({"metadata":{"name":"c","resourceVersion":"5"}})");
  auto created = f.client.create(resources::kConfigMaps, "default",
                                 {{"metadata", {{"name", "c"}}}, {"data", {{"k", "v"}}}});
  ASSERT_TRUE(created) << created.error().message();
  EXPECT_EQ((*created)["metadata"]["resourceVersion"], "5");
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/configmaps");
  EXPECT_EQ(headerOf(request, "Content-Type"), "application/json");
  EXPECT_EQ(nlohmann::json::parse(request.body)["data"]["k"], "v");
}

TEST(RestClient, CreateOfAnExistingNameIsAlreadyExists) {
  Fixture f;
  f.transport.reply(
      409,
      R"({"kind":"Status","message":"configmaps \"c\" already exists","reason":"AlreadyExists","code":409})");
  auto created =
      f.client.create(resources::kConfigMaps, "default", {{"metadata", {{"name", "c"}}}});
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_THAT(created.error().message(), HasSubstr("create configmaps/c in default: "));
}

TEST(RestClient, UpdateWithStaleResourceVersionIsAConflict) {
  Fixture f;
  f.transport.reply(409, kConflict);
  auto updated = f.client.update(resources::kConfigMaps, "default",
                                 {{"metadata", {{"name", "c"}, {"resourceVersion", "3"}}}});
  ASSERT_FALSE(updated);
  EXPECT_EQ(updated.error().code(), ErrorCode::kConflict);
  EXPECT_EQ(f.transport.requests().size(), 1u);
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "PUT");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/configmaps/c");
  EXPECT_EQ(nlohmann::json::parse(request.body)["metadata"]["resourceVersion"], "3");
}

TEST(RestClient, UpdateWithoutANameIsRejectedBeforeSending) {
  Fixture f;
  auto updated = f.client.update(resources::kConfigMaps, "default", {{"data", {}}});
  ASSERT_FALSE(updated);
  EXPECT_EQ(updated.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(f.transport.requests().empty());
}

TEST(RestClient, UpdateStatusPutsTheStatusSubresource) {
  Fixture f;
  ASSERT_TRUE(f.client.update(resources::kNodes, "", {{"metadata", {{"name", "n"}}}}, "status"));
  EXPECT_EQ(f.transport.last().target, "/api/v1/nodes/n/status");
}

TEST(RestClient, PatchSendsTheContentTypeOfEachPatchKind) {
  Fixture f;
  const nlohmann::json patch = {{"spec", {{"unschedulable", true}}}};
  ASSERT_TRUE(f.client.patch(resources::kNodes, "", "n", PatchType::kMerge, patch));
  EXPECT_EQ(headerOf(f.transport.last(), "Content-Type"), "application/merge-patch+json");
  ASSERT_TRUE(f.client.patch(resources::kNodes, "", "n", PatchType::kStrategicMerge, patch));
  EXPECT_EQ(headerOf(f.transport.last(), "Content-Type"), "application/strategic-merge-patch+json");
  const auto json_patch = nlohmann::json::parse(
      R"([{"op":"test","path":"/metadata/resourceVersion","value":"7"},{"op":"replace","path":"/spec/replicas","value":0}])");
  ASSERT_TRUE(
      f.client.patch(resources::kDeployments, "ns", "d", PatchType::kJson, json_patch, "scale"));
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "PATCH");
  EXPECT_EQ(request.target, "/apis/apps/v1/namespaces/ns/deployments/d/scale");
  EXPECT_EQ(headerOf(request, "Content-Type"), "application/json-patch+json");
  EXPECT_EQ(nlohmann::json::parse(request.body), json_patch);
}

TEST(RestClient, RemoveSendsDeleteOptionsWithPreconditions) {
  Fixture f;
  ASSERT_TRUE(f.client.remove(resources::kPods, "default", "p",
                              {.grace_period_seconds = 0,
                               .propagation_policy = "Background",
                               .precondition_uid = "u-1",
                               .precondition_resource_version = "42"}));
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "DELETE");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/pods/p");
  EXPECT_EQ(
      nlohmann::json::parse(request.body),
      nlohmann::json::parse(R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0,
              "propagationPolicy":"Background","preconditions":{"uid":"u-1","resourceVersion":"42"}})"));
}

TEST(RestClient, EvictPostsAPolicyV1Eviction) {
  Fixture f;
  f.transport.reply(201, R"({"kind":"Status","status":"Success","code":201})");
  ASSERT_TRUE(f.client.evict("default", "p", {.grace_period_seconds = 30}));
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/pods/p/eviction");
  const auto body = nlohmann::json::parse(request.body);
  EXPECT_EQ(body["apiVersion"], "policy/v1");
  EXPECT_EQ(body["kind"], "Eviction");
  EXPECT_EQ(body["metadata"]["name"], "p");
  EXPECT_EQ(body["deleteOptions"]["gracePeriodSeconds"], 30);
}

TEST(RestClient, EvictionBlockedByADisruptionBudgetIsTooManyRequestsAfterRetries) {
  Fixture f;
  const std::string pdb =
      R"({"kind":"Status","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","code":429})";
  for (int i = 0; i < 5; ++i) f.transport.reply(429, pdb);
  auto evicted = f.client.evict("default", "p");
  ASSERT_FALSE(evicted);
  EXPECT_EQ(evicted.error().code(), ErrorCode::kTooManyRequests);
  EXPECT_THAT(evicted.error().message(), HasSubstr("(after 5 attempts)"));
  EXPECT_EQ(f.transport.requests().size(), 5u);
}

TEST(RestClient, RecordEventCreatesACoreV1EventForTheInvolvedObject) {
  Fixture f;
  ASSERT_TRUE(f.client.recordEvent({.involved_resource = resources::kNodes,
                                    .involved_name = "node-c",
                                    .involved_uid = "uid-c",
                                    .reason = "NodePurged",
                                    .message = "purged node-c",
                                    .type = "Warning"}));
  const auto request = f.transport.last();
  EXPECT_EQ(request.method, "POST");
  EXPECT_EQ(request.target, "/api/v1/namespaces/default/events");
  const auto event = nlohmann::json::parse(request.body);
  EXPECT_EQ(event["kind"], "Event");
  EXPECT_EQ(event["metadata"]["namespace"], "default");
  EXPECT_EQ(event["metadata"]["name"], "node-c.17979cfe362a0000");  // 1.7e18 ns in hex
  EXPECT_EQ(
      event["involvedObject"],
      nlohmann::json::parse(R"({"kind":"Node","apiVersion":"v1","name":"node-c","uid":"uid-c"})"));
  EXPECT_EQ(event["reason"], "NodePurged");
  EXPECT_EQ(event["message"], "purged node-c");
  EXPECT_EQ(event["type"], "Warning");
  EXPECT_EQ(event["source"]["component"], "ekco");
  EXPECT_EQ(event["source"]["host"], "node-a");
  EXPECT_EQ(event["reportingInstance"], "node-a");
  EXPECT_EQ(event["firstTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(event["lastTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(event["count"], 1);
}

TEST(RestClient, EventsForNamespacedObjectsGoToTheirNamespace) {
  Fixture f;
  ASSERT_TRUE(f.client.recordEvent({.involved_resource = resources::kPods,
                                    .involved_namespace = "rook-ceph",
                                    .involved_name = "osd-0",
                                    .reason = "Evicted"}));
  EXPECT_EQ(f.transport.last().target, "/api/v1/namespaces/rook-ceph/events");
  EXPECT_EQ(nlohmann::json::parse(f.transport.last().body)["involvedObject"]["namespace"],
            "rook-ceph");
}

TEST(RestClient, TransientFailuresOfIdempotentCallsAreRetriedWithBackoff) {
  Fixture f;
  f.transport.fail(ErrorCode::kUnavailable, "Connection refused");
  f.transport.reply(503, "");
  f.transport.fail(ErrorCode::kTimeout, "Operation timed out");
  f.transport.reply(500, R"({"kind":"Status","reason":"InternalError","code":500})");
  f.transport.reply(200, R"({"metadata":{"name":"n"}})");
  auto node = f.client.get(resources::kNodes, "", "n");
  ASSERT_TRUE(node) << node.error().message();
  EXPECT_EQ(f.transport.requests().size(), 5u);
  EXPECT_THAT(f.sleeps, ElementsAre(milliseconds(200), milliseconds(400), milliseconds(800),
                                    milliseconds(1600)));
}

TEST(RestClient, TooManyRequestsHonoursRetryAfter) {
  Fixture f;
  f.transport.reply(429, "", {{"retry-after", "3"}});
  auto node = f.client.get(resources::kNodes, "", "n");
  ASSERT_TRUE(node);
  EXPECT_THAT(f.sleeps, ElementsAre(milliseconds(3000)));
}

TEST(RestClient, GivesUpAfterMaxAttemptsWithTheLastError) {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.transport.fail(ErrorCode::kUnavailable, "Connection refused");
  auto node = f.client.get(resources::kNodes, "", "n");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code(), ErrorCode::kUnavailable);
  EXPECT_EQ(node.error().message(), "get nodes/n: Connection refused (after 5 attempts)");
  EXPECT_EQ(f.sleeps.size(), 4u);
}

TEST(RestClient, CreateIsNotRetriedAfterATimeoutBecauseItMayHaveBeenProcessed) {
  Fixture f;
  f.transport.fail(ErrorCode::kTimeout, "Operation timed out after 30000 ms");
  auto created =
      f.client.create(resources::kConfigMaps, "default", {{"metadata", {{"name", "c"}}}});
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code(), ErrorCode::kTimeout);
  EXPECT_EQ(f.transport.requests().size(), 1u);
}

TEST(RestClient, CreateIsNotRetriedAfterA500) {
  Fixture f;
  f.transport.reply(500, R"({"kind":"Status","reason":"InternalError","code":500})");
  EXPECT_FALSE(f.client.create(resources::kConfigMaps, "default", {{"metadata", {{"name", "c"}}}}));
  EXPECT_EQ(f.transport.requests().size(), 1u);
}

TEST(RestClient, CreateIsRetriedWhenTheServerProvablyDidNotProcessIt) {
  Fixture f;
  f.transport.fail(ErrorCode::kUnavailable, "Connection refused");
  f.transport.reply(429, "", {{"retry-after", "1"}});
  f.transport.reply(503, "", {{"retry-after", "2"}});
  f.transport.reply(201, R"({"metadata":{"name":"c"}})");
  ASSERT_TRUE(f.client.create(resources::kConfigMaps, "default", {{"metadata", {{"name", "c"}}}}));
  EXPECT_EQ(f.transport.requests().size(), 4u);
  EXPECT_THAT(f.sleeps, ElementsAre(milliseconds(200), milliseconds(1000), milliseconds(2000)));
}

TEST(RestClient, ConnectionFailureErrorsNameTheOperation) {
  Fixture f;
  RestClient once(f.transport, f.clock, {.retry = {.max_attempts = 1}});
  f.transport.fail(ErrorCode::kIo, "Recv failure: Connection reset by peer");
  auto got = once.get(resources::kPods, "default", "p");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kIo);
  EXPECT_EQ(got.error().message(), "get pods/p in default: Recv failure: Connection reset by peer");
}

TEST(RestClient, ASuccessfulResponseThatIsNotJsonIsAParseError) {
  Fixture f;
  f.transport.reply(200, "<html>proxy login</html>");
  auto got = f.client.get(resources::kNodes, "", "n");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kParse);
  EXPECT_EQ(got.error().message(), "get nodes/n: response is not JSON (HTTP 200)");
}

}  // namespace
}  // namespace ekco::kube
