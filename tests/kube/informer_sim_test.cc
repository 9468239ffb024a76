// Informers and the client's retries against ekco-kubesim over HTTPS: real list paging, watch
// streams, bookmarks, graceful deletion by the simulated kubelet, dropped streams, 410 Gone and
// injected 429/500 answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/records.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "kube/watch/informer.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using std::chrono::milliseconds;
using std::chrono::seconds;

Json node(const std::string& name, const std::string& ready = "True") {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"spec", Json::object()},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", ready}}}}}}};
}

Json pod(const std::string& name, const std::string& node_name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"app", "web"}}}}},
          {"spec",
           {{"nodeName", node_name}, {"containers", {{{"name", "main"}, {"image", "busybox"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// Polls until pred() or the timeout.
template <typename F>
bool eventually(F pred, milliseconds timeout = milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return pred();
}

class InformerSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-informer-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::vector<Json> objects = {node("node-a"), node("node-b", "Unknown")};
    for (int i = 0; i < 7; ++i) objects.push_back(pod("a" + std::to_string(i), "node-a"));
    for (int i = 0; i < 3; ++i) objects.push_back(pod("b" + std::to_string(i), "node-b"));
    auto server = kubesim::Server::start({.out_dir = dir_,
                                          .objects = objects,
                                          .kubelet_interval = milliseconds(20),
                                          .bookmark_interval = milliseconds(100)});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    fs_ = std::move(*fs);
    auto conn = loadKubeconfig(*fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    auto transport =
        CurlTransport::create(*conn, fs_.get(), clock_, {.connect_timeout = seconds(5)});
    ASSERT_TRUE(transport) << transport.error().message();
    transport_ = std::move(*transport);
    client_ = std::make_unique<RestClient>(
        *transport_, clock_,
        RestClientOptions{.request_timeout = seconds(10),
                          .retry = {.max_attempts = 20,
                                    .base_delay = milliseconds(1),
                                    .max_delay = milliseconds(5),
                                    .max_retry_after = milliseconds(5)},
                          .sleep = [this](milliseconds d) {
                            retries_.fetch_add(1);
                            std::this_thread::sleep_for(d);
                          }});
  }
  void TearDown() override {
    client_.reset();
    transport_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Runs an informer on its own thread; stops and joins it when it goes out of scope (declare
  // it after the informer).
  class Running {
   public:
    explicit Running(InformerBase& informer)
        : informer_(informer), thread_([this] { informer_.run(); }) {}
    ~Running() {
      informer_.stop();
      thread_.join();
    }

   private:
    InformerBase& informer_;
    std::thread thread_;
  };

  static InformerOptions fast(InformerOptions o = {}) {
    o.initial_backoff = milliseconds(5);
    o.max_backoff = milliseconds(50);
    o.short_watch = milliseconds(0);
    return o;
  }

  // The server's pods (namespace default) as a set of "name@node[~]" (~: terminating).
  std::set<std::string> serverPods(const std::string& node_name) {
    std::set<std::string> out;
    auto list = server_->store().list(*server_->store().findQualified("pods"), "default", {});
    for (const auto& item : list.body["items"]) {
      if (item["spec"].value("nodeName", "") != node_name) continue;
      out.insert(item["metadata"]["name"].get<std::string>() + "@" + node_name +
                 (item["metadata"].contains("deletionTimestamp") ? "~" : ""));
    }
    return out;
  }
  static std::set<std::string> cachedPods(const Informer<PodRecord>& informer) {
    std::set<std::string> out;
    informer.forEach([&](const PodRecord& p) {
      out.insert(p.name + "@" + p.node_name.str() + (p.terminating() ? "~" : ""));
    });
    return out;
  }

  base::SystemClock clock_;
  std::string dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  std::unique_ptr<CurlTransport> transport_;
  std::unique_ptr<RestClient> client_;
  std::atomic<int> retries_{0};
};

TEST_F(InformerSimTest, SyncsPagedListsThenFollowsWatchEventsThroughGracefulDeletion) {
  std::mutex mu;
  std::vector<std::string> seen;
  auto note = [&](std::string s) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(s));
  };
  Informer<PodRecord> pods(
      *client_, clock_, resources::kPods, "",
      fast({.field_selector = "spec.nodeName=node-a", .page_size = 3}), decodePod,
      {.on_add = [&](const PodRecord& p) { note("add " + p.name); },
       .on_update = [&](const PodRecord&, const PodRecord& p) { note("update " + p.name); },
       .on_delete = [&](const PodRecord& p) { note("delete " + p.name); }});
  Informer<NodeRecord> nodes(*client_, clock_, resources::kNodes, "", fast(), decodeNode);
  Running run_pods(pods);
  Running run_nodes(nodes);
  ASSERT_TRUE(pods.waitForSync(seconds(10)));
  ASSERT_TRUE(nodes.waitForSync(seconds(10)));
  EXPECT_EQ(pods.size(), 7U);  // the field selector: node-a's pods only
  EXPECT_EQ(nodes.size(), 2U);
  EXPECT_EQ(nodes.get("", "node-b")->condition("Ready")->status, "Unknown");

  // A new pod, a graceful delete on a Ready node (Terminating, then gone when the simulated
  // kubelet finishes it), and a pod on another node that the selector filters out.
  ASSERT_TRUE(client_->create(resources::kPods, "default", pod("new", "node-a")));
  ASSERT_TRUE(client_->create(resources::kPods, "default", pod("other", "node-b")));
  ASSERT_TRUE(client_->remove(resources::kPods, "default", "a0", {.grace_period_seconds = 1}));
  ASSERT_TRUE(eventually([&] { return !pods.get("default", "a0") && pods.get("default", "new"); }));
  {
    std::lock_guard lock(mu);
    std::vector<std::string> tail(seen.begin() + 7, seen.end());
    EXPECT_THAT(tail, ::testing::ElementsAre("add new", "update a0", "delete a0"));
  }
  EXPECT_FALSE(pods.get("default", "other"));

  // The node informer sees a condition change, and bookmarks keep its version fresh.
  Json ready = node("node-b", "True");
  ASSERT_TRUE(server_->put(ready));
  ASSERT_TRUE(
      eventually([&] { return nodes.get("", "node-b")->condition("Ready")->status == "True"; }));
  ASSERT_TRUE(eventually([&] { return nodes.stats().bookmarks > 0; }));
  EXPECT_EQ(pods.stats().lists, 1U);
  EXPECT_EQ(pods.stats().failures, 0U);
}

TEST_F(InformerSimTest, DroppedStreamsResumeWithoutLosingOrRelisting) {
  Informer<PodRecord> pods(*client_, clock_, resources::kPods, "default", fast(), decodePod);
  Running running(pods);
  ASSERT_TRUE(pods.waitForSync(seconds(10)));
  server_->setFaults({.drop_watch_after_events = 1});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        client_->create(resources::kPods, "default", pod("n" + std::to_string(i), "node-a")));
  }
  ASSERT_TRUE(client_->remove(resources::kPods, "default", "b0", {.grace_period_seconds = 0}));
  auto expect = serverPods("node-a");
  expect.merge(serverPods("node-b"));
  ASSERT_EQ(expect.size(), 19U);
  ASSERT_TRUE(eventually([&] { return cachedPods(pods) == expect; })) << pods.size();
  auto stats = pods.stats();
  EXPECT_EQ(stats.lists, 1U);  // every stream was resumed from its last version
  EXPECT_GE(stats.watches, 11U);
}

TEST_F(InformerSimTest, ASilentWatchIsDeadAfterTheIdleBoundAndTheInformerRecovers) {
  // Defect: a watch the server kept open but sent nothing on (not even bookmarks) looked
  // healthy for its whole timeout (5-10 min), so the cache went stale while "connected".
  InformerOptions options = fast();
  options.watch_idle_timeout = seconds(1);
  Informer<PodRecord> pods(*client_, clock_, resources::kPods, "default", options, decodePod);
  Running running(pods);
  ASSERT_TRUE(pods.waitForSync(seconds(10)));
  ASSERT_TRUE(eventually([&] { return pods.stats().bookmarks > 0; }));
  EXPECT_TRUE(pods.stats().connected);
  server_->setFaults({.stall_watches = true});
  // libcurl averages the speed over a few seconds: the bound plus that.
  ASSERT_TRUE(eventually([&] { return !pods.stats().connected; }, seconds(15)));
  EXPECT_THAT(pods.stats().last_error, ::testing::HasSubstr("no data for 1 s"));
  server_->setFaults({});
  ASSERT_TRUE(client_->create(resources::kPods, "default", pod("late", "node-a")));
  ASSERT_TRUE(eventually([&] { return pods.get("default", "late").has_value(); }, seconds(15)));
  EXPECT_TRUE(eventually([&] { return pods.stats().connected; }));
  EXPECT_EQ(pods.stats().lists, 1U);  // resumed from its version, not re-listed
}

TEST_F(InformerSimTest, GoneRelistsAndTheCacheConvergesOnTheServer) {
  Informer<PodRecord> pods(*client_, clock_, resources::kPods, "", fast(), decodePod);
  Running running(pods);
  ASSERT_TRUE(pods.waitForSync(seconds(10)));
  // Changes go straight into the store, the history is compacted, and the open stream is cut:
  // the next watch gets 410 and the informer must list again.
  server_->forceGoneOnNextWatch();
  server_->setFaults({.drop_watch_after = milliseconds(50)});
  ASSERT_TRUE(eventually([&] { return pods.stats().lists >= 2; }));
  EXPECT_GE(pods.stats().relists_gone, 1U);
  server_->setFaults({});
  ASSERT_TRUE(eventually([&] {
    return cachedPods(pods) == [&] {
      auto all = serverPods("node-a");
      all.merge(serverPods("node-b"));
      return all;
    }();
  }));
}

TEST_F(InformerSimTest, InjectedThrottlingAndServerErrorsAreRetriedAndTheCacheConverges) {
  server_->setFaults({.rate_429 = 0.2, .rate_500 = 0.2});
  Informer<PodRecord> pods(*client_, clock_, resources::kPods, "", fast({.page_size = 2}),
                           decodePod);
  Running running(pods);
  ASSERT_TRUE(pods.waitForSync(seconds(20)));
  for (int i = 0; i < 10; ++i) {
    // Updates (PUT, idempotent) retry 429 and 500 alike.
    auto got = client_->get(resources::kPods, "default", "a" + std::to_string(i % 7));
    ASSERT_TRUE(got) << got.error().message();
    (*got)["metadata"]["labels"]["round"] = std::to_string(i);
    (*got)["metadata"].erase("resourceVersion");
    auto updated = client_->update(resources::kPods, "default", *got);
    ASSERT_TRUE(updated) << updated.error().message();
  }
  auto expect = serverPods("node-a");
  expect.merge(serverPods("node-b"));
  ASSERT_TRUE(eventually([&] { return cachedPods(pods) == expect; }, seconds(20)));
  EXPECT_GT(retries_.load(), 0);
  server_->setFaults({});
}

TEST_F(InformerSimTest, CreatesRetryOnlyWhatTheServerProvablyRejectedBeforeActing) {
  // 429 is answered before acting: a POST retries it. 500 may have come after the write: the
  // POST returns it to the caller instead of risking a second create.
  server_->setFaults({.rate_429 = 0.5});
  for (int i = 0; i < 10; ++i) {
    auto created =
        client_->create(resources::kPods, "default", pod("t" + std::to_string(i), "node-a"));
    ASSERT_TRUE(created) << created.error().message();
  }
  EXPECT_GT(retries_.load(), 0);
  server_->setFaults({.rate_500 = 1.0});
  const int before = retries_.load();
  auto failed = client_->create(resources::kPods, "default", pod("u", "node-a"));
  ASSERT_FALSE(failed);
  EXPECT_EQ(retries_.load(), before);
  auto got = client_->get(resources::kPods, "default", "t0");  // a GET retries 500s: all fail
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().code(), ErrorCode::kUnavailable) << got.error().message();
  EXPECT_EQ(retries_.load(), before + 19);
  server_->setFaults({});
}

}  // namespace
}  // namespace ekco::kube
