// Three leader electors against ekco-kubesim over HTTPS, each with its own RestClient, on real
// time: one leads, another takes over when it stops renewing, fencing holds throughout. (The
// Lease semantics in detail: leader_election_test.cc.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "agent/runtime/leader_election.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/runtime/leader_election_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using kube::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::elector;
using testing::Recorder;

// Three agents against ekco-kubesim over HTTPS, each with its own RestClient, on real time.
class LeaderElectionSimTest : public ::testing::Test {
 protected:
  struct Agent {
    std::unique_ptr<kube::CurlTransport> transport{};
    std::unique_ptr<kube::RestClient> client{};
    std::unique_ptr<LeaderElector> elector{};
    std::thread thread{};
  };

  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-election-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // ekco runs in the kurl namespace, where its Lease lives.
    auto server =
        kubesim::Server::start({.out_dir = dir_, .objects = {kubesim::namespaceObject("kurl")}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    fs_ = std::move(*fs);
    auto conn = kube::loadKubeconfig(*fs_, server_->kubeconfigPath());
    ASSERT_TRUE(conn) << conn.error().message();
    for (int i = 0; i < 3; ++i) {
      Agent& agent = agents_[i];
      auto transport =
          kube::CurlTransport::create(*conn, fs_.get(), clock_, {.connect_timeout = seconds(5)});
      ASSERT_TRUE(transport) << transport.error().message();
      agent.transport = std::move(*transport);
      agent.client = std::make_unique<kube::RestClient>(
          *agent.transport, clock_,
          kube::RestClientOptions{.request_timeout = seconds(2),
                                  .retry = {.max_attempts = 2,
                                            .base_delay = milliseconds(1),
                                            .max_delay = milliseconds(5),
                                            .max_retry_after = milliseconds(5)}});
      agent.elector = elector(*agent.client, clock_, "node-" + std::to_string(i), &recs_[i],
                              {.lease_duration = milliseconds(1000),
                               .renew_deadline = milliseconds(600),
                               .retry_period = milliseconds(100)});
    }
  }
  void TearDown() override {
    for (auto& agent : agents_) {
      if (agent.elector) agent.elector->stop();
      if (agent.thread.joinable()) agent.thread.join();
      agent.elector.reset();
      agent.client.reset();
      agent.transport.reset();
    }
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start(int i) {
    agents_[i].thread = std::thread([this, i] { agents_[i].elector->run(); });
  }
  void stopAgent(int i) {
    agents_[i].elector->stop();
    agents_[i].thread.join();
    stopped_[i] = true;
  }
  // The running agents whose elector says it leads. (A stopped one keeps isLeader() until a
  // step or release() ends its term; its isLeaderFresh() ends with the renew deadline.)
  std::vector<int> leaders() {
    std::vector<int> out;
    for (int i = 0; i < 3; ++i) {
      if (!stopped_[i] && agents_[i].elector->isLeader()) out.push_back(i);
    }
    return out;
  }
  // Waits until exactly one agent other than `not_this` leads; -1 on timeout.
  int waitForLeader(int not_this = -1, milliseconds timeout = milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto l = leaders();
      if (l.size() == 1 && l[0] != not_this) return l[0];
      std::this_thread::sleep_for(milliseconds(10));
    }
    return -1;
  }
  Json serverLease() {
    auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-leader");
    EXPECT_TRUE(lease);
    return lease.value_or(Json::object());
  }

  base::SystemClock clock_;
  std::string dir_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  Recorder recs_[3];
  bool stopped_[3] = {false, false, false};
  Agent agents_[3];
};

TEST_F(LeaderElectionSimTest, ThreeAgentsElectOneAndAnotherTakesOverWhenItStopsRenewing) {
  // Fencing holds throughout: never two agents fresh at once, even the stopped one.
  std::atomic<bool> done{false};
  std::atomic<int> overlaps{0}, samples{0};
  std::thread monitor([&] {
    while (!done) {
      int fresh = 0;
      for (auto& agent : agents_) fresh += agent.elector->isLeaderFresh() ? 1 : 0;
      if (fresh > 1) overlaps++;
      samples++;
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& thread;
    ~Join() {
      done = true;
      thread.join();
    }
  } join{done, monitor};

  for (int i = 0; i < 3; ++i) start(i);
  const int first = waitForLeader();
  ASSERT_GE(first, 0);
  // Stays exactly one for a while (several renewals, acquirers retrying).
  for (int n = 0; n < 30; ++n) {
    std::this_thread::sleep_for(milliseconds(10));
    ASSERT_EQ(leaders(), std::vector<int>{first});
  }
  Json lease = serverLease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-" + std::to_string(first));
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(agents_[i].elector->status().holder, "node-" + std::to_string(first)) << i;
  }

  // The leader stops renewing without releasing (hung): another takes over after the lease
  // duration.
  const auto stopped_at = std::chrono::steady_clock::now();
  stopAgent(first);
  const int second = waitForLeader(first);
  ASSERT_GE(second, 0);
  const auto took = std::chrono::steady_clock::now() - stopped_at;
  EXPECT_GE(took, milliseconds(850));  // not before the lease expired on the monotonic clock
  EXPECT_FALSE(agents_[first].elector->isLeaderFresh());
  lease = serverLease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-" + std::to_string(second));
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 1);
  // Callbacks run just after the state changes: give the callback its moment.
  const auto wait_until = std::chrono::steady_clock::now() + seconds(2);
  while (recs_[second].count("started") == 0 && std::chrono::steady_clock::now() < wait_until) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(recs_[second].count("started"), 1);

  // The new leader shuts down cleanly: the last one takes over without waiting a lease duration.
  const int third = 3 - first - second;
  const auto released_at = std::chrono::steady_clock::now();
  stopAgent(second);
  ASSERT_TRUE(agents_[second].elector->release());
  EXPECT_EQ(recs_[second].count("stopped"), 1);
  ASSERT_EQ(waitForLeader(second), third);
  EXPECT_LT(std::chrono::steady_clock::now() - released_at, milliseconds(900));
  lease = serverLease();
  EXPECT_EQ(lease["spec"]["holderIdentity"], "node-" + std::to_string(third));
  EXPECT_EQ(lease["spec"]["leaseTransitions"], 2);
  EXPECT_GT(samples.load(), 100);
  EXPECT_EQ(overlaps.load(), 0);
}

}  // namespace
}  // namespace ekco::agent
