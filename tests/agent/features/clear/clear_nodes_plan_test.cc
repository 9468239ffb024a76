// The clear-nodes decision (agent/policy/clear_plan.h) and its leader controller
// (agent/features/clear/clear_nodes.h):
//   - the pure plan over tables;
//   - randomized cluster states against the in-memory API: never a delete of a pod on a live
//     node, never during a storm, never early, never a missed one, always the exact wake-up.
// (clear_nodes_test.cc runs the controller against ekco-kubesim and a real `ekco agent`.)
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "agent/features/clear/clear_nodes.h"
#include "base/clock.h"
#include "base/log/log.h"
#include "kube/decode/objects.h"
#include "kube/decode/timestamp.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using kube::Atom;
using kube::testing::FakeKube;
using kube::testing::Verb;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));

// --- records for the pure tests -----------------------------------------------------------

kube::NodeRecord nodeRecord(const std::string& name, const std::string& ready,
                            std::optional<base::WallTime> taint_added = std::nullopt,
                            std::optional<base::WallTime> ready_since = std::nullopt) {
  kube::NodeRecord n{.name = Atom(name)};
  n.conditions.push_back(
      {.type = Atom("Ready"), .status = Atom(ready), .last_transition_time = ready_since});
  if (taint_added) {
    n.taints.push_back(
        {.key = Atom(kTaintUnreachable), .effect = Atom("NoExecute"), .time_added = taint_added});
  }
  return n;
}

kube::PodRecord podRecord(const std::string& name, const std::string& node,
                          std::optional<base::WallTime> deleted = std::nullopt,
                          std::optional<std::int64_t> grace = 30) {
  return {.ns = Atom("default"),
          .node_name = Atom(node),
          .phase = Atom("Running"),
          .name = name,
          .uid = "uid-" + name,
          .deletion_timestamp = deleted,
          .deletion_grace_period_seconds = deleted ? grace : std::nullopt};
}

std::vector<std::string> names(const std::vector<PodToClear>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.pod.name);
  return out;
}

TEST(ClearPlan, APodDeletedInYear9999IsNotYetDueAndNothingOverflows) {
  // Defect: deletionTimestamp 9999-12-31 overflowed into 1816 and the pod was force-deleted
  // ("terminating since 1816"). Parsed as the informer parses it.
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = std::chrono::hours(2562047),
                         .storm_guard_percent = 55};
  auto far = kube::parseRfc3339("9999-12-31T23:59:59Z");
  ASSERT_TRUE(far);
  const std::vector<kube::NodeRecord> nodes = {nodeRecord("a", "True"), nodeRecord("b", "True"),
                                               nodeRecord("dead", "Unknown", kT0, kT0)};
  const std::vector<kube::PodRecord> pods = {podRecord("future", "dead", *far),
                                             podRecord("normal", "dead", kT0 - minutes(10))};
  const ClearPlan p = planClear(nodes, pods, kT0 + std::chrono::hours(24), rules);
  EXPECT_TRUE(names(p.due).empty());
  // Both saturate at the end of time, so they tie and sort by name.
  EXPECT_EQ(names(p.pending), (std::vector<std::string>{"future", "normal"}));
  ASSERT_TRUE(p.next);
  EXPECT_GT(*p.next, kT0 + std::chrono::hours(24));
  const ClearRules normal{.node_unreachable_toleration = minutes(5),
                          .pod_deletion_grace = seconds(30),
                          .storm_guard_percent = 55};
  const ClearPlan q = planClear(nodes, pods, kT0 + std::chrono::hours(24), normal);
  EXPECT_EQ(names(q.due), std::vector<std::string>{"normal"});
  EXPECT_EQ(names(q.pending), std::vector<std::string>{"future"});
}

TEST(ClearPlan, BothThresholdsMustPassAndTheNextIsTheEarliestPendingOne) {
  const ClearRules rules{.node_unreachable_toleration = minutes(5),
                         .pod_deletion_grace = seconds(30),
                         .storm_guard_percent = 55};
  const std::vector<kube::NodeRecord> nodes = {
      nodeRecord("a", "True"), nodeRecord("b", "Unknown", kT0, kT0 - seconds(40)),
      nodeRecord("c", "False"),  // not ready but reachable: the kubelet finishes its pods
      nodeRecord("d", "Unknown", std::nullopt, kT0 + minutes(1)),  // condition fallback
  };
  const std::vector<kube::PodRecord> pods = {
      podRecord("b-early", "b", kT0 - minutes(1)),       // grace long passed, node dead at +5m
      podRecord("b-late", "b", kT0 + minutes(5)),        // node dead first, grace at +5m30s
      podRecord("b-running", "b"),                       // not terminating: never
      podRecord("b-forced", "b", kT0 - minutes(10), 0),  // already force-deleted
      podRecord("a-stuck", "a", kT0 - minutes(10)),      // live node: never
      podRecord("c-stuck", "c", kT0 - minutes(10)),      // reachable node: never
      podRecord("d-stuck", "d", kT0),                    // dead at +6m
      podRecord("x-stuck", "gone", kT0 - minutes(10)),   // unknown node: never
  };
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(5) - milliseconds(1), rules);
    EXPECT_TRUE(names(p.due).empty());
    EXPECT_EQ(names(p.pending), (std::vector<std::string>{"b-early", "b-late", "d-stuck"}));
    EXPECT_EQ(p.next, kT0 + minutes(5));
    EXPECT_TRUE(p.dead_nodes.empty());
    EXPECT_EQ(p.held, std::vector<std::string>{"default/b-forced"});
    EXPECT_FALSE(p.storm.active);  // 2 of 4
  }
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(5), rules);
    EXPECT_EQ(names(p.due), std::vector<std::string>{"b-early"});
    EXPECT_EQ(p.next, kT0 + minutes(5) + seconds(30));
    EXPECT_EQ(p.dead_nodes, std::vector<std::string>{"b"});
    EXPECT_EQ(p.due[0].due, kT0 + minutes(5));
    EXPECT_EQ(p.due[0].node_dead_at, kT0 + minutes(5));
    EXPECT_EQ(p.due[0].grace_passed_at, kT0 - seconds(30));
  }
  {
    const ClearPlan p = planClear(nodes, pods, kT0 + minutes(6), rules);
    EXPECT_EQ(names(p.due), (std::vector<std::string>{"b-early", "b-late", "d-stuck"}));
    EXPECT_EQ(p.next, std::nullopt);
    EXPECT_EQ(p.dead_nodes, (std::vector<std::string>{"b", "d"}));
  }
  EXPECT_EQ(clearReason(planClear(nodes, pods, kT0 + minutes(6), rules).due[0], rules),
            "node b unreachable since 2023-11-14T22:13:20Z (dead after 5m); pod terminating "
            "since 2023-11-14T22:12:20Z (force-deleted after 30s)");
}

// --- randomized states against the in-memory API
// ---------------------------------------------------

// A pod record as the API stores it, for the in-memory API (tests/fakes/fake_kube.h).
json podObject(const kube::PodRecord& p) {
  json meta = {{"name", p.name}, {"namespace", p.ns.str()}, {"uid", p.uid}};
  if (p.deletion_timestamp) meta["deletionTimestamp"] = kube::formatRfc3339(*p.deletion_timestamp);
  if (p.deletion_grace_period_seconds) {
    meta["deletionGracePeriodSeconds"] = *p.deletion_grace_period_seconds;
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", meta},
          {"spec", {{"nodeName", p.node_name.str()}}},
          {"status", {{"phase", p.phase.str()}}}};
}

kube::PodRecord record(const json& pod) {
  auto projected = kube::projectPod(pod);
  EXPECT_TRUE(projected) << projected.error().message();
  return projected.value_or(kube::PodRecord{});
}

// The pods the fake API holds, as the pod cache would show them.
std::vector<kube::PodRecord> podsIn(const FakeKube& kube) {
  std::vector<kube::PodRecord> out;
  for (const json& pod : kube.objects(kube::resources::kPods)) out.push_back(record(pod));
  return out;
}

TEST(ClearNodesRandomized, NeverALiveNodeNeverInAStormNeverEarlyNeverMissedExactWakeUps) {
  // Thousands of force deletes and storms: counted, not printed.
  int log_lines = 0;
  base::configureLogging(base::LogOptions{.sink = [&](std::string_view) { ++log_lines; }});
  struct RestoreLogging {
    ~RestoreLogging() { base::configureLogging(base::LogOptions{}); }
  } restore_logging;
  std::mt19937_64 rng(20240607);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  auto offset = [&](int lo_s, int hi_s) {  // whole seconds, as the API writes times
    return seconds(lo_s + pick(hi_s - lo_s + 1));
  };
  int deletes = 0;
  int total_deletes = 0;
  int storms = 0;
  int wakeups = 0;
  for (int iteration = 0; iteration < 1500; ++iteration) {
    base::ManualClock clock(kT0);
    FakeKube kube;
    std::vector<kube::NodeRecord> nodes;  // what the node cache and a re-read of the API show
    const ClearRules rules{.node_unreachable_toleration = seconds(pick(400)),
                           .pod_deletion_grace = seconds(pick(60)),
                           .storm_guard_percent = pick(101)};
    const int node_count = 1 + pick(9);
    for (int i = 0; i < node_count; ++i) {
      const std::string name = "n" + std::to_string(i);
      const base::WallTime t = kT0 - offset(0, 600) + offset(0, 60);
      switch (pick(7)) {
        case 0:
        case 1:
          nodes.push_back(nodeRecord(name, "True", std::nullopt, t));
          break;
        case 2:
          nodes.push_back(nodeRecord(name, "False", std::nullopt, t));
          break;
        case 3:
          nodes.push_back(nodeRecord(name, "Unknown", t, t - seconds(40)));
          break;
        case 4:
          nodes.push_back(nodeRecord(name, "Unknown", std::nullopt, t));
          break;
        case 5:
          nodes.push_back(nodeRecord(name, "Unknown"));
          break;  // no time known
        default:
          nodes.push_back(nodeRecord(name, "True", t, t));
          break;  // stale taint
      }
      if (pick(5) == 0) nodes.back().unschedulable = true;
    }
    const int pod_count = pick(15);
    for (int i = 0; i < pod_count; ++i) {
      const std::string node = "n" + std::to_string(pick(node_count + 1));  // may not exist
      std::optional<base::WallTime> deleted;
      if (pick(3) != 0) deleted = kT0 - offset(0, 300) + offset(0, 60);
      kube.put(kube::resources::kPods,
               podObject(podRecord("p" + std::to_string(i), node, deleted, pick(8) == 0 ? 0 : 30)));
    }
    // Checked at the moment of every delete, against the state the fake holds then.
    kube.before_delete = [&](const json& object) {
      const kube::PodRecord pod = record(object);
      const base::WallTime now = clock.wallNow();
      auto node = std::find_if(nodes.begin(), nodes.end(),
                               [&](const kube::NodeRecord& n) { return n.name == pod.node_name; });
      ASSERT_NE(node, nodes.end()) << pod.name;
      EXPECT_TRUE(isDead(*node, now, rules.node_unreachable_toleration)) << pod.name;
      EXPECT_TRUE(isUnreachable(*node));
      EXPECT_NE(node->condition("Ready")->status, "True") << "deleted a pod on a live node";
      ASSERT_TRUE(pod.deletion_timestamp);
      EXPECT_GE(now, *pod.deletion_timestamp + rules.pod_deletion_grace) << "deleted early";
      EXPECT_NE(pod.deletion_grace_period_seconds, 0);
      EXPECT_FALSE(assessStorm(nodes, rules.storm_guard_percent).active)
          << "deleted during a storm";
    };
    ClearNodesController c(
        [&] { return ObservedNodes{.synced = true, .nodes = nodes}; }, [&] { return podsIn(kube); },
        kube, clock, {.rules = rules, .effects = {.is_leader_fresh = [] { return true; }}},
        {.read_nodes = [&]() -> base::Result<std::vector<kube::NodeRecord>> { return nodes; },
         .read_pod = [&](std::string_view ns,
                         std::string_view name) -> base::Result<std::optional<kube::PodRecord>> {
           auto pod = kube.object(kube::resources::kPods, ns, name);
           if (!pod) return std::optional<kube::PodRecord>();
           return std::optional<kube::PodRecord>(record(*pod));
         }});
    // Run, then follow the wake-ups the controller asks for, as the manager would.
    for (int step = 0; step < 20; ++step) {
      const auto before = podsIn(kube);
      const base::WallTime now = clock.wallNow();
      const ClearPlan expected = planClear(nodes, before, now, rules);
      auto r = c.reconcile();
      ASSERT_TRUE(r) << r.error().message();
      if (expected.storm.active) {
        ++storms;
        EXPECT_EQ(podsIn(kube).size(), before.size());
        break;
      }
      // Nothing due is left behind.
      EXPECT_EQ(kube.deleted().size() - static_cast<std::size_t>(deletes), expected.due.size());
      deletes = static_cast<int>(kube.deleted().size());
      for (const kube::PodRecord& p : podsIn(kube)) {
        for (const PodToClear& d : expected.due) EXPECT_NE(p.uid, d.pod.uid) << "missed a pod";
      }
      // The wake-up is exactly the next threshold.
      if (!expected.next) {
        EXPECT_EQ(r->requeue_after, std::nullopt);
        break;
      }
      ASSERT_TRUE(r->requeue_after);
      EXPECT_EQ(*r->requeue_after, std::chrono::ceil<milliseconds>(*expected.next - now));
      clock.advance(*r->requeue_after);
      ++wakeups;
      // At the wake-up something is due (the pending pod crossed its threshold).
      EXPECT_FALSE(planClear(nodes, podsIn(kube), clock.wallNow(), rules).due.empty());
    }
    // Every delete is a force delete of a pod.
    for (const auto& call : kube.calls(Verb::kDelete)) {
      EXPECT_EQ(call.resource, kube::resources::kPods);
      EXPECT_EQ(call.delete_options.grace_period_seconds, 0);
    }
    total_deletes += static_cast<int>(kube.deleted().size());
    deletes = 0;
  }
  EXPECT_GT(storms, 50);
  EXPECT_GT(wakeups, 100);
  EXPECT_GT(total_deletes, 300);
  EXPECT_GT(log_lines, total_deletes);
  std::cerr << "randomized: " << total_deletes << " force deletes, " << storms << " storms, "
            << wakeups << " timed wake-ups\n";
}

}  // namespace
}  // namespace ekco::agent
