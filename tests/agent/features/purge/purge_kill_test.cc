// kill -9 at random points of the automatic purge (issue 24, "extend kill -9 at random points to
// every multi-step action"): a real `ekco agent` leads, cp-3 dies (its etcd member SIGKILLed,
// the Node unreachable), and the agent is SIGKILLed once it has made the k-th change of the
// clear-then-purge sequence — a force delete, a ceph command, the CephCluster, an OSD
// Deployment, kubeadm-config, a Node annotation or delete — with k drawn at random (the seed is
// printed; EKCO_PURGE_KILL_SEED replays one, EKCO_PURGE_KILL_AT=k forces the point). A new agent
// takes over when the Lease expires and must finish with exactly the state of an uninterrupted
// purge: nothing else deleted, a live etcd member never removed, no OSD of a live host purged, each
// irreversible ceph step at most once more than needed (the one in flight at the kill).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <set>
#include <thread>

#include "tests/agent/features/purge/purge_e2e_fixture.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::kEkcoServiceAccount;
using testing::kStuck;
using ::testing::Not;
using testing::PurgeE2eTest;

// The changes the agents made (resource writes and execs; not the Lease nor Events, which are
// written all along).
std::vector<kubesim::RequestRecord> changes(const kubesim::Server& server) {
  static const std::set<std::string> kWrites = {"create", "update", "patch", "delete"};
  std::vector<kubesim::RequestRecord> out;
  for (auto& r : server.requestLog()) {
    if (r.user != kEkcoServiceAccount || !kWrites.contains(r.verb)) continue;
    if (r.resource == "leases" || r.resource == "events") continue;
    out.push_back(std::move(r));
  }
  return out;
}

std::uint32_t seedOf(int param) {
  if (const char* s = std::getenv("EKCO_PURGE_KILL_SEED"); s != nullptr && *s != '\0') {
    return static_cast<std::uint32_t>(std::strtoul(s, nullptr, 10));
  }
  return std::random_device{}() + static_cast<std::uint32_t>(param);
}

class PurgeKillTest : public PurgeE2eTest, public ::testing::WithParamInterface<int> {};

TEST_P(PurgeKillTest, ALeaderKilledAtARandomPointIsSucceededAndThePurgeEndsExactlyRight) {
  const std::uint32_t seed = seedOf(GetParam());
  std::mt19937 random(seed);
  // A clear-then-purge of cp-3 makes 17 changes: 3 force deletes, 5 ceph commands, the
  // CephCluster, 2 OSD Deployments, kubeadm-config, 4 step annotations, the Node (the etcd
  // member is removed between the last two, through etcd). The last point is after it all.
  std::size_t k = std::uniform_int_distribution<std::size_t>(1, 17)(random);
  if (const char* at = std::getenv("EKCO_PURGE_KILL_AT"); at != nullptr && *at != '\0') {
    k = std::strtoul(at, nullptr, 10);  // a sweep: every point in turn
  }
  std::cerr << "[kill] seed " << seed << ": SIGKILL after change " << k << "\n";

  ASSERT_NO_FATAL_FAILURE(startAgent());
  const std::size_t before = changes(*server_).size();
  killNodeCp3(/*kill_etcd=*/true);
  bool reached = false;
  for (const auto deadline = std::chrono::steady_clock::now() + seconds(90);
       !reached && std::chrono::steady_clock::now() < deadline;) {
    reached = changes(*server_).size() - before >= k || !server_->get("nodes", "", "cp-3");
    if (!reached) std::this_thread::sleep_for(milliseconds(1));
  }
  ::kill(-agents_[0], SIGKILL);
  ::waitpid(agents_[0], nullptr, 0);
  agents_[0] = -1;
  ASSERT_TRUE(reached) << agentLog();
  const auto at_kill = changes(*server_);
  std::cerr << "[kill] killed after " << at_kill.size() - before
            << " change(s); last: " << at_kill.back().verb << " " << at_kill.back().path << "\n";

  // A new agent (a new Lease identity) takes over once the Lease expires and finishes.
  ASSERT_NO_FATAL_FAILURE(startAgent());
  const bool finished_before = !server_->get("nodes", "", "cp-3").has_value();
  ASSERT_TRUE(testing::eventually([&] { return !server_->get("nodes", "", "cp-3"); }, seconds(90)))
      << "cp-3 was not purged; /status: " << status().dump() << "\n"
      << agentLog();
  if (!finished_before) {
    ASSERT_TRUE(testing::eventually(
        [&] {
          json s = status();
          return s.is_object() && !s["purge_dead_nodes"]["history"].empty();
        },
        seconds(10)));
  }

  // Exactly the end state of an uninterrupted purge.
  EXPECT_EQ(etcdMemberLines(), 2);
  const std::string listed = memberList(0);
  EXPECT_THAT(listed, Not(HasSubstr("cp-3")));
  EXPECT_THAT(listed, HasSubstr("cp-1"));
  EXPECT_THAT(listed, HasSubstr("cp-2"));
  EXPECT_THAT(clusterStatus(), Not(HasSubstr("cp-3")));
  EXPECT_THAT(clusterStatus(), HasSubstr("cp-1"));
  EXPECT_THAT(clusterStatus(), HasSubstr("cp-2"));
  // cp-3 removed, the others kept (the rook-ceph controller may also have appended the Ready
  // worker-1 meanwhile: maintain_rook_storage_nodes is on here).
  std::vector<std::string> storage = storageNodes();
  std::erase(storage, "worker-1");
  EXPECT_EQ(storage, (std::vector<std::string>{"cp-1", "cp-2"}));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-3"));
  EXPECT_FALSE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-12"));
  for (const auto& [ns, name] : kStuck) {
    EXPECT_FALSE(server_->get("pods", ns, name)) << name << "\n" << agentLog();
  }
  // Nothing else deleted: every other Node, the survivors' pods, the live host's OSD.
  for (const char* n : {"cp-1", "cp-2", "worker-1"}) {
    EXPECT_TRUE(server_->get("nodes", "", n)) << n;
  }
  EXPECT_TRUE(server_->get("pods", "kube-system", "kube-apiserver-cp-1"));
  EXPECT_TRUE(server_->get("pods", "kube-system", "kube-apiserver-cp-2"));
  EXPECT_TRUE(server_->get("deployments.apps", "rook-ceph", "rook-ceph-osd-0"));
  const std::set<std::string> deletable = {
      "/api/v1/nodes/cp-3",
      "/apis/apps/v1/namespaces/rook-ceph/deployments/rook-ceph-osd-3",
      "/apis/apps/v1/namespaces/rook-ceph/deployments/rook-ceph-osd-12",
      "/api/v1/namespaces/default/pods/web-7d9f-cp3",
      "/api/v1/namespaces/rook-ceph/pods/rook-ceph-osd-3-5c8d",
      "/api/v1/namespaces/kube-system/pods/kube-proxy-x3",
      "/api/v1/namespaces/kube-system/pods/kube-apiserver-cp-3"};
  for (const auto& r : changes(*server_)) {
    if (r.verb == "delete") {
      EXPECT_TRUE(deletable.contains(r.path)) << "deleted " << r.path;
    }
  }
  // Irreversible ceph steps: never for the live host's OSD; for cp-3's at least once and at
  // most once more (the step in flight when the leader died is done again).
  std::map<std::string, int> counts = execCounts();
  for (const auto& [cmd, n] : counts) std::cerr << "[exec] " << n << "x " << cmd << "\n";
  EXPECT_EQ(counts.count("ceph osd purge 0 --yes-i-really-mean-it"), 0u);
  for (const char* id : {"3", "12"}) {
    const std::string purge = std::string("ceph osd purge ") + id + " --yes-i-really-mean-it";
    EXPECT_GE(counts[purge], 1) << purge;
    EXPECT_LE(counts[purge], 2) << purge;
  }
  const auto reasons = eventReasons("cp-3");
  const auto removed = std::count(reasons.begin(), reasons.end(), "PurgeEtcdMember");
  EXPECT_GE(removed, 1);
  EXPECT_LE(removed, 2);
}

INSTANTIATE_TEST_SUITE_P(RandomPoints, PurgeKillTest, ::testing::Range(0, 3));

}  // namespace
}  // namespace ekco::agent
