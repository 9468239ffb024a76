// The leader's automatic purge: who is purged, when it wakes, what holds a node back; the purge
// itself is a recording fake here (agent/purge.h has its own tests).
#include "agent/purge_dead_nodes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

kube::NodeRecord node(const std::string& name, bool master, std::optional<base::WallTime> unreachable_since) {
  kube::NodeRecord n;
  n.name = Atom(name);
  n.control_plane = master;
  if (unreachable_since) {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("Unknown")}};
    n.taints = {{.key = Atom(kTaintUnreachable), .effect = Atom("NoExecute"), .time_added = unreachable_since}};
  } else {
    n.conditions = {{.type = Atom("Ready"), .status = Atom("True")}};
  }
  return n;
}

class PurgeDeadNodesTest : public ::testing::Test {
 protected:
  PurgeDeadNodesController make(PurgeDeadNodesOptions options = {}) {
    if (options.self.empty()) options.self = "cp-1";
    return PurgeDeadNodesController(
        [this] {
          ++observes_;
          if (second_look_ && observes_ % 2 == 0) return *second_look_;
          return ObservedNodes{.synced = true, .nodes = nodes_};
        },
        [this](const std::string& name, const PurgeOptions& purge) -> base::Result<PurgeReport> {
          purged_.push_back(name + (purge.dry_run ? " (dry run)" : ""));
          if (fail_) return base::Error("etcd member of " + name + " not removed", base::ErrorCode::kUnavailable);
          if (!purge.dry_run) {
            std::erase_if(nodes_, [&](const kube::NodeRecord& n) { return n.name.str() == name; });
          }
          return PurgeReport{.actions = {"deleted node " + name}, .warnings = {}, .node_deleted = true};
        },
        clock_, std::move(options));
  }

  base::ManualClock clock_{kT0};
  std::vector<kube::NodeRecord> nodes_ = {node("cp-1", true, std::nullopt), node("cp-2", true, std::nullopt),
                                          node("cp-3", true, std::nullopt), node("w-1", false, std::nullopt),
                                          node("w-2", false, std::nullopt)};
  std::optional<ObservedNodes> second_look_;
  std::vector<std::string> purged_;
  bool fail_ = false;
  int observes_ = 0;
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
  EXPECT_EQ(r->requeue_after, milliseconds(0));  // look for the next at once
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

TEST_F(PurgeDeadNodesTest, TheSecondLookCanStopThePurge) {
  nodes_[4] = node("w-2", false, kT0 - minutes(10));
  second_look_ = ObservedNodes{.synced = true, .nodes = {node("cp-1", true, std::nullopt), node("w-2", false, std::nullopt)}};
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_TRUE(purged_.empty());
  EXPECT_THAT(r->summary, HasSubstr("not purging w-2: node w-2 is not dead"));
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
  auto c = PurgeDeadNodesController([] { return ObservedNodes{}; },
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
