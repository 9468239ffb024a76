// The purge: its guards over tables of cluster states (and randomized ones: no unsafe purge
// ever passes), and the steps against the in-process test API server with a scripted etcd.
#include "agent/features/purge/purge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "agent/policy/node_health.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "tests/agent/cli_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using kube::Atom;
using nlohmann::json;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

const base::WallTime kNow = base::WallTime(seconds(1'700'000'000));

kube::NodeRecord rec(const std::string& name, bool master, const std::string& state) {
  kube::NodeRecord n;
  n.name = Atom(name);
  n.control_plane = master;
  if (state == "ready") {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("True")}};
  } else if (state == "dead") {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("Unknown")}};
    n.taints = {{.key = Atom(kTaintUnreachable),
                 .effect = Atom("NoExecute"),
                 .time_added = kNow - minutes(10)}};
  } else if (state == "new-unreachable") {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("Unknown")}};
    n.taints = {{.key = Atom(kTaintUnreachable),
                 .effect = Atom("NoExecute"),
                 .time_added = kNow - seconds(10)}};
  } else {  // "notready"
    n.conditions = {{.type = Atom("Ready"), .status = Atom("False")}};
  }
  return n;
}

PurgeGuardInput autoInput(std::vector<kube::NodeRecord> nodes, std::string target) {
  return {.nodes = std::move(nodes),
          .target = std::move(target),
          .self = "cp-1",
          .automatic = true,
          .min_ready_master_nodes = 2,
          .min_ready_worker_nodes = 0,
          .now = kNow,
          .node_unreachable_toleration = minutes(5),
          .storm_guard_percent = 55};
}

TEST(PurgeGuards, AutomaticFollowsEkco) {
  const auto base = std::vector<kube::NodeRecord>{
      rec("cp-1", true, "ready"), rec("cp-2", true, "ready"), rec("cp-3", true, "dead"),
      rec("w-1", false, "ready"), rec("w-2", false, "dead")};
  EXPECT_EQ(purgeRefusal(autoInput(base, "cp-3")), std::nullopt);
  EXPECT_EQ(purgeRefusal(autoInput(base, "w-2")), std::nullopt);
  EXPECT_THAT(*purgeRefusal(autoInput(base, "w-1")), HasSubstr("not dead"));
  EXPECT_THAT(*purgeRefusal(autoInput(base, "cp-1")), HasSubstr("the node this ekco runs on"));
  EXPECT_THAT(*purgeRefusal(autoInput(base, "nope")), HasSubstr("not found"));
  // Unreachable, but not for long enough.
  auto young = base;
  young[4] = rec("w-2", false, "new-unreachable");
  EXPECT_THAT(*purgeRefusal(autoInput(young, "w-2")), HasSubstr("not dead"));
  // Only one ready master left besides: below min_ready_master_nodes 2.
  auto one_master = base;
  one_master[1] = rec("cp-2", true, "notready");
  EXPECT_THAT(*purgeRefusal(autoInput(one_master, "cp-3")),
              HasSubstr("only 1 ready masters, min_ready_master_nodes is 2"));
  // EKCO's else-if: the worker minimum guards a dead master too.
  auto in = autoInput(base, "cp-3");
  in.min_ready_worker_nodes = 2;
  EXPECT_THAT(*purgeRefusal(in), HasSubstr("only 1 ready workers"));
  // Storm: 3 of 5 unreachable (60 % > 55 %).
  auto storm = base;
  storm[3] = rec("w-1", false, "dead");
  EXPECT_THAT(*purgeRefusal(autoInput(storm, "w-2")), HasSubstr("storm guard"));
}

TEST(PurgeGuards, ManualRefusesAReadyTargetAtTheMinimum) {
  const auto nodes =
      std::vector<kube::NodeRecord>{rec("cp-1", true, "ready"), rec("cp-2", true, "ready"),
                                    rec("cp-3", true, "dead"), rec("w-1", false, "ready")};
  PurgeGuardInput in{
      .nodes = nodes, .target = "cp-2", .automatic = false, .min_ready_master_nodes = 2};
  EXPECT_EQ(purgeRefusal(in).value_or(""), "cannot purge master: 2 ready masters");
  in.target = "cp-3";  // not ready: allowed
  EXPECT_EQ(purgeRefusal(in), std::nullopt);
  in.target = "w-1";
  EXPECT_EQ(purgeRefusal(in), std::nullopt);  // 1 ready worker > min_ready_worker_nodes 0
  in.min_ready_worker_nodes = 1;
  EXPECT_EQ(purgeRefusal(in).value_or(""), "cannot purge worker: 1 ready workers");
  in.target = "gone";  // absent: nothing to count
  EXPECT_EQ(purgeRefusal(in), std::nullopt);
}

TEST(PurgeGuards, RandomizedStatesNeverPurgeUnsafely) {
  std::mt19937 rng(20261122);
  const char* states[] = {"ready", "dead", "new-unreachable", "notready"};
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::vector<kube::NodeRecord> nodes;
    const int count = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < count; ++i) {
      nodes.push_back(rec("n-" + std::to_string(i), rng() % 2 == 0, states[rng() % 4]));
    }
    auto in = autoInput(nodes, "n-" + std::to_string(rng() % count));
    in.self = "n-" + std::to_string(rng() % count);
    in.min_ready_master_nodes = static_cast<std::int64_t>(rng() % 3);
    in.min_ready_worker_nodes = static_cast<std::int64_t>(rng() % 2);
    if (purgeRefusal(in)) continue;
    const kube::NodeRecord* target = nullptr;
    for (const auto& n : nodes) {
      if (n.name.str() == in.target) target = &n;
    }
    ASSERT_NE(target, nullptr);
    EXPECT_NE(in.target, in.self);
    EXPECT_TRUE(isDead(*target, kNow, minutes(5))) << iteration;
    EXPECT_FALSE(assessStorm(nodes, 55).active) << iteration;
    std::int64_t masters = 0;
    std::int64_t workers = 0;
    for (const auto& n : nodes) {
      if (isReady(n)) (n.control_plane ? masters : workers) += 1;
    }
    if (target->control_plane) {
      EXPECT_GE(masters, in.min_ready_master_nodes) << iteration;
    }
    EXPECT_GE(workers, in.min_ready_worker_nodes) << iteration;
  }
}

// --- the steps

class ScriptedEtcd : public etcd::EtcdClient {
 public:
  struct State {
    std::vector<etcd::Member> members;
    std::set<std::uint64_t> healthy;
    std::vector<std::uint64_t> removed;
    etcd::ClientOptions options;
  };
  explicit ScriptedEtcd(State& s) : s_(s) {}
  base::Result<std::vector<etcd::Member>> listMembers() override { return s_.members; }
  base::Status removeMember(std::uint64_t id) override {
    auto it = std::find_if(s_.members.begin(), s_.members.end(),
                           [&](const etcd::Member& m) { return m.id == id; });
    if (it == s_.members.end())
      return base::Error("etcdserver: member not found", base::ErrorCode::kNotFound);
    s_.members.erase(it);
    s_.removed.push_back(id);
    return base::ok();
  }
  base::Result<bool> memberHealthy(const etcd::Member& m) override {
    return s_.healthy.count(m.id) != 0;
  }

 private:
  State& s_;
};

json nodeObject(const std::string& name, const std::string& ip, bool dead) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata",
             {{"name", name},
              {"labels",
               {{"kubernetes.io/hostname", name}, {"node-role.kubernetes.io/control-plane", ""}}}}},
            {"spec", json::object()},
            {"status",
             {{"conditions", {{{"type", "Ready"}, {"status", dead ? "Unknown" : "True"}}}},
              {"addresses", {{{"type", "InternalIP"}, {"address", ip}}}}}}};
  return n;
}

constexpr const char* kClusterStatus = R"(apiEndpoints:
  cp-1: {advertiseAddress: 10.0.0.1, bindPort: 6443}
  cp-2: {advertiseAddress: 10.0.0.2, bindPort: 6443}
  cp-3: {advertiseAddress: 10.0.0.3, bindPort: 6443}
apiVersion: kubeadm.k8s.io/v1beta2
kind: ClusterStatus
)";

class PurgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = kubesim::Server::start(
        {.out_dir = dir_.path() + "/sim",
         .objects = {nodeObject("cp-1", "10.0.0.1", false),
                     nodeObject("cp-2", "10.0.0.2", false),
                     nodeObject("cp-3", "10.0.0.3", true),
                     {{"apiVersion", "v1"},
                      {"kind", "ConfigMap"},
                      {"metadata", {{"name", "kubeadm-config"}, {"namespace", "kube-system"}}},
                      {"data", {{"ClusterStatus", kClusterStatus}}}}}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    kube::Connection conn{.server = server_->url(),
                          .ca_pem = server_->caPem(),
                          .client_cert_pem = server_->clientCertPem(),
                          .client_key_pem = server_->clientKeyPem()};
    auto transport = kube::CurlTransport::create(conn, nullptr, clock_, {});
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(*transport_, clock_, kube::RestClientOptions{});
    exec_ = std::make_unique<kube::WebSocketExecutor>(conn);
    const std::string pki = dir_.path() + "/root/etc/kubernetes/pki/etcd";
    std::filesystem::create_directories(pki);
    for (const char* f : {"ca.crt", "healthcheck-client.crt"}) {
      std::ofstream(pki + "/" + f)
          << "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
    }
    std::ofstream(pki + "/healthcheck-client.key")
        << "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n";
    auto fs = hostfs::LocalHostFs::open(dir_.path() + "/root", clock_);
    ASSERT_TRUE(fs);
    fs_ = std::move(*fs);
    for (int i = 1; i <= 3; ++i) {
      etcd_.members.push_back({.id = 1000u + static_cast<unsigned>(i),
                               .name = "cp-" + std::to_string(i),
                               .peer_urls = {"https://10.0.0." + std::to_string(i) + ":2380"},
                               .client_urls = {"https://10.0.0." + std::to_string(i) + ":2379"}});
    }
    etcd_.healthy = {1001, 1002};
  }
  PurgeDeps deps() {
    return {.client = *client_,
            .exec = *exec_,
            .fs = *fs_,
            .clock = clock_,
            .etcd_factory = [this](etcd::ClientOptions o) -> std::unique_ptr<etcd::EtcdClient> {
              etcd_.options = std::move(o);
              return std::make_unique<ScriptedEtcd>(etcd_);
            }};
  }
  std::string clusterStatus() {
    return (*server_->get("configmaps", "kube-system", "kubeadm-config"))["data"].value(
        "ClusterStatus", "");
  }

  testing::TempDir dir_{"ekco-purge"};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;
  std::unique_ptr<kube::WebSocketExecutor> exec_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  ScriptedEtcd::State etcd_;
};

TEST_F(PurgeTest, ADeadControlPlaneNodeIsPurgedInOrder) {
  std::vector<std::string> events;
  auto r = purgeNode(deps(), "cp-3", {.event = [&](const std::string& reason, const std::string&) {
                       events.push_back(reason);
                     }});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->node_deleted);
  EXPECT_FALSE(server_->get("nodes", "", "cp-3"));
  EXPECT_THAT(clusterStatus(), Not(HasSubstr("cp-3")));
  EXPECT_EQ(etcd_.removed, std::vector<std::uint64_t>{1003});
  // etcd is reached through the other members, with the host's healthcheck certificate.
  EXPECT_EQ(etcd_.options.endpoints,
            (std::vector<std::string>{"https://10.0.0.1:2379", "https://10.0.0.2:2379"}));
  EXPECT_THAT(etcd_.options.cert_pem, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_EQ(events, (std::vector<std::string>{"PurgeKubeadm", "PurgeEtcdMember"}));
  // Run again (a new leader resuming after the Node went): nothing left, nothing repeated.
  auto again = purgeNode(deps(), "cp-3", {});
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(etcd_.removed.size(), 1U);
}

TEST_F(PurgeTest, AHealthyMemberIsNeverRemovedAutomatically) {
  etcd_.healthy = {1001, 1002, 1003};
  auto r = purgeNode(deps(), "cp-3", {});
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("etcd member of cp-3 not removed"));
  EXPECT_TRUE(etcd_.removed.empty());
  // Refused before anything was touched: kubeadm-config and the Node as they were.
  EXPECT_EQ(clusterStatus(), kClusterStatus);
  auto node = server_->get("nodes", "", "cp-3");
  ASSERT_TRUE(node);
  EXPECT_FALSE((*node)["metadata"].contains("annotations"));
  // `ekco purge-node` may remove a live member while quorum holds.
  auto manual = purgeNode(deps(), "cp-3", {.allow_healthy_etcd_member = true});
  ASSERT_TRUE(manual) << manual.error().message();
  EXPECT_EQ(etcd_.removed, std::vector<std::uint64_t>{1003});
}

TEST_F(PurgeTest, QuorumLossIsRefusedEvenByHand) {
  etcd_.healthy = {1003};  // only the target answers: removing it leaves 2 members, 0 healthy
  auto r = purgeNode(deps(), "cp-3", {.allow_healthy_etcd_member = true});
  ASSERT_FALSE(r);
  EXPECT_TRUE(etcd_.removed.empty());
  EXPECT_TRUE(server_->get("nodes", "", "cp-3"));
}

TEST_F(PurgeTest, DryRunChangesNothingAndShowsThePlan) {
  auto r = purgeNode(deps(), "cp-3", {.dry_run = true});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(server_->get("nodes", "", "cp-3"));
  EXPECT_EQ(clusterStatus(), kClusterStatus);
  EXPECT_TRUE(etcd_.removed.empty());
  std::string plan;
  for (const auto& a : r->actions) plan += a + "\n";
  EXPECT_THAT(plan, HasSubstr("would remove cp-3 (10.0.0.3) from kube-system/kubeadm-config"));
  EXPECT_THAT(plan, HasSubstr("would remove etcd member"));
  EXPECT_THAT(plan, HasSubstr("through https://10.0.0.1:2379, https://10.0.0.2:2379"));
  EXPECT_THAT(plan, HasSubstr("would delete node cp-3"));
  EXPECT_FALSE((*server_->get("nodes", "", "cp-3"))["metadata"].contains("annotations"));
}

TEST_F(PurgeTest, LosingTheLeaseStopsBeforeTheNextStep) {
  int checks = 0;
  auto r = purgeNode(deps(), "cp-3", {.may_continue = [&] { return ++checks < 2; }});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kCancelled);
  EXPECT_TRUE(etcd_.removed.empty());
  EXPECT_TRUE(server_->get("nodes", "", "cp-3"));
}

}  // namespace
}  // namespace ekco::agent
