// The fault proxy in front of ekco-kubesim, each fault observed with a plain libcurl client
// that trusts kubesim's CA and authenticates with a bearer token through the proxy.
#include "tests/fakes/fault_proxy.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/kubesim/server/server.h"

namespace ekco::fakes {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

constexpr const char* kToken = "proxy-test-token";

struct Reply {
  CURLcode code = CURLE_OK;
  long status = 0;
  std::string body{};
  std::string headers{};
  milliseconds took{0};
};

class FaultProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-fault-proxy-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    json node = {{"apiVersion", "v1"},
                 {"kind", "Node"},
                 {"metadata", {{"name", "node-a"}}},
                 {"spec", json::object()},
                 {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
    auto server = kubesim::Server::start(
        {.out_dir = (dir_ / "sim").string(),
         .objects = {node},
         .tokens = {{.token = kToken, .user = "tester", .groups = {"system:masters"}}}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto proxy = FaultProxy::start({.upstream_port = server_->port(),
                                    .upstream_ca_pem = server_->pki().ca_cert_pem,
                                    .cert_pem = server_->pki().server_cert_pem,
                                    .key_pem = server_->pki().server_key_pem});
    ASSERT_TRUE(proxy) << proxy.error().message();
    proxy_ = std::move(*proxy);
    ca_file_ = (dir_ / "sim/ca.crt").string();
  }
  void TearDown() override {
    if (proxy_) proxy_->stop();
    if (server_) server_->stop();
    fs::remove_all(dir_);
  }

  // GET `path` through the proxy. `max_body`: abort once this much arrived (for endless
  // answers).
  Reply get(const std::string& path, milliseconds timeout = milliseconds(5000),
            std::size_t max_body = 0) {
    struct Sink {
      std::string* out;
      std::size_t max;
    };
    Reply r;
    Sink sink{&r.body, max_body};
    CURL* curl = curl_easy_init();
    const std::string url = proxy_->url() + path;
    const std::string auth = std::string("Authorization: Bearer ") + kToken;
    curl_slist* headers = curl_slist_append(nullptr, auth.c_str());
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout.count()));
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(
        curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* ud) -> size_t {
          auto* s = static_cast<Sink*>(ud);
          s->out->append(p, n);
          return s->max != 0 && s->out->size() >= s->max ? 0 : n;
        });
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(
        curl, CURLOPT_HEADERFUNCTION, +[](char* p, size_t, size_t n, void* ud) -> size_t {
          static_cast<std::string*>(ud)->append(p, n);
          return n;
        });
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &r.headers);
    const auto t0 = Clock::now();
    r.code = curl_easy_perform(curl);
    r.took = std::chrono::duration_cast<milliseconds>(Clock::now() - t0);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return r;
  }

  // A watch of the nodes read on a thread until `stop` (or 20 s): what arrived, and when last.
  struct Watch {
    std::mutex mu;
    std::string body;
    Clock::time_point last_byte = Clock::now();
    std::atomic<bool> done{false};
    std::atomic<bool> stop{false};
    CURLcode code = CURLE_OK;
    std::thread thread;
    std::size_t size() {
      std::lock_guard lock(mu);
      return body.size();
    }
  };
  void startWatch(Watch& w, const std::string& query = "?watch=true&allowWatchBookmarks=true") {
    const std::string url = proxy_->url() + "/api/v1/nodes" + query;
    w.thread = std::thread([this, &w, url] {
      CURL* curl = curl_easy_init();
      const std::string auth = std::string("Authorization: Bearer ") + kToken;
      curl_slist* headers = curl_slist_append(nullptr, auth.c_str());
      curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
      curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file_.c_str());
      curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 20000L);
      curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
      curl_easy_setopt(
          curl, CURLOPT_XFERINFOFUNCTION,
          +[](void* ud, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> int {
            return static_cast<Watch*>(ud)->stop ? 1 : 0;
          });
      curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &w);
      curl_easy_setopt(
          curl, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* ud) -> size_t {
            auto* watch = static_cast<Watch*>(ud);
            std::lock_guard lock(watch->mu);
            watch->body.append(p, n);
            watch->last_byte = Clock::now();
            return n;
          });
      curl_easy_setopt(curl, CURLOPT_WRITEDATA, &w);
      w.code = curl_easy_perform(curl);
      curl_slist_free_all(headers);
      curl_easy_cleanup(curl);
      w.done = true;
    });
  }
  static void endWatch(Watch& w) {
    w.stop = true;
    if (w.thread.joinable()) w.thread.join();
  }
  template <typename F>
  static bool eventually(F pred, milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      if (pred()) return true;
      std::this_thread::sleep_for(milliseconds(20));
    }
    return pred();
  }

  fs::path dir_;
  std::string ca_file_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<FaultProxy> proxy_;
};

TEST_F(FaultProxyTest, PassForwardsRequestsWithTheClientsCredentialsAndCountsThem) {
  const auto t0 = Clock::now();
  Reply r = get("/api/v1/nodes/node-a");
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["metadata"]["name"], "node-a");
  r = get("/api/v1/nodes");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(proxy_->requests(), 2);
  EXPECT_GE(proxy_->peakPerSecond(t0, Clock::now()), 1);
  // kubesim saw the token's user, not the proxy.
  EXPECT_EQ(server_->requestLog().back().user, "tester");
  EXPECT_EQ(describeFault(proxy_->fault()), "pass");
}

TEST_F(FaultProxyTest, RefuseResetsNewConnectionsUntilLifted) {
  proxy_->setFault({.mode = FaultMode::kRefuse});
  server_->clearRequestLog();
  Reply r = get("/api/v1/nodes");
  EXPECT_NE(r.code, CURLE_OK);
  EXPECT_EQ(r.status, 0);
  EXPECT_TRUE(server_->requestLog().empty());
  EXPECT_EQ(proxy_->requests(), 1);  // the reset connection counts
  proxy_->setFault({});
  EXPECT_EQ(get("/api/v1/nodes").status, 200);
}

TEST_F(FaultProxyTest, HangAnswersNothingAndSilencesOpenStreams) {
  Watch w;
  startWatch(w);
  ASSERT_TRUE(eventually([&] { return w.size() > 0; }, seconds(10)));  // the ADDED node-a
  proxy_->setFault({.mode = FaultMode::kHang});
  const std::size_t before = w.size();
  Reply r = get("/api/v1/nodes", milliseconds(1500));
  EXPECT_EQ(r.code, CURLE_OPERATION_TIMEDOUT);
  // A node changes: the stream would carry it (and bookmarks every second), but says nothing.
  ASSERT_TRUE(server_->put({{"apiVersion", "v1"},
                            {"kind", "Node"},
                            {"metadata", {{"name", "node-b"}}},
                            {"spec", json::object()}}));
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(w.size(), before);
  EXPECT_FALSE(w.done);
  // Lifted: the silenced stream ends, new requests are answered.
  proxy_->setFault({});
  EXPECT_TRUE(eventually([&] { return w.done.load(); }, seconds(5)));
  EXPECT_EQ(get("/api/v1/nodes/node-b").status, 200);
  endWatch(w);
}

TEST_F(FaultProxyTest, SlowAddsLatencyToTheRequestAndEachChunk) {
  proxy_->setFault({.mode = FaultMode::kSlow, .latency = milliseconds(300)});
  Reply r = get("/api/v1/nodes");
  ASSERT_EQ(r.code, CURLE_OK) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_GE(r.took, milliseconds(600));
  EXPECT_EQ(describeFault(proxy_->fault()), "slow 300ms");
}

TEST_F(FaultProxyTest, ResetCutsTheResponseWithAnRstAfterTheRequestReachedTheServer) {
  proxy_->setFault({.mode = FaultMode::kReset});
  server_->clearRequestLog();
  Reply r = get("/api/v1/nodes");
  EXPECT_EQ(r.code, CURLE_RECV_ERROR) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);      // the header arrived
  EXPECT_FALSE(r.body.empty());  // and part of the body
  EXPECT_TRUE(json::parse(r.body, nullptr, false).is_discarded());
  ASSERT_EQ(server_->requestLog().size(), 1U);  // the server did serve it
  // An open stream is reset too.
  proxy_->setFault({});
  Watch w;
  startWatch(w);
  ASSERT_TRUE(eventually([&] { return w.size() > 0; }, seconds(10)));
  proxy_->setFault({.mode = FaultMode::kReset});
  ASSERT_TRUE(eventually([&] { return w.done.load(); }, seconds(5)));
  EXPECT_EQ(w.code, CURLE_RECV_ERROR) << curl_easy_strerror(w.code);
  endWatch(w);
}

TEST_F(FaultProxyTest, ErrorsAtARateAreSynthesisedStatusesWithRetryAfter) {
  proxy_->setFault({.mode = FaultMode::k429, .rate = 0.5});
  server_->clearRequestLog();
  int too_many = 0;
  for (int i = 0; i < 10; ++i) {
    Reply r = get("/api/v1/nodes");
    if (r.status == 429) {
      ++too_many;
      json status = json::parse(r.body);
      EXPECT_EQ(status["kind"], "Status");
      EXPECT_EQ(status["reason"], "TooManyRequests");
      EXPECT_EQ(status["code"], 429);
      EXPECT_THAT(r.headers, HasSubstr("Retry-After: 1"));
    } else {
      EXPECT_EQ(r.status, 200);
    }
  }
  EXPECT_EQ(too_many, 5);
  EXPECT_EQ(server_->requestLog().size(), 5U);  // the others never reached it
  EXPECT_EQ(describeFault(proxy_->fault()), "429 @50%");

  proxy_->setFault({.mode = FaultMode::k500, .rate = 1.0});
  for (int i = 0; i < 3; ++i) {
    Reply r = get("/api/v1/nodes");
    EXPECT_EQ(r.status, 500);
    EXPECT_EQ(json::parse(r.body)["reason"], "InternalError");
  }
}

TEST_F(FaultProxyTest, TruncateCutsTheBodyMidJson) {
  proxy_->setFault({.mode = FaultMode::kTruncate});
  Reply r = get("/api/v1/nodes");
  EXPECT_NE(r.code, CURLE_OK);  // the length promised was not delivered
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.body.empty());
  EXPECT_THAT(r.body, ::testing::StartsWith("{"));
  EXPECT_TRUE(json::parse(r.body, nullptr, false).is_discarded()) << r.body;
  proxy_->setFault({});
  r = get("/api/v1/nodes");
  EXPECT_EQ(r.code, CURLE_OK);
  EXPECT_FALSE(json::parse(r.body, nullptr, false).is_discarded());
}

TEST_F(FaultProxyTest, EndlessLineAnswersWatchesWithALineThatNeverEnds) {
  proxy_->setFault({.mode = FaultMode::kEndlessLine});
  // Lists pass.
  EXPECT_EQ(get("/api/v1/nodes").status, 200);
  // A watch gets megabytes without a newline (the client gives up at 4 MiB).
  Reply r = get("/api/v1/nodes?watch=true", milliseconds(10000), std::size_t{4} << 20);
  EXPECT_EQ(r.code, CURLE_WRITE_ERROR) << curl_easy_strerror(r.code);
  EXPECT_EQ(r.status, 200);
  EXPECT_GE(r.body.size(), std::size_t{4} << 20);
  EXPECT_EQ(r.body.find('\n'), std::string::npos);
  EXPECT_THAT(r.body, ::testing::StartsWith(R"({"type":"ADDED","object":)"));
  // An open watch is closed when the fault starts, so its client comes back for the line.
  proxy_->setFault({});
  Watch w;
  startWatch(w);
  ASSERT_TRUE(eventually([&] { return w.size() > 0; }, seconds(10)));
  proxy_->setFault({.mode = FaultMode::kEndlessLine});
  EXPECT_TRUE(eventually([&] { return w.done.load(); }, seconds(5)));
  endWatch(w);
}

TEST_F(FaultProxyTest, PeakPerSecondCountsTheBusiestSecond) {
  const auto t0 = Clock::now();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(get("/api/v1/nodes").status, 200);
  const auto t1 = Clock::now();
  EXPECT_EQ(proxy_->requests(), 6);
  // Six requests within at most two seconds: one second held at least three.
  EXPECT_GE(proxy_->peakPerSecond(t0, t1), 3);
  EXPECT_LE(proxy_->peakPerSecond(t0, t1), 6);
  EXPECT_EQ(proxy_->peakPerSecond(t1 + seconds(5), t1 + seconds(6)), 0);
}

}  // namespace
}  // namespace ekco::fakes
