// Issue 34, Medium 8: memory across informers. Each watch bounds its own line, but a server that
// streams endless lines to every watch at once took the agent to ~300 MiB, past the DaemonSet's
// 256Mi limit. Here one real `ekco agent`, leading, with every cache it can have (the internal
// load balancer's four, host jobs, CSRs, Envoy pods, node leases, the cluster's nodes and the
// pods of each of eight unhealthy nodes), talks to ekco-kubesim through the TLS fault proxy in
// its endless-line mode (tests/fakes/fault_proxy.h) for 20 s: every watch it opens is answered
// with a line that never ends. The agent's buffer budget (base/memory_budget.h) must hold: its
// peak, read from /metrics, at most the budget, with refusals (the budget, not the per-line
// bound, was what stopped the growth), the process's peak RSS during the fault at most twice
// the budget above its peak before (an ASan agent's own RSS is ~360 MiB and its shadow and
// redzones add to each buffer; without the budget, 21 watches times an 8-16 MiB line), and
// every cache back once the server behaves.
//
// EKCO_AGENT_BIN runs another `ekco` (a Release build, for the figures in BENCHMARKS.md).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent/serve/health_server.h"
#include "base/memory_budget.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/fakes/fault_proxy.h"
#include "tests/kubesim/server/pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using fakes::FaultMode;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::kEkcoToken;
constexpr int kUnhealthyNodes = 8;
constexpr std::size_t kContainerLimit = std::size_t{256} << 20;  // deploy/30-daemonset.yaml
constexpr std::size_t kMiB = std::size_t{1} << 20;

// One sample of /metrics' `name{state="..."}` (or an unlabelled `name`); -1 when absent.
double metric(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return -1;
}

// VmHWM (the peak resident set) of a process, in bytes; 0 when unreadable.
std::size_t peakRss(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  }
  return 0;
}

class BufferBudgetE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-budget-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string since = kube::formatRfc3339(clock_.wallNow() - std::chrono::hours(1));
    std::vector<json> objects = {kubesim::readyNodeObject("cp-1", "10.0.0.1", true)};
    for (int i = 0; i < kUnhealthyNodes; ++i) {
      objects.push_back(kubesim::unreachableNode(
          kubesim::readyNodeObject(fmt::format("worker-{}", i), fmt::format("10.0.1.{}", i)),
          since));
    }
    ASSERT_NO_FATAL_FAILURE(
        testing::startAsEkco({.dir = dir_.string(), .objects = std::move(objects)}, server_));
    auto proxy = fakes::FaultProxy::start({.upstream_port = server_->port(),
                                           .upstream_ca_pem = server_->pki().ca_cert_pem,
                                           .cert_pem = server_->pki().server_cert_pem,
                                           .key_pem = server_->pki().server_key_pem});
    ASSERT_TRUE(proxy) << proxy.error().message();
    proxy_ = std::move(*proxy);
    std::ofstream(dir_ / "kubeconfig")
        << kubesim::renderTokenKubeconfig(server_->pki(), proxy_->url(), "ekco", kEkcoToken);
    // Every cache on; nothing that acts (the nodes stay, no pod is cleared).
    std::ofstream(dir_ / "config.yaml") << "leader_election_lease_duration: 3s\n"
                                           "leader_election_renew_deadline: 2s\n"
                                           "leader_election_retry_period: 500ms\n"
                                           "enable_internal_load_balancer: true\n"
                                           "enable_host_jobs: true\n"
                                           "auto_approve_kubelet_csrs: true\n"
                                           "restart_failed_envoy_pods: true\n"
                                           "contour_namespace: projectcontour\n"
                                           "shutdown_out_of_service: true\n"
                                           "clear_dead_nodes: true\n"
                                           "purge_dead_nodes: false\n"
                                           "auto_resource_scaling: false\n"
                                           "disable_reboot_service: true\n";
    const fs::path root = dir_ / "root";
    fs::create_directories(root / "etc/kubernetes");
    std::ofstream(root / "etc/kubernetes/kubelet.conf") << "# joined\n";
    // ASan's quarantine would hold every dropped line: the RSS would measure the sanitizer.
    const char* bin = std::getenv("EKCO_AGENT_BIN");
    pid_ = testing::spawnLogged(
        {bin != nullptr ? bin : EKCO_BIN, "agent", "--config", (dir_ / "config.yaml").string(),
         "--kubeconfig", (dir_ / "kubeconfig").string(), "--node-name", "cp-1", "--host-root",
         root.string(), "--socket", socket()},
        log(), {"ASAN_OPTIONS=" + testing::asanOptionsForRss()});
    ASSERT_GT(pid_, 0);
  }

  void TearDown() override {
    testing::killAndReap(pid_);
    if (proxy_) proxy_->stop();
    if (server_) server_->stop();
    fs::remove_all(dir_);
  }

  std::string socket() const { return (dir_ / "agent.sock").string(); }
  std::string log() const { return (dir_ / "agent.log").string(); }

  json status() {
    auto reply = queryHealthSocket(socket(), "/status", milliseconds(3000));
    if (!reply || reply->status != 200) return nullptr;
    return json::parse(reply->body, nullptr, false);
  }
  std::string metrics() {
    auto reply = queryHealthSocket(socket(), "/metrics", milliseconds(3000));
    return reply && reply->status == 200 ? reply->body : std::string();
  }
  // The leader's caches, when every one has listed; 0 otherwise.
  std::size_t syncedCaches() {
    const json s = status();
    if (!s.is_object() || !s.value("is_leader", false)) return 0;
    const json caches = s.value("caches", json::array());
    for (const json& c : caches) {
      if (!c.value("synced", false)) return 0;
    }
    return caches.size();
  }

  base::SystemClock clock_;
  fs::path dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<fakes::FaultProxy> proxy_;
  pid_t pid_ = -1;
};

TEST_F(BufferBudgetE2eTest, EndlessLinesOnEveryWatchAtOnceStayWithinTheBudget) {
  // The leader, with the pods of every unhealthy node watched too.
  std::size_t caches = 0;
  ASSERT_TRUE(testing::eventually([&] { return (caches = syncedCaches()) >= 11 + kUnhealthyNodes; },
                                  seconds(60)))
      << "caches: " << status().dump() << "\n"
      << testing::readWholeFile(log());
  const std::size_t rss_before = peakRss(pid_);

  proxy_->setFault({.mode = FaultMode::kEndlessLine});
  double peak = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < seconds(20)) {
    std::this_thread::sleep_for(seconds(1));
    const std::string text = metrics();
    ASSERT_FALSE(text.empty()) << "the agent stopped answering /metrics\n"
                               << testing::readWholeFile(log());
    peak = std::max(peak, metric(text, R"(ekco_buffer_bytes{state="peak"})"));
  }
  const std::size_t rss_during = peakRss(pid_);
  const std::string text = metrics();
  const double budget = metric(text, R"(ekco_buffer_bytes{state="budget"})");
  const double refusals = metric(text, "ekco_buffer_refusals_total");
  peak = std::max(peak, metric(text, R"(ekco_buffer_bytes{state="peak"})"));
  proxy_->setFault({});

  std::cout << fmt::format(
                   "| watches with endless lines | {} caches |\n"
                   "| buffered, peak            | {:.1f} MiB (budget {:.0f} MiB) |\n"
                   "| refusals                  | {:.0f} |\n"
                   "| peak RSS before / during  | {:.1f} / {:.1f} MiB (container limit {} MiB) |\n",
                   caches, peak / kMiB, budget / kMiB, refusals,
                   static_cast<double>(rss_before) / kMiB, static_cast<double>(rss_during) / kMiB,
                   kContainerLimit / kMiB)
            << std::flush;
  EXPECT_EQ(budget, static_cast<double>(base::kMaxBufferedBytes));
  EXPECT_GT(peak, 0);
  EXPECT_LE(peak, budget);
  // Together the lines would have passed the budget: it, not each line's bound, held them.
  EXPECT_GT(refusals, 0) << testing::readWholeFile(log());
  EXPECT_GT(rss_before, 0u);
  EXPECT_LT(rss_during - rss_before, 2 * base::kMaxBufferedBytes);

  // The server behaves again: every cache lists and watches again.
  EXPECT_TRUE(testing::eventually([&] { return syncedCaches() >= caches; }, seconds(60)))
      << status().dump();
}

}  // namespace
}  // namespace ekco::agent
