// The etcd client against a real 3-member etcd 3.4 cluster with mutual TLS on loopback: members
// node-a/b/c on 127.0.0.11-13 (peer https://127.0.0.1x:2380, client https://127.0.0.1x:2379),
// certificates made with the openssl CLI and read back through HostFs from a temp host root
// (tests/fakes/etcd_cluster.h). The leader is the member killed: the worst case for the others'
// health.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "base/clock.h"
#include "etcd/client.h"
#include "etcd/removal.h"
#include "hostfs/local_host_fs.h"
#include "tests/fakes/etcd_cluster.h"

namespace ekco::etcd {
namespace {

namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;
using fakes::EtcdCluster;

const char* const kNames[3] = {"node-a", "node-b", "node-c"};

double secondsSince(Steady::time_point start) { return EtcdCluster::secondsSince(start); }

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = cluster_.start();
    ASSERT_TRUE(started) << started.error().message();
    options_ = cluster_.clientOptions();
    client_ = makeEtcdClient(options_);
  }

  void TearDown() override { cluster_.stop(); }

  std::string logs() const { return cluster_.logs(); }
  std::string etcdctlMemberList(const std::string& endpoint) {
    auto listed = cluster_.memberList(endpoint);
    EXPECT_TRUE(listed) << listed.error().message();
    return listed ? *listed : "";
  }
  int leaderIndex() { return cluster_.leaderIndex(); }

  std::map<std::uint64_t, bool> healthOf(const std::vector<Member>& members) {
    std::map<std::uint64_t, bool> health;
    for (const auto& m : members) {
      auto h = client_->memberHealthy(m);
      EXPECT_TRUE(h) << h.error().message();
      health[m.id] = h && *h;
    }
    return health;
  }

  EtcdCluster cluster_;
  ClientOptions options_;
  std::unique_ptr<EtcdClient> client_;
};

TEST_F(EtcdClusterTest, RemovesTheDeadMemberAndNeverALiveOne) {
  // 1. Three members, named after their nodes, with their URLs.
  auto members = client_->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  ASSERT_EQ(members->size(), 3u);
  std::map<std::string, Member> by_name;
  for (const auto& m : *members) by_name[m.name] = m;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(by_name.count(kNames[i])) << kNames[i];
    const Member& m = by_name[kNames[i]];
    EXPECT_EQ(m.peer_urls,
              std::vector<std::string>{"https://" + std::string(fakes::kEtcdIps[i]) + ":2380"});
    EXPECT_EQ(m.client_urls,
              std::vector<std::string>{"https://" + std::string(fakes::kEtcdIps[i]) + ":2379"});
    EXPECT_FALSE(m.learner);
    EXPECT_NE(m.id, 0u);
    // etcdctl prints the same ID in hex.
    EXPECT_NE(etcdctlMemberList(options_.endpoints[0])
                  .find(formatMemberId(m.id) + ", started, " + kNames[i]),
              std::string::npos);
  }
  auto health = healthOf(*members);
  for (const auto& [id, ok] : health) EXPECT_TRUE(ok) << formatMemberId(id);

  // 2. A live member is never removed.
  auto plan = planMemberRemoval(*members, "127.0.0.11", health);
  ASSERT_TRUE(plan.member);
  EXPECT_EQ(plan.member->name, "node-a");
  EXPECT_FALSE(plan.safe);
  EXPECT_NE(plan.reason.find("is healthy: a live member is never removed"), std::string::npos)
      << plan.reason;

  // 3. The leader dies (SIGKILL): the worst case, since the others must elect a new one.
  const int v = leaderIndex();
  ASSERT_GE(v, 0) << "no leader found";
  const int live = (v + 1) % 3;
  const int other = (v + 2) % 3;
  const std::string dead_ip = fakes::kEtcdIps[v];
  const Member dead = by_name[kNames[v]];
  std::cout << "[leader] " << describeMember(dead) << " at " << dead_ip << " is killed\n";
  cluster_.kill(v);
  auto t = Steady::now();
  auto dead_health = client_->memberHealthy(dead);
  ASSERT_TRUE(dead_health);
  EXPECT_FALSE(*dead_health);
  std::cout << "[timing] health probe of the killed member: " << secondsSince(t) << " s\n";

  // Until they have elected a new leader the others answer /health with false (etcd's /health
  // needs a leader and a quorum read), so the plan refuses: too few healthy members would
  // remain. Then it is safe.
  t = Steady::now();
  int refusals = 0;
  while (true) {
    members = client_->listMembers();
    ASSERT_TRUE(members) << members.error().message();
    health = healthOf(*members);
    plan = planMemberRemoval(*members, dead_ip, health);
    if (plan.safe || secondsSince(t) > 30) break;
    EXPECT_NE(plan.reason.find("fewer than their quorum"), std::string::npos) << plan.reason;
    ++refusals;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::cout << "[timing] plan safe " << secondsSince(t) << " s after the kill (" << refusals
            << " refused before)\n";
  ASSERT_TRUE(plan.member) << plan.reason;
  EXPECT_EQ(plan.member->id, dead.id);
  EXPECT_TRUE(plan.safe) << plan.reason;
  EXPECT_EQ(plan.voting_members, 2);
  EXPECT_EQ(plan.healthy_remaining, 2);
  std::cout << "[plan] " << plan.reason << "\n";

  // 4. Remove it. etcd's strict reconfiguration check may still say "unhealthy cluster" for a
  // moment (it wants the remaining members connected for 5 s): that is kUnavailable; retry.
  t = Steady::now();
  base::Status removed = client_->removeMember(dead.id);
  int attempts = 1;
  while (!removed && removed.error().code() == base::ErrorCode::kUnavailable &&
         secondsSince(t) < 30) {
    std::cout << "[retry] " << removed.error().message() << "\n";
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    removed = client_->removeMember(dead.id);
    ++attempts;
  }
  ASSERT_TRUE(removed) << removed.error().message() << "\n" << logs();
  std::cout << "[timing] removal: " << secondsSince(t) << " s, " << attempts << " attempt(s)\n";

  const std::string listed =
      etcdctlMemberList(std::string("https://") + fakes::kEtcdIps[live] + ":2379");
  EXPECT_NE(listed.find(kNames[live]), std::string::npos) << listed;
  EXPECT_NE(listed.find(kNames[other]), std::string::npos) << listed;
  EXPECT_EQ(listed.find(kNames[v]), std::string::npos) << listed;
  EXPECT_EQ(std::count(listed.begin(), listed.end(), '\n'), 2) << listed;
  members = client_->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  EXPECT_EQ(members->size(), 2u);

  // 5. Removing it again: kNotFound (the purge treats that as done).
  removed = client_->removeMember(dead.id);
  ASSERT_FALSE(removed);
  EXPECT_EQ(removed.error().code(), base::ErrorCode::kNotFound) << removed.error().message();
  EXPECT_EQ(removed.error().message().rfind("remove etcd member " + formatMemberId(dead.id) +
                                                ": etcdserver: member not found (HTTP 404",
                                            0),
            0u)
      << removed.error().message();

  // 6. The dead node has no member now; a live member is still refused.
  health = healthOf(*members);
  plan = planMemberRemoval(*members, dead_ip, health);
  EXPECT_FALSE(plan.member);
  EXPECT_FALSE(plan.safe);
  plan = planMemberRemoval(*members, fakes::kEtcdIps[live], health);
  ASSERT_TRUE(plan.member);
  EXPECT_FALSE(plan.safe) << plan.reason;

  // 7. A client whose first endpoint is the dead one falls over to the next.
  ClientOptions options = options_;
  options.endpoints = {"https://" + dead_ip + ":2379",
                       std::string("https://") + fakes::kEtcdIps[other] + ":2379"};
  auto fallback = makeEtcdClient(options);
  t = Steady::now();
  members = fallback->listMembers();
  ASSERT_TRUE(members) << members.error().message();
  EXPECT_EQ(members->size(), 2u);
  std::cout << "[timing] list with a dead first endpoint: " << secondsSince(t) << " s\n";

  // Only dead endpoints: a kUnavailable error naming both.
  options.endpoints = {"https://" + dead_ip + ":2379", "https://127.0.0.14:2379"};
  auto nowhere = makeEtcdClient(options)->listMembers();
  ASSERT_FALSE(nowhere);
  EXPECT_EQ(nowhere.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_NE(nowhere.error().message().find("https://127.0.0.14:2379"), std::string::npos)
      << nowhere.error().message();
}

TEST_F(EtcdClusterTest, TlsIsMutual) {
  Member a;
  a.name = "node-a";
  a.client_urls = {"https://127.0.0.11:2379"};
  // Without the client certificate the member refuses us: not healthy, and lists fail.
  ClientOptions no_cert = options_;
  no_cert.cert_pem.clear();
  no_cert.key_pem.clear();
  no_cert.timeout = std::chrono::seconds(3);
  no_cert.health_timeout = std::chrono::seconds(2);
  auto anonymous = makeEtcdClient(no_cert);
  EXPECT_FALSE(*anonymous->memberHealthy(a));
  auto r = anonymous->listMembers();
  ASSERT_FALSE(r);
  std::cout << "[no client cert] " << r.error().message() << "\n";
  // A CA that did not sign the server certificate: refused in the handshake.
  ClientOptions wrong_ca = options_;
  wrong_ca.ca_pem = EtcdCluster::readFile(cluster_.pki() + "/healthcheck-client.crt");
  wrong_ca.timeout = std::chrono::seconds(3);
  r = makeEtcdClient(wrong_ca)->listMembers();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kUnavailable) << r.error().message();
  EXPECT_FALSE(*makeEtcdClient(wrong_ca)->memberHealthy(a));
}

TEST(EtcdCertificatesTest, ErrorsNameTheFile) {
  std::string tmpl = (fs::temp_directory_path() / "ekco-etcd-certs.XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl;
  fs::create_directories(dir + "/etc/pki/etcd");
  base::SystemClock clock;
  auto host = hostfs::LocalHostFs::open(dir, clock);
  ASSERT_TRUE(host) << host.error().message();
  auto r = loadClientCertificates(**host, "/etc/pki/");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kNotFound);
  EXPECT_NE(r.error().message().find("/etc/pki/etcd/ca.crt"), std::string::npos)
      << r.error().message();
  std::ofstream(dir + "/etc/pki/etcd/ca.crt") << "-----BEGIN CERTIFICATE-----\nx\n";
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.crt") << "not pem";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kParse);
  EXPECT_EQ(r.error().message(),
            "etcd client certificates: /etc/pki/etcd/healthcheck-client.crt: no PEM block");
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.crt") << "-----BEGIN CERTIFICATE-----\n";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("/etc/pki/etcd/healthcheck-client.key"), std::string::npos)
      << r.error().message();
  std::ofstream(dir + "/etc/pki/etcd/healthcheck-client.key") << "-----BEGIN PRIVATE KEY-----\n";
  r = loadClientCertificates(**host, "/etc/pki");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->endpoints.empty());
  EXPECT_EQ(r->ca_pem, "-----BEGIN CERTIFICATE-----\nx\n");
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ekco::etcd
