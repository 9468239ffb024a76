// agent/node_health.h over tables: unreachable since (taint vs condition fallback), dead at the
// threshold boundaries, readiness (EKCO's taints, cordon), and the storm guard's arithmetic.
#include "agent/policy/node_health.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "kube/decode/records.h"

namespace ekco::agent {
namespace {

using kube::Atom;
using std::chrono::minutes;
using std::chrono::seconds;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));

kube::TaintRecord taint(std::string_view key, std::string_view effect,
                        std::optional<base::WallTime> added = std::nullopt) {
  return {.key = Atom(key), .effect = Atom(effect), .time_added = added};
}

kube::ConditionRecord ready(std::string_view status,
                            std::optional<base::WallTime> since = std::nullopt) {
  return {.type = Atom("Ready"), .status = Atom(status), .last_transition_time = since};
}

kube::NodeRecord node(std::string name, std::vector<kube::ConditionRecord> conditions,
                      std::vector<kube::TaintRecord> taints = {}, bool cordoned = false) {
  return {.name = Atom(name),
          .unschedulable = cordoned,
          .taints = std::move(taints),
          .conditions = std::move(conditions)};
}

TEST(NodeHealth, UnreachableSinceIsTheTaintsTimeAddedElseTheUnknownReadyTransition) {
  struct Row {
    const char* what;
    kube::NodeRecord node;
    bool unreachable;
    std::optional<base::WallTime> since;
  };
  const std::vector<Row> rows = {
      {"taint with TimeAdded wins over the condition",
       node("a", {ready("Unknown", kT0 - seconds(40))},
            {taint(kTaintUnreachable, "NoExecute", kT0)}),
       true, kT0},
      {"the earliest of the two unreachable taints (NoSchedule has no TimeAdded)",
       node("a", {ready("Unknown", kT0)},
            {taint(kTaintUnreachable, "NoSchedule"),
             taint(kTaintUnreachable, "NoExecute", kT0 + seconds(5))}),
       true, kT0 + seconds(5)},
      {"taint without TimeAdded falls back to the Unknown Ready condition",
       node("a", {ready("Unknown", kT0 - seconds(7))}, {taint(kTaintUnreachable, "NoSchedule")}),
       true, kT0 - seconds(7)},
      {"no taint, Ready Unknown: the condition's lastTransitionTime",
       node("a", {ready("Unknown", kT0)}), true, kT0},
      {"Ready Unknown without a transition time: unreachable, since unknown",
       node("a", {ready("Unknown")}), true, std::nullopt},
      {"taint without TimeAdded and Ready False: unreachable, since unknown",
       node("a", {ready("False", kT0)}, {taint(kTaintUnreachable, "NoSchedule")}), true,
       std::nullopt},
      {"taint with TimeAdded and no Ready condition",
       node("a", {}, {taint(kTaintUnreachable, "NoExecute", kT0)}), true, kT0},
      {"Ready True: reachable even with a stale taint",
       node("a", {ready("True", kT0)}, {taint(kTaintUnreachable, "NoExecute", kT0)}), false,
       std::nullopt},
      {"Ready False (kubelet talks, says not ready): not unreachable",
       node("a", {ready("False", kT0)}, {taint(kTaintNotReady, "NoExecute", kT0)}), false,
       std::nullopt},
      {"healthy", node("a", {ready("True", kT0)}), false, std::nullopt},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(isUnreachable(r.node), r.unreachable) << r.what;
    EXPECT_EQ(unreachableSince(r.node), r.since) << r.what;
  }
}

TEST(NodeHealth, DeadExactlyFromTheToleration) {
  const auto tol = minutes(5);
  const kube::NodeRecord tainted = node("a", {ready("Unknown", kT0 - seconds(40))},
                                        {taint(kTaintUnreachable, "NoExecute", kT0)});
  EXPECT_FALSE(isDead(tainted, kT0, tol));
  EXPECT_FALSE(isDead(tainted, kT0 + tol - std::chrono::milliseconds(1), tol));
  EXPECT_TRUE(isDead(tainted, kT0 + tol, tol));  // the threshold moment counts
  EXPECT_TRUE(isDead(tainted, kT0 + tol + seconds(1), tol));
  EXPECT_EQ(deadAt(tainted, tol), kT0 + tol);

  // Condition fallback: measured from the Unknown transition.
  const kube::NodeRecord unknown = node("b", {ready("Unknown", kT0)});
  EXPECT_FALSE(isDead(unknown, kT0 + tol - std::chrono::nanoseconds(1000), tol));
  EXPECT_TRUE(isDead(unknown, kT0 + tol, tol));

  // Without a known start a node is never dead; a reachable one neither.
  EXPECT_FALSE(isDead(node("c", {ready("Unknown")}), kT0 + std::chrono::hours(100), tol));
  EXPECT_FALSE(isDead(node("d", {ready("True", kT0)}), kT0 + std::chrono::hours(100), tol));
  EXPECT_EQ(deadAt(node("d", {ready("True", kT0)}), tol), std::nullopt);

  // Zero toleration: dead as soon as unreachable.
  EXPECT_TRUE(isDead(tainted, kT0, base::Duration(0)));
}

TEST(NodeHealth, ReadyFollowsEkcosTaintsAndACordonedNodeIsNotReady) {
  struct Row {
    const char* what;
    kube::NodeRecord node;
    bool ready;
  };
  const std::vector<Row> rows = {
      {"healthy", node("a", {ready("True")}), true},
      {"not-ready taint", node("a", {ready("True")}, {taint(kTaintNotReady, "NoSchedule")}), false},
      {"unreachable taint", node("a", {ready("Unknown")}, {taint(kTaintUnreachable, "NoExecute")}),
       false},
      {"network-unavailable taint",
       node("a", {ready("True")}, {taint(kTaintNetworkUnavailable, "NoSchedule")}), false},
      {"unschedulable taint (cordoned, as EKCO saw it)",
       node("a", {ready("True")}, {taint(kTaintUnschedulable, "NoSchedule")}), false},
      {"cordoned before the taint follows", node("a", {ready("True")}, {}, true), false},
      {"an unrelated taint", node("a", {ready("True")}, {taint("dedicated", "NoSchedule")}), true},
      {"control-plane taint",
       node("a", {ready("True")}, {taint("node-role.kubernetes.io/control-plane", "NoSchedule")}),
       true},
      {"Ready False without taints yet", node("a", {ready("False")}), false},
      {"no Ready condition", node("a", {}), false},
  };
  for (const Row& r : rows) EXPECT_EQ(isReady(r.node), r.ready) << r.what;
}

std::vector<kube::NodeRecord> cluster(int total, int unreachable) {
  std::vector<kube::NodeRecord> out;
  for (int i = 0; i < total; ++i) {
    const std::string name = "node-" + std::to_string(i);
    out.push_back(i < unreachable ? node(name, {ready("Unknown", kT0)},
                                         {taint(kTaintUnreachable, "NoExecute", kT0)})
                                  : node(name, {ready("True", kT0)}));
  }
  return out;
}

TEST(NodeHealth, StormGuardWhenMoreThanThePercentIsUnreachable) {
  struct Row {
    int total;
    int unreachable;
    std::int64_t percent;
    bool active;
  };
  const std::vector<Row> rows = {
      {9, 5, 55, true},                         // 55.6 % > 55
      {9, 4, 55, false},                        // 44.4 %
      {20, 11, 55, false},                      // exactly 55 %: not more than
      {20, 12, 55, true},                       // 60 %
      {2, 1, 55, false},                        // one of two: clear it
      {3, 2, 55, true},                         // two of three
      {1, 1, 55, true},                         // the only node
      {3, 1, 55, false},   {0, 0, 55, false},   // no nodes
      {5, 0, 0, false},                         // 0 %: any unreachable node guards
      {5, 1, 0, true},     {5, 5, 100, false},  // 100 %: never
      {100, 56, 55, true}, {100, 55, 55, false},
  };
  for (const Row& r : rows) {
    const StormAssessment s = assessStorm(cluster(r.total, r.unreachable), r.percent);
    EXPECT_EQ(s.active, r.active) << r.unreachable << "/" << r.total << " at " << r.percent;
    EXPECT_EQ(s.unreachable, r.unreachable);
    EXPECT_EQ(s.total, r.total);
    EXPECT_EQ(s.reason.empty(), !r.active);
  }
  const StormAssessment s = assessStorm(cluster(9, 5), 55);
  EXPECT_EQ(s.reason, "5 of 9 nodes (55.6%) are unreachable, more than storm_guard_percent 55%");
  EXPECT_EQ(s.unreachable_nodes,
            (std::vector<std::string>{"node-0", "node-1", "node-2", "node-3", "node-4"}));
}

TEST(NodeHealth, AnUnreachableTaintAddedInYear9999IsNotYetNeverAlreadyDead) {
  // Defect: the taint's timeAdded overflowed int64 nanoseconds and read as 1816, so the node
  // was dead (and purged) at once. Through the projection, as the informer sees it.
  const auto object = nlohmann::json::parse(R"({
    "metadata": {"name": "w1", "resourceVersion": "7"},
    "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                         "timeAdded": "9999-12-31T23:59:59Z"}]},
    "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                               "lastTransitionTime": "9999-12-31T23:59:59Z"}]}})");
  auto record = kube::projectNode(object);
  ASSERT_TRUE(record) << record.error().message();
  EXPECT_TRUE(isUnreachable(*record));
  const base::WallTime now = base::WallTime(seconds(1'795'000'000));  // 2026-11
  EXPECT_FALSE(isDead(*record, now, minutes(5)));
  EXPECT_FALSE(isDead(*record, now, std::chrono::nanoseconds(0)));
  // The longest toleration Go can spell does not wrap around either.
  EXPECT_FALSE(isDead(*record, now, std::chrono::hours(2562047)));
  auto dead_at = deadAt(*record, std::chrono::hours(2562047));
  ASSERT_TRUE(dead_at);
  EXPECT_GE(*dead_at, *unreachableSince(*record));
}

TEST(NodeHealth, AnUnreachableTaintFromYear0001IsLongAgo) {
  const auto object = nlohmann::json::parse(R"({
    "metadata": {"name": "w1"},
    "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                         "timeAdded": "0001-01-01T00:00:00Z"}]},
    "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})");
  auto record = kube::projectNode(object);
  ASSERT_TRUE(record) << record.error().message();
  EXPECT_TRUE(isDead(*record, base::WallTime(seconds(1'795'000'000)), minutes(5)));
}

}  // namespace
}  // namespace ekco::agent
