// The REST client and the curl transport against ekco-kubesim, in-process over HTTPS with the
// kubeconfig it writes (client-certificate authentication, inline CA).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/strings.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/objects.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

Json node(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", Json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

Json configMap(const std::string& ns, const std::string& name, Json labels = Json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", std::move(labels)}}},
          {"data", {{"k", "v"}}}};
}

Json pod(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"nodeName", "node-a"}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// A valid Deployment (kubesim validates the whole object on a scale update, as the API does).
Json deployment(const std::string& ns, const std::string& name, int replicas) {
  Json labels = {{"app", name}};
  Json containers = Json::array({{{"name", name}, {"image", name}}});
  Json tmpl = {{"metadata", {{"labels", labels}}}, {"spec", {{"containers", containers}}}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"replicas", replicas}, {"selector", {{"matchLabels", labels}}}, {"template", tmpl}}}};
}

std::string rv(const Json& object) { return object["metadata"]["resourceVersion"]; }

class KubesimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-kube-sim-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    auto server =
        kubesim::Server::start({.out_dir = dir_, .objects = {node("node-a"), node("node-b")}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    process_fs_ = std::move(*fs);
    auto conn = loadKubeconfig(*process_fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    connection_ = *conn;
    transport_ = makeTransport(connection_);
    client_ = std::make_unique<RestClient>(*transport_, clock_, clientOptions());
  }
  void TearDown() override {
    client_.reset();
    transport_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::unique_ptr<CurlTransport> makeTransport(const Connection& conn) {
    auto transport = CurlTransport::create(conn, process_fs_.get(), clock_,
                                           {.connect_timeout = std::chrono::seconds(5)});
    EXPECT_TRUE(transport) << transport.error().message();
    return transport ? std::move(*transport) : nullptr;
  }
  RestClientOptions clientOptions() {
    return {.request_timeout = std::chrono::seconds(10),
            .retry = {.max_attempts = 3},
            .sleep = [this](milliseconds d) { sleeps_.push_back(d); },
            .random = [] { return 0.0; },
            .reporting_instance = "node-a"};
  }

  base::ManualClock clock_;
  std::string dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  Connection connection_;
  std::unique_ptr<CurlTransport> transport_;
  std::unique_ptr<RestClient> client_;
  std::vector<milliseconds> sleeps_;
};

TEST_F(KubesimTest, GetReadsAnObjectOverTlsWithTheKubeconfigsClientCertificate) {
  auto got = client_->get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(got) << got.error().message();
  auto parsed = parseNode(*got);
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->name, "node-a");
  ASSERT_NE(parsed->condition("Ready"), nullptr);
  EXPECT_EQ(parsed->condition("Ready")->status, "True");
}

// Issue 24 defect 11: a response over the transport's bound fails instead of being held.
TEST_F(KubesimTest, AResponseOverTheBoundIsAnErrorNamingTheBound) {
  auto node_a = client_->get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(node_a) << node_a.error().message();
  // Room for one Node, not for a list of two.
  const std::size_t bound = node_a->dump().size() * 3 / 2;
  auto small = CurlTransport::create(
      connection_, process_fs_.get(), clock_,
      {.connect_timeout = std::chrono::seconds(5), .max_response_bytes = bound});
  ASSERT_TRUE(small) << small.error().message();
  RestClient client(**small, clock_, clientOptions());
  auto one = client.get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(one) << one.error().message();
  auto all = client.list(resources::kNodes, "", {});
  ASSERT_FALSE(all);
  EXPECT_THAT(all.error().message(),
              HasSubstr("the response is larger than " + base::describeBytes(bound)));
  EXPECT_EQ(CurlTransportOptions{}.max_response_bytes, std::size_t{64} << 20);
}

// Issue 34 Medium 8: the bodies being received are charged to one budget, shared by every call
// of the transport; a body the budget cannot hold fails its call, and the part it held is
// given back.
TEST_F(KubesimTest, AResponseTheBufferBudgetCannotHoldFailsAndGivesItsPartBack) {
  auto node_a = client_->get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(node_a) << node_a.error().message();
  base::MemoryBudget budget(node_a->dump().size() * 3 / 2);
  auto bounded =
      CurlTransport::create(connection_, process_fs_.get(), clock_,
                            {.connect_timeout = std::chrono::seconds(5), .budget = &budget});
  ASSERT_TRUE(bounded) << bounded.error().message();
  EXPECT_EQ((*bounded)->budget(), &budget);
  RestClient client(**bounded, clock_, clientOptions());
  auto one = client.get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(one) << one.error().message();
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_GT(budget.peak(), 0u);
  auto all = client.list(resources::kNodes, "", {});
  ASSERT_FALSE(all);
  EXPECT_THAT(all.error().message(),
              HasSubstr("the agent's buffer budget (" + base::describeBytes(budget.limit())));
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_LE(budget.peak(), budget.limit());
  EXPECT_GT(budget.refusals(), 0u);
  // Without a budget of its own, a transport charges the process's.
  auto plain = CurlTransport::create(connection_, process_fs_.get(), clock_, {});
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_EQ((*plain)->budget(), &base::processBufferBudget());
}

TEST_F(KubesimTest, GetOfAMissingObjectIsNotFoundWithTheServersMessage) {
  auto got = client_->get(resources::kNodes, "", "node-x");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(got.error().message(), StartsWith("get nodes/node-x: "));
  EXPECT_THAT(got.error().message(), HasSubstr("(NotFound, 404)"));
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(KubesimTest, ListFiltersByLabelAndFieldSelectors) {
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(server_->put(
        configMap("default", "c" + std::to_string(i), {{"tier", i % 2 == 0 ? "even" : "odd"}})));
  }
  ASSERT_TRUE(server_->put(configMap("other", "c9", {{"tier", "even"}})));
  auto list = client_->list(resources::kConfigMaps, "default", {.label_selector = "tier=even"});
  ASSERT_TRUE(list) << list.error().message();
  ASSERT_EQ((*list)["items"].size(), 2u);
  EXPECT_EQ((*list)["items"][0]["metadata"]["name"], "c0");
  auto everywhere = client_->list(resources::kConfigMaps, "", {.label_selector = "tier in (even)"});
  ASSERT_TRUE(everywhere) << everywhere.error().message();
  EXPECT_EQ((*everywhere)["items"].size(), 3u);
  auto by_field = client_->list(resources::kNodes, "", {.field_selector = "metadata.name=node-b"});
  ASSERT_TRUE(by_field) << by_field.error().message();
  ASSERT_EQ((*by_field)["items"].size(), 1u);
  EXPECT_EQ((*by_field)["items"][0]["metadata"]["name"], "node-b");
}

TEST_F(KubesimTest, ListAllFollowsContinueThroughEveryPage) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(server_->put(configMap("default", "c" + std::to_string(i))));
  }
  auto page = client_->list(resources::kConfigMaps, "default", {.limit = 3});
  ASSERT_TRUE(page) << page.error().message();
  EXPECT_EQ((*page)["items"].size(), 3u);
  EXPECT_FALSE((*page)["metadata"]["continue"].get<std::string>().empty());
  auto all = client_->listAll(resources::kConfigMaps, "default", {.limit = 3});
  ASSERT_TRUE(all) << all.error().message();
  ASSERT_EQ((*all)["items"].size(), 7u);
  std::set<std::string> names;
  for (const auto& item : (*all)["items"]) names.insert(item["metadata"]["name"]);
  EXPECT_EQ(names.size(), 7u);
}

TEST_F(KubesimTest, CreateStoresTheObjectAndASecondCreateIsAlreadyExists) {
  auto created = client_->create(resources::kConfigMaps, "default", configMap("default", "new"));
  ASSERT_TRUE(created) << created.error().message();
  EXPECT_FALSE(rv(*created).empty());
  EXPECT_TRUE(server_->get("configmaps", "default", "new"));
  auto again = client_->create(resources::kConfigMaps, "default", configMap("default", "new"));
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kAlreadyExists);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(KubesimTest, UpdateWithStaleResourceVersionIsAConflict) {
  auto created = client_->create(resources::kConfigMaps, "default", configMap("default", "c"));
  ASSERT_TRUE(created) << created.error().message();
  Json first = *created;
  first["data"]["k"] = "first";
  auto updated = client_->update(resources::kConfigMaps, "default", first);
  ASSERT_TRUE(updated) << updated.error().message();
  EXPECT_NE(rv(*updated), rv(*created));
  Json stale = *created;  // still carries the old resourceVersion
  stale["data"]["k"] = "stale";
  auto conflict = client_->update(resources::kConfigMaps, "default", stale);
  ASSERT_FALSE(conflict);
  EXPECT_EQ(conflict.error().code(), ErrorCode::kConflict);
  EXPECT_EQ((*server_->get("configmaps", "default", "c"))["data"]["k"], "first");
}

TEST_F(KubesimTest, UpdateStatusChangesOnlyTheStatus) {
  auto got = client_->get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(got) << got.error().message();
  Json changed = *got;
  changed["status"]["conditions"][0]["status"] = "Unknown";
  changed["metadata"]["labels"]["ignored"] = "yes";
  auto updated = client_->update(resources::kNodes, "", changed, "status");
  ASSERT_TRUE(updated) << updated.error().message();
  const Json stored = *server_->get("nodes", "", "node-a");
  EXPECT_EQ(stored["status"]["conditions"][0]["status"], "Unknown");
  EXPECT_FALSE(stored["metadata"]["labels"].contains("ignored"));
}

TEST_F(KubesimTest, MergeAndStrategicMergePatchesApply) {
  auto cordoned = client_->patch(resources::kNodes, "", "node-a", PatchType::kStrategicMerge,
                                 {{"spec", {{"unschedulable", true}}}});
  ASSERT_TRUE(cordoned) << cordoned.error().message();
  EXPECT_EQ((*cordoned)["spec"]["unschedulable"], true);
  auto labelled = client_->patch(resources::kNodes, "", "node-a", PatchType::kMerge,
                                 {{"metadata", {{"labels", {{"ekco.io/cordoned", "true"}}}}}});
  ASSERT_TRUE(labelled) << labelled.error().message();
  auto parsed = parseNode(*labelled);
  ASSERT_TRUE(parsed);
  EXPECT_TRUE(parsed->unschedulable);
  EXPECT_EQ(parsed->labels.at("ekco.io/cordoned"), "true");
  EXPECT_EQ(parsed->labels.at("kubernetes.io/hostname"), "node-a");
}

TEST_F(KubesimTest, JsonPatchWithAFailingTestOpIsRejectedAndChangesNothing) {
  auto got = client_->get(resources::kNodes, "", "node-a");
  ASSERT_TRUE(got);
  const Json guarded =
      Json::parse(R"([{"op":"test","path":"/metadata/resourceVersion","value":")" + rv(*got) +
                  R"("},{"op":"add","path":"/spec/unschedulable","value":true}])");
  auto ok = client_->patch(resources::kNodes, "", "node-a", PatchType::kJson, guarded);
  ASSERT_TRUE(ok) << ok.error().message();
  EXPECT_EQ((*ok)["spec"]["unschedulable"], true);
  // The same patch again: the resourceVersion moved on, the test fails.
  auto failed = client_->patch(resources::kNodes, "", "node-a", PatchType::kJson, guarded);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(failed.error().message(), StartsWith("patch nodes/node-a: "));
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(KubesimTest, ScaleSubresourceGetUpdateAndPatch) {
  ASSERT_TRUE(server_->put(deployment("default", "web", 3)));
  auto scale = client_->get(resources::kDeployments, "default", "web", "scale");
  ASSERT_TRUE(scale) << scale.error().message();
  EXPECT_EQ((*scale)["kind"], "Scale");
  EXPECT_EQ((*scale)["spec"]["replicas"], 3);
  Json down = *scale;
  down["spec"]["replicas"] = 1;
  auto updated = client_->update(resources::kDeployments, "default", down, "scale");
  ASSERT_TRUE(updated) << updated.error().message();
  EXPECT_EQ((*server_->get("deployments.apps", "default", "web"))["spec"]["replicas"], 1);
  auto patched = client_->patch(resources::kDeployments, "default", "web", PatchType::kMerge,
                                {{"spec", {{"replicas", 0}}}}, "scale");
  ASSERT_TRUE(patched) << patched.error().message();
  EXPECT_EQ((*server_->get("deployments.apps", "default", "web"))["spec"]["replicas"], 0);
}

TEST_F(KubesimTest, RemoveHonoursPreconditionsAndThenDeletes) {
  auto created = client_->create(resources::kConfigMaps, "default", configMap("default", "c"));
  ASSERT_TRUE(created) << created.error().message();
  auto wrong =
      client_->remove(resources::kConfigMaps, "default", "c", {.precondition_uid = "not-it"});
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().code(), ErrorCode::kConflict);
  EXPECT_TRUE(server_->get("configmaps", "default", "c"));
  auto removed =
      client_->remove(resources::kConfigMaps, "default", "c",
                      {.propagation_policy = "Background",
                       .precondition_uid = (*created)["metadata"]["uid"].get<std::string>(),
                       .precondition_resource_version = rv(*created)});
  ASSERT_TRUE(removed) << removed.error().message();
  EXPECT_FALSE(server_->get("configmaps", "default", "c"));
  auto again = client_->remove(resources::kConfigMaps, "default", "c");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code(), ErrorCode::kNotFound);
}

TEST_F(KubesimTest, RemoveWithGracePeriodZeroDeletesAPodAtOnce) {
  ASSERT_TRUE(server_->put(pod("default", "p")));
  ASSERT_TRUE(client_->remove(resources::kPods, "default", "p", {.grace_period_seconds = 0}));
  EXPECT_FALSE(server_->get("pods", "default", "p"));
}

TEST_F(KubesimTest, EvictPostsAnEvictionThatDeletesThePod) {
  ASSERT_TRUE(server_->put(pod("default", "p")));
  auto evicted = client_->evict("default", "p", {.grace_period_seconds = 0});
  ASSERT_TRUE(evicted) << evicted.error().message();
  auto left = server_->get("pods", "default", "p");
  EXPECT_TRUE(!left || (*left)["metadata"].contains("deletionTimestamp"));
  auto missing = client_->evict("default", "nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code(), ErrorCode::kNotFound);
}

TEST_F(KubesimTest, RecordEventCreatesAnEventAboutTheNode) {
  ASSERT_TRUE(client_->recordEvent({.involved_resource = resources::kNodes,
                                    .involved_name = "node-b",
                                    .reason = "NodeCordoned",
                                    .message = "cordoned for shutdown"}));
  auto events = client_->list(resources::kEvents, "default");
  ASSERT_TRUE(events) << events.error().message();
  ASSERT_EQ((*events)["items"].size(), 1u);
  const Json& event = (*events)["items"][0];
  EXPECT_EQ(event["involvedObject"]["name"], "node-b");
  EXPECT_EQ(event["involvedObject"]["kind"], "Node");
  EXPECT_EQ(event["reason"], "NodeCordoned");
  EXPECT_EQ(event["source"]["component"], "ekco");
  EXPECT_EQ(event["reportingInstance"], "node-a");
}

TEST_F(KubesimTest, CustomResourcesAreAddressedByGroupAndVersion) {
  Json cluster = {{"apiVersion", "ceph.rook.io/v1"},
                  {"kind", "CephCluster"},
                  {"metadata", {{"name", "rook-ceph"}, {"namespace", "rook-ceph"}}},
                  {"spec", {{"mon", {{"count", 3}}}}}};
  ASSERT_TRUE(server_->put(cluster));
  auto patched = client_->patch(resources::kCephClusters, "rook-ceph", "rook-ceph",
                                PatchType::kMerge, {{"spec", {{"mon", {{"count", 1}}}}}});
  ASSERT_TRUE(patched) << patched.error().message();
  EXPECT_EQ((*patched)["spec"]["mon"]["count"], 1);
}

TEST_F(KubesimTest, SequentialRequestsReuseOneConnection) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client_->get(resources::kNodes, "", "node-a"));
  }
  EXPECT_EQ(transport_->connectionsOpened(), 1u);
}

TEST_F(KubesimTest, ConcurrentRequestsAllSucceed) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) {
        if (client_->get(resources::kNodes, "", "node-b")) ++ok;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 40);
  EXPECT_LE(transport_->connectionsOpened(), 8u);
}

TEST_F(KubesimTest, AWrongCaFailsTlsVerificationAsUnavailable) {
  auto other = kubesim::generatePki();
  ASSERT_TRUE(other) << other.error().message();
  Connection wrong = connection_;
  wrong.ca_pem = other->ca_cert_pem;
  auto transport = makeTransport(wrong);
  RestClient client(*transport, clock_, {.retry = {.max_attempts = 1}});
  auto got = client.get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(got.error().message(), StartsWith("get nodes/node-a: request https://127.0.0.1:"));
  EXPECT_THAT(got.error().message(), HasSubstr("certificate"));
}

TEST_F(KubesimTest, InsecureSkipTlsVerifyAcceptsAnyServerCertificate) {
  auto other = kubesim::generatePki();
  ASSERT_TRUE(other);
  Connection insecure = connection_;
  insecure.ca_pem = other->ca_cert_pem;
  insecure.insecure_skip_tls_verify = true;
  auto transport = makeTransport(insecure);
  RestClient client(*transport, clock_, {.retry = {.max_attempts = 1}});
  EXPECT_TRUE(client.get(resources::kNodes, "", "node-a"));
}

TEST_F(KubesimTest, TlsServerNameIsUsedForVerification) {
  // The serving certificate is for 127.0.0.1 and localhost: reaching 127.0.0.1 while checking
  // "localhost" works, checking another name fails.
  Connection named = connection_;
  named.tls_server_name = "localhost";
  auto transport = makeTransport(named);
  RestClient client(*transport, clock_, {.retry = {.max_attempts = 1}});
  auto got = client.get(resources::kNodes, "", "node-a");
  EXPECT_TRUE(got) << got.error().message();
  named.tls_server_name = "kubernetes.default.svc";
  auto mismatched = makeTransport(named);
  RestClient client2(*mismatched, clock_, {.retry = {.max_attempts = 1}});
  auto failed = client2.get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), ErrorCode::kUnavailable);
}

TEST_F(KubesimTest, ConnectionRefusedIsUnavailableAndRetried) {
  server_->stop();
  auto got = client_->get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kUnavailable);
  EXPECT_THAT(got.error().message(), HasSubstr("(after 3 attempts)"));
  EXPECT_EQ(sleeps_.size(), 2u);
}

TEST_F(KubesimTest, TooManyRequestsIsRetriedAfterRetryAfter) {
  server_->setFaults({.rate_429 = 1.0});
  auto got = client_->get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kTooManyRequests);
  ASSERT_EQ(sleeps_.size(), 2u);
  EXPECT_EQ(sleeps_[0], milliseconds(1000));  // the server's Retry-After: 1
}

TEST_F(KubesimTest, ARequestTimeoutIsTimeout) {
  server_->setFaults({.latency = milliseconds(600)});
  RestClient client(*transport_, clock_,
                    {.request_timeout = milliseconds(200), .retry = {.max_attempts = 1}});
  auto got = client.get(resources::kNodes, "", "node-a");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kTimeout);
}

}  // namespace
}  // namespace ekco::kube

namespace ekco::kube {
namespace {

TEST_F(KubesimTest, WatchDeliversTheCurrentStateThenChanges) {
  std::vector<std::string> seen;
  std::thread writer;
  auto watched =
      client_->watch(resources::kNodes, "", {.timeout_seconds = 10}, [&](const WatchEvent& e) {
        if (e.type == WatchEventType::kBookmark) return true;
        seen.push_back(std::to_string(static_cast<int>(e.type)) + " " +
                       e.object["metadata"]["name"].get<std::string>());
        if (seen.size() == 2) {
          writer = std::thread([this] {
            EXPECT_TRUE(client_->patch(resources::kNodes, "", "node-b", PatchType::kMerge,
                                       {{"spec", {{"unschedulable", true}}}}));
          });
        }
        return seen.size() < 3;
      });
  if (writer.joinable()) writer.join();
  ASSERT_TRUE(watched) << watched.error().message();
  EXPECT_THAT(seen, ::testing::ElementsAre("0 node-a", "0 node-b", "1 node-b"));
}

TEST_F(KubesimTest, WatchFromACompactedResourceVersionIsGone) {
  auto list = client_->list(resources::kNodes, "");
  ASSERT_TRUE(list);
  const std::string version = (*list)["metadata"]["resourceVersion"];
  ASSERT_TRUE(client_->patch(resources::kNodes, "", "node-a", PatchType::kMerge,
                             {{"metadata", {{"labels", {{"x", "1"}}}}}}));
  server_->compactHistory();
  auto watched = client_->watch(resources::kNodes, "", {.resource_version = version},
                                [](const WatchEvent&) { return true; });
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kGone);
}

TEST_F(KubesimTest, WatchEndsWhenTheServersTimeoutPasses) {
  auto list = client_->list(resources::kNodes, "");
  ASSERT_TRUE(list);
  int events = 0;
  auto watched = client_->watch(resources::kNodes, "",
                                {.resource_version = (*list)["metadata"]["resourceVersion"],
                                 .allow_watch_bookmarks = false,
                                 .timeout_seconds = 1},
                                [&](const WatchEvent&) {
                                  ++events;
                                  return true;
                                });
  ASSERT_TRUE(watched) << watched.error().message();
  EXPECT_EQ(events, 0);
}

TEST_F(KubesimTest, CancellingFromAnotherThreadEndsAWatchAtOnce) {
  auto list = client_->list(resources::kNodes, "");
  ASSERT_TRUE(list);
  CancelToken cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(200));
    cancel.cancel();
  });
  base::SystemClock real;
  const auto start = real.monoNow();
  auto watched = client_->watch(
      resources::kNodes, "",
      {.resource_version = (*list)["metadata"]["resourceVersion"], .timeout_seconds = 60},
      [](const WatchEvent&) { return true; }, &cancel);
  const auto took = real.monoNow() - start;
  canceller.join();
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().code(), ErrorCode::kCancelled);
  EXPECT_LT(took, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ekco::kube
