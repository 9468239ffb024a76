// The internal load balancer for real: Debian's HAProxy on loopback, with a config ekco rendered,
// in front of three TLS test API servers (ekco-kubesim, sharing one PKI as a cluster's apiservers
// share one CA).
//
//   1. Requests through HAProxy reach every apiserver; one apiserver is killed and every request
//      still succeeds (retries + redispatch, then the health check takes it out).
//   2. A real `ekco agent` discovers the apiservers from the default/kubernetes EndpointSlices,
//      writes haproxy.cfg and the static pod, and when the EndpointSlices change it rewrites the
//      config and reloads HAProxy (SIGUSR2 to the master it finds through /proc): new requests go
//      to the new apiserver, the master is the same process, and a watch opened before the reload
//      keeps receiving events.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/cancel_token.h"
#include "kube/transport/curl_transport.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::eventually;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kHaproxy = "/usr/sbin/haproxy";

// A loopback port nobody listens on right now (0, with a test failure, when there is none).
std::uint16_t freePort() {
  auto port = kubesim::freeLoopbackPort();
  EXPECT_TRUE(port) << port.error().message();
  return port ? *port : 0;
}

json configMap(const std::string& name, const std::string& who) {
  return kubesim::configMapObject("default", name, {{"apiserver", who}});
}

json slice(const std::string& name, std::uint16_t port) {
  return kubesim::kubernetesEndpointSlice(name, {"127.0.0.1"}, port);
}

class InternalLbHaproxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kHaproxy)) GTEST_SKIP() << kHaproxy << " is not installed (scripts/setup)";
    std::string tmpl = (fs::temp_directory_path() / "ekco-lb-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // Three apiservers with one CA and serving certificate (SAN 127.0.0.1): a client verifies
    // whichever one HAProxy picks.
    for (const char* name : {"a", "b", "c"}) {
      kubesim::ServerOptions options{
          .out_dir = (dir_ / ("apiserver-" + std::string(name))).string(),
          .objects = {configMap("who", name)}};
      if (!apiservers_.empty()) options.pki = apiservers_.begin()->second->pki();
      auto server = kubesim::Server::start(std::move(options));
      ASSERT_TRUE(server) << server.error().message();
      apiservers_[name] = std::move(*server);
    }
    lb_port_ = freePort();
  }
  void TearDown() override {
    testing::killAndReap(agent_pid_);
    testing::killAndReap(haproxy_pid_);
    apiservers_.clear();
    api_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::string endpoint(const std::string& name) {
    return "127.0.0.1:" + std::to_string(apiservers_.at(name)->port());
  }

  void startHaproxy(const std::string& config_path) {
    haproxy_pid_ = testing::spawnLogged({kHaproxy, "-W", "-db", "-f", config_path},
                                        (dir_ / "haproxy.log").string());
    ASSERT_GT(haproxy_pid_, 0);
    ASSERT_TRUE(eventually([&] { return whoAnswers().has_value(); }, seconds(10)))
        << testing::readWholeFile((dir_ / "haproxy.log").string());
  }

  kube::Connection lbConnection() const {
    const kubesim::Pki& pki = apiservers_.begin()->second->pki();
    return {.server = "https://127.0.0.1:" + std::to_string(lb_port_),
            .ca_pem = pki.ca_cert_pem,
            .client_cert_pem = pki.client_cert_pem,
            .client_key_pem = pki.client_key_pem};
  }

  // GET default/who through the load balancer on a new connection (HAProxy balances
  // connections, not requests): the name of the apiserver that answered, or nullopt.
  std::optional<std::string> whoAnswers() {
    auto transport = kube::CurlTransport::create(lbConnection(), nullptr, clock_,
                                                 {.connect_timeout = seconds(5)});
    if (!transport) return std::nullopt;
    kube::RestClient client(**transport, clock_,
                            {.request_timeout = seconds(5), .retry = {.max_attempts = 1}});
    auto cm = client.get(kube::resources::kConfigMaps, "default", "who");
    if (!cm) {
      last_error_ = cm.error().message();
      return std::nullopt;
    }
    return (*cm)["data"].value("apiserver", "");
  }

  fs::path dir_;
  base::SystemClock clock_;
  std::map<std::string, std::unique_ptr<kubesim::Server>> apiservers_;
  std::unique_ptr<kubesim::Server> api_;  // the cluster the agent reads EndpointSlices from
  std::uint16_t lb_port_ = 0;
  pid_t haproxy_pid_ = -1;
  pid_t agent_pid_ = -1;
  std::string last_error_;
};

TEST_F(InternalLbHaproxyTest, TrafficFlowsToEveryApiserverAndSurvivesAKilledOne) {
  // The config exactly as `ekco render haproxy` prints it.
  fs::create_directories(dir_ / "etc/haproxy");
  const std::string cfg = (dir_ / "etc/haproxy/haproxy.cfg").string();
  const std::string endpoints = endpoint("a") + "," + endpoint("b") + "," + endpoint("c");
  const pid_t render =
      testing::spawnLogged({EKCO_BIN, "render", "haproxy", "--endpoints", endpoints, "--bind",
                            "127.0.0.1:" + std::to_string(lb_port_)},
                           cfg);
  int status = 0;
  ::waitpid(render, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << testing::readWholeFile(cfg);
  startHaproxy(cfg);

  std::set<std::string> seen;
  for (int i = 0; i < 12; ++i) {
    auto who = whoAnswers();
    ASSERT_TRUE(who) << last_error_;
    seen.insert(*who);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"a", "b", "c"})) << "round robin reaches every apiserver";

  // Kill one: connections to it are refused; HAProxy retries and redispatches, then marks it
  // down (fall 2 x inter 1 s). Not one request fails.
  apiservers_.at("b")->stop();
  seen.clear();
  int failures = 0;
  const auto until = std::chrono::steady_clock::now() + seconds(4);
  int requests = 0;
  while (std::chrono::steady_clock::now() < until) {
    auto who = whoAnswers();
    ++requests;
    if (who) {
      seen.insert(*who);
    } else {
      ++failures;
      ADD_FAILURE() << "request " << requests << " failed: " << last_error_;
    }
  }
  EXPECT_EQ(failures, 0);
  EXPECT_GE(requests, 12);
  EXPECT_EQ(seen, (std::set<std::string>{"a", "c"}));
  // HAProxy's own log says it took the dead server out.
  EXPECT_TRUE(eventually(
      [&] {
        return testing::readWholeFile((dir_ / "haproxy.log").string()).find("is DOWN") !=
               std::string::npos;
      },
      seconds(5)))
      << testing::readWholeFile((dir_ / "haproxy.log").string());
}

TEST_F(InternalLbHaproxyTest, TheAgentFollowsEndpointSlicesAndAWatchSurvivesTheReload) {
  // The cluster's API (where the agent reads EndpointSlices) is a fourth server; at first the
  // kubernetes Service has one apiserver: a.
  auto api = kubesim::Server::start(
      {.out_dir = (dir_ / "api").string(),
       .objects = {slice("kubernetes-a", apiservers_.at("a")->port()),
                   {{"apiVersion", "v1"},
                    {"kind", "Node"},
                    {"metadata", {{"name", "node-1"}}},
                    {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}}}});
  ASSERT_TRUE(api) << api.error().message();
  api_ = std::move(*api);
  const fs::path root = dir_ / "root";
  fs::create_directories(root / "etc/kubernetes");
  std::ofstream(dir_ / "config.yaml")
      << "enable_internal_load_balancer: true\n"
      << "internal_load_balancer_bind: 127.0.0.1:" << lb_port_ << "\n";
  const std::string socket = (dir_ / "agent.sock").string();
  const std::string agent_log = (dir_ / "agent.log").string();
  agent_pid_ = testing::spawnLogged({EKCO_BIN, "agent", "--config", (dir_ / "config.yaml").string(),
                                     "--kubeconfig", api_->kubeconfigPath(), "--node-name",
                                     "node-1", "--host-root", root.string(), "--socket", socket},
                                    agent_log);
  ASSERT_GT(agent_pid_, 0);
  const std::string cfg = (root / "etc/haproxy/haproxy.cfg").string();
  const fs::path manifest_path = root / "etc/kubernetes/manifests/haproxy.yaml";
  // The config first, then the manifest (so a pod kubelet starts reads the new config).
  ASSERT_TRUE(eventually([&] { return fs::exists(manifest_path); }, seconds(20)))
      << testing::readWholeFile(agent_log);
  EXPECT_THAT(testing::readWholeFile(cfg), HasSubstr("server k8s-primary-0 " + endpoint("a")));
  EXPECT_EQ(fs::status(cfg).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
  const std::string manifest = testing::readWholeFile(manifest_path.string());
  EXPECT_THAT(manifest, HasSubstr("port: " + std::to_string(lb_port_)));

  // kubelet would now start the static pod; here the test starts HAProxy on the agent's file.
  startHaproxy(cfg);
  ASSERT_EQ(whoAnswers(), "a");

  // A watch through the load balancer (on a, the only backend), held across the reload.
  std::mutex mu;
  std::vector<std::string> watched;
  std::atomic<bool> watch_ended{false};
  std::string watch_error;
  kube::CancelToken cancel;
  auto transport =
      kube::CurlTransport::create(lbConnection(), nullptr, clock_, {.connect_timeout = seconds(5)});
  ASSERT_TRUE(transport);
  kube::RestClient watch_client(**transport, clock_, {.request_timeout = seconds(5)});
  std::atomic<bool> watch_open{false};
  std::thread watcher([&] {
    auto st = watch_client.watch(
        kube::resources::kConfigMaps, "default",
        {.resource_version = "",
         .allow_watch_bookmarks = false,
         .timeout_seconds = 600,
         .on_open = [&] { watch_open = true; }},
        [&](const kube::WatchEvent& e) {
          std::lock_guard lock(mu);
          watched.push_back(e.object["metadata"].value("name", ""));
          return true;
        },
        &cancel);
    std::lock_guard lock(mu);
    if (!st) watch_error = st.error().message();
    watch_ended = true;
  });
  struct Join {
    std::thread& t;
    kube::CancelToken& c;
    ~Join() {
      c.cancel();
      if (t.joinable()) t.join();
    }
  } join{watcher, cancel};
  ASSERT_TRUE(eventually([&] { return watch_open.load(); }, seconds(10)));

  // The Service moves to apiserver c: the new slice first, then the old one goes.
  const auto changed = std::chrono::steady_clock::now();
  ASSERT_TRUE(api_->put(slice("kubernetes-c", apiservers_.at("c")->port())));
  ASSERT_TRUE(api_->remove("endpointslices.discovery.k8s.io", "default", "kubernetes-a"));
  // New connections go to c within 2 s of the change.
  ASSERT_TRUE(eventually([&] { return whoAnswers() == "c" && whoAnswers() == "c"; }, seconds(10)))
      << testing::readWholeFile(agent_log);
  const auto propagation = std::chrono::steady_clock::now() - changed;
  EXPECT_LT(propagation, seconds(2)) << "EndpointSlice change to new backend took too long";
  std::cerr << "endpoint change served after "
            << std::chrono::duration_cast<milliseconds>(propagation).count() << " ms\n";
  EXPECT_THAT(testing::readWholeFile(cfg), Not(HasSubstr(endpoint("a"))));
  EXPECT_EQ(::kill(haproxy_pid_, 0), 0) << "the HAProxy master was replaced, not reloaded";

  // The watch opened before the reload still delivers events from a.
  ASSERT_TRUE(apiservers_.at("a")->put(configMap("after-reload", "a")));
  EXPECT_TRUE(eventually(
      [&] {
        std::lock_guard lock(mu);
        return std::find(watched.begin(), watched.end(), "after-reload") != watched.end();
      },
      seconds(5)))
      << "watch ended: " << watch_ended << " " << watch_error;
  EXPECT_FALSE(watch_ended);

  // /status shows what this node's HAProxy was last given.
  auto reply = queryHealthSocket(socket, "/status", milliseconds(2000));
  ASSERT_TRUE(reply && reply->status == 200);
  const json lb = json::parse(reply->body)["internal_load_balancer"];
  EXPECT_EQ(lb["backends"], json::array({endpoint("c")})) << lb.dump();
  EXPECT_EQ(lb["source"], "endpointslices");
  EXPECT_THAT(lb["last_reload"].get<std::string>(), HasSubstr("reloaded master")) << lb.dump();
  EXPECT_EQ(lb["problem"], "") << lb.dump();
  EXPECT_THAT(testing::readWholeFile(agent_log), HasSubstr("haproxy reloaded"));
}

}  // namespace
}  // namespace ekco::agent
