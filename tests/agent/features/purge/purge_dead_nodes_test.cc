// The leader's automatic purge: who is purged, when it wakes, what holds a node back; the purge
// itself is a recording fake here (agent/purge.h has its own tests).
#include "agent/features/purge/purge_dead_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "base/clock.h"

namespace ekco::agent {
namespace {

using kube::Atom;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));

kube::NodeRecord node(const std::string& name, bool master,
                      std::optional<base::WallTime> unreachable_since) {
  kube::NodeRecord n;
  n.name = Atom(name);
  n.control_plane = master;
  if (unreachable_since) {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("Unknown")}};
    n.taints = {{.key = Atom(kTaintUnreachable),
                 .effect = Atom("NoExecute"),
                 .time_added = unreachable_since}};
  } else {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("True")}};
  }
  return n;
}

// nodes_ is the API's truth; cache_, when set, is what the (possibly stale) informer shows.
class PurgeDeadNodesTest : public ::testing::Test {
 protected:
  PurgeDeadNodesController make(PurgeDeadNodesOptions options = {}) {
    if (options.self.empty()) options.self = "cp-1";
    return PurgeDeadNodesController(
        [this] { return ObservedNodes{.synced = true, .nodes = cache_ ? *cache_ : nodes_}; },
        [this]() -> base::Result<std::vector<kube::NodeRecord>> {
          ++api_reads_;
          if (api_down_)
            return base::Error("list nodes: connection refused", base::ErrorCode::kUnavailable);
          return nodes_;
        },
        [this](const std::string& name, const PurgeOptions& purge) -> base::Result<PurgeReport> {
          // Two steps, each behind the purge's own checkpoint, as purgeNode does.
          for (int step = 0; step < 2; ++step) {
            if (before_step_) before_step_(step);
            if (purge.recheck) {
              if (auto why = purge.recheck()) {
                return base::Error("purge of " + name + " stopped: " + *why,
                                   base::ErrorCode::kCancelled);
              }
            }
          }
          purged_.push_back(name + (purge.dry_run ? " (dry run)" : ""));
          if (fail_)
            return base::Error("etcd member of " + name + " not removed",
                               base::ErrorCode::kUnavailable);
          if (!purge.dry_run) {
            std::erase_if(nodes_, [&](const kube::NodeRecord& n) { return n.name.str() == name; });
          }
          return PurgeReport{
              .actions = {"deleted node " + name}, .warnings = {}, .node_deleted = true};
        },
        clock_, std::move(options));
  }

  base::ManualClock clock_{kT0};
  std::vector<kube::NodeRecord> nodes_ = {
      node("cp-1", true, std::nullopt), node("cp-2", true, std::nullopt),
      node("cp-3", true, std::nullopt), node("w-1", false, std::nullopt),
      node("w-2", false, std::nullopt)};
  std::optional<std::vector<kube::NodeRecord>> cache_;
  std::function<void(int step)> before_step_;
  std::vector<std::string> purged_;
  bool fail_ = false;
  bool api_down_ = false;
  int api_reads_ = 0;
};

TEST_F(PurgeDeadNodesTest, WakesWhenANodeTurnsDeadAndPurgesItThen) {
  nodes_[4] = node("w-2", false, kT0 - minutes(4));  // dead in 1 minute
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(purged_.empty());
  EXPECT_EQ(r->requeue_after, milliseconds(minutes(1)));
  clock_.advance(minutes(1));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(purged_, ElementsAre("w-2"));
  EXPECT_EQ(r->summary, "purged w-2");
  EXPECT_EQ(r->requeue_after, milliseconds(1000));  // look for the next shortly, not at once
  r = c.reconcile();
  EXPECT_EQ(r->summary, "no dead node to purge");
  EXPECT_EQ(c.status()["history"][0]["node"], "w-2");
}

TEST_F(PurgeDeadNodesTest, GuardsHoldNodesBackAndSayWhy) {
  nodes_[2] = node("cp-3", true, kT0 - minutes(10));
  nodes_[1] = node("cp-2", true, kT0 - seconds(1));  // unreachable, not dead: one ready master
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(c.status()["held"]["cp-3"].get<std::string>(),
              HasSubstr("only 1 ready masters, min_ready_master_nodes is 2"));
  // The leader's own node is never purged.
  nodes_ = {node("cp-1", true, kT0 - minutes(10)), node("cp-2", true, std::nullopt),
            node("cp-3", true, std::nullopt), node("w-1", false, std::nullopt)};
  r = c.reconcile();
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(c.status()["held"]["cp-1"].get<std::string>(), HasSubstr("runs on"));
  // A storm: 3 of 5 unreachable.
  nodes_ = {node("cp-1", true, std::nullopt), node("cp-2", true, std::nullopt),
            node("w-1", false, kT0 - minutes(10)), node("w-2", false, kT0 - minutes(10)),
            node("w-3", false, kT0 - minutes(10))};
  r = c.reconcile();
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(c.status()["held"]["w-1"].get<std::string>(), HasSubstr("storm guard"));
}

TEST_F(PurgeDeadNodesTest, AStaleCacheNeverPurgesANodeTheApiSaysIsReadyAndDoesNotSpin) {
  // Defect: with watches silently stalled, the cache still showed w-2 dead after it had become
  // Ready again; the second look read the same cache and purged it, then the controller
  // requeued at once (~1,100 passes in 8 s).
  cache_ = nodes_;
  (*cache_)[4] = node("w-2", false, kT0 - minutes(10));
  auto c = make();
  for (int i = 0; i < 50; ++i) {
    auto r = c.reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->summary,
                HasSubstr("not purging w-2: on a fresh read from the API: node w-2 is not dead"));
    ASSERT_TRUE(r->requeue_after);
    EXPECT_EQ(*r->requeue_after, PurgeDeadNodesController::kRecheckAfter);
  }
  EXPECT_TRUE(purged_.empty());
  EXPECT_EQ(api_reads_, 50);  // one read per pass, no more
  EXPECT_THAT(c.status()["held"]["w-2"].get<std::string>(), HasSubstr("fresh read"));
}

TEST_F(PurgeDeadNodesTest, TheApiIsReadAgainBeforeEveryStepAndANodeThatComesBackStopsThePurge) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  before_step_ = [this](int step) {
    if (step == 1) nodes_[4] = node("w-2", false, std::nullopt);  // its kubelet is back
  };
  auto c = make();
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), base::ErrorCode::kCancelled);
  EXPECT_THAT(r.error().message(), HasSubstr("node w-2 is not dead"));
  EXPECT_TRUE(purged_.empty());
  EXPECT_EQ(api_reads_, 3);  // before acting, then before each of the two steps
}

TEST_F(PurgeDeadNodesTest, AnUnreadableApiPurgesNothing) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  api_down_ = true;
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(r->summary,
              HasSubstr("cannot read the nodes from the API: list nodes: connection refused"));
  EXPECT_EQ(r->requeue_after, milliseconds(PurgeDeadNodesController::kRecheckAfter));
}

TEST_F(PurgeDeadNodesTest, ANodeJustPurgedThatTheCacheStillShowsIsNotPurgedTwice) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  cache_ = nodes_;  // the cache will not see the delete
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(purged_, ElementsAre("w-2"));
  r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(r->summary, HasSubstr("node w-2 not found"));
  EXPECT_THAT(purged_, ElementsAre("w-2"));
}

TEST_F(PurgeDeadNodesTest, TheFreshReadCanStopThePurge) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  cache_ = nodes_;
  nodes_ = {node("cp-1", true, std::nullopt), node("w-2", false, std::nullopt)};
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(r->summary,
              HasSubstr("not purging w-2: on a fresh read from the API: node w-2 is not dead"));
}

TEST_F(PurgeDeadNodesTest, ANodeIsHeldWhileClearNodesStillHasPodsDueOnIt) {
  // Order with clear-nodes is data: the purge reads the same pods and waits until the pods
  // stuck on the node are gone (or no longer due), then purges.
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  std::vector<kube::PodRecord> pods = {{.ns = Atom("default"),
                                        .node_name = Atom("w-2"),
                                        .phase = Atom("Running"),
                                        .name = "stuck",
                                        .uid = "u1",
                                        .deletion_timestamp = kT0 - minutes(5),
                                        .deletion_grace_period_seconds = 30}};
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = seconds(30),
                         .storm_guard_percent = 55};
  auto c = make({.clear_first = rules, .observe_pods = [&] { return pods; }});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(purged_.empty());
  EXPECT_EQ(c.status()["held"]["w-2"],
            "waiting for clear-nodes to force-delete 1 pod(s) stuck on it first");
  EXPECT_EQ(api_reads_, 0);  // nothing chosen: no API read either
  pods.clear();              // clear-nodes force-deleted it
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(purged_, ElementsAre("w-2"));
}

// Found by the kill -9 suite (tests/agent/features/purge/purge_kill_test.cc): a leader killed after
// its first force delete was succeeded by one whose per-node pod cache had not listed yet, so it
// saw "no pods due" and purged, leaving the other stuck pods behind. Until the pods on a node are
// listed, the node is held and looked at again soon.
TEST_F(PurgeDeadNodesTest, ANodeIsHeldUntilThePodsOnItHaveBeenListed) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = seconds(30),
                         .storm_guard_percent = 55};
  bool listed = false;
  auto c = make({.clear_first = rules,
                 .observe_pods = [] { return std::vector<kube::PodRecord>{}; },
                 .pods_listed_on = [&](const std::string& n) { return listed && n == "w-2"; }});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(purged_.empty());
  EXPECT_EQ(c.status()["held"]["w-2"],
            "waiting for the pods on it to be listed (clear-nodes goes first)");
  EXPECT_EQ(r->requeue_after, PurgeDeadNodesController::kListedRecheck);
  listed = true;
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(purged_, ElementsAre("w-2"));
}

TEST_F(PurgeDeadNodesTest, PodsStuckOnTheNodeAreReadFromTheApiNotOnlyFromTheCache) {
  // Found by the fault matrix: a node already dead when the leader first saw it (a new leader,
  // a node that appeared dead) was purged before its pod cache had listed, so the stuck pods were
  // never force-deleted (once the Node is gone clear-nodes no longer sees them).
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  std::vector<kube::PodRecord> api_pods = {{.ns = Atom("default"),
                                            .node_name = Atom("w-2"),
                                            .phase = Atom("Running"),
                                            .name = "stuck",
                                            .uid = "u1",
                                            .deletion_timestamp = kT0 - minutes(5),
                                            .deletion_grace_period_seconds = 30}};
  int pod_reads = 0;
  auto c =
      make({.clear_first = ClearRules{.node_unreachable_toleration = minutes(5),
                                      .pod_deletion_grace = seconds(30),
                                      .storm_guard_percent = 55},
            .observe_pods = [] { return std::vector<kube::PodRecord>{}; },  // not listed
            .read_pods = [&](const std::string& n) -> base::Result<std::vector<kube::PodRecord>> {
              ++pod_reads;
              EXPECT_EQ(n, "w-2");
              return api_pods;
            }});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(c.status()["held"]["w-2"].get<std::string>(),
              HasSubstr("waiting for clear-nodes to force-delete 1 pod(s) stuck on it first"));
  EXPECT_EQ(r->requeue_after, milliseconds(1000));  // clear-nodes acts at once: look again soon
  api_pods.clear();                                 // clear-nodes force-deleted it
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(purged_, ElementsAre("w-2"));
  EXPECT_EQ(pod_reads, 4);  // before choosing it, and before each of the purge's two steps
}

TEST_F(PurgeDeadNodesTest, DryRunPlansOnceAndAFailureIsReported) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  auto dry = make({.purge = {.dry_run = true}});
  auto r = dry.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->plan, "deleted node w-2\n");
  EXPECT_EQ(r->summary, "dry run: would purge w-2");
  r = dry.reconcile();
  EXPECT_THAT(purged_, ElementsAre("w-2 (dry run)"));
  fail_ = true;
  auto c = make();
  auto failed = c.reconcile();
  ASSERT_FALSE(failed);
  EXPECT_THAT(failed.error().message(), HasSubstr("purge w-2: etcd member of w-2 not removed"));
  EXPECT_THAT(c.status()["history"][0]["error"].get<std::string>(), HasSubstr("not removed"));
}

TEST_F(PurgeDeadNodesTest, NothingBeforeTheCacheListed) {
  auto c = PurgeDeadNodesController(
      [] { return ObservedNodes{}; },
      []() -> base::Result<std::vector<kube::NodeRecord>> {
        ADD_FAILURE() << "read the API without a cache";
        return std::vector<kube::NodeRecord>{};
      },
      [](const std::string&, const PurgeOptions&) -> base::Result<PurgeReport> {
        ADD_FAILURE() << "purged without a cache";
        return PurgeReport{};
      },
      clock_, {});
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->requeue_after, milliseconds(250));
}

}  // namespace
}  // namespace ekco::agent
