// The node-recovery leader controller (agent/features/reboot/node_recovery.h):
//   - the pure decision over a table of node states;
//   - the server version rule;
//   - the controller against the in-memory API on a ManualClock: the taint with ekco's marker
//     and an Event, the exact wake-up at the end of the grace, both guards (the API's state
//     re-read, leader freshness), the storm guard, dry run, a person's taint left alone, the
//     partition's untaint.
// (node_recovery_e2e_test.cc runs a real `ekco agent` against ekco-kubesim's simulated node
// lifecycle.)
#include "agent/features/reboot/node_recovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
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
using ::testing::HasSubstr;

const base::WallTime kT0 = base::WallTime(seconds(1'700'000'000));
const std::string kBoot1 = "5d0a4c1e-2f3b-4a6c-8d9e-0a1b2c3d4e5f";
const std::string kBoot2 = "9e8d7c6b-5a49-4837-a261-50f4e3d2c1b0";

std::string stamp(base::WallTime t) { return kube::formatRfc3339(t); }

struct NodeSpec {
  std::string name;
  std::string ready = "True";
  std::optional<base::WallTime> beacon_at{};
  std::string beacon_boot = kBoot1;
  std::string boot_id = kBoot1;
  bool oos = false;
  bool oos_by_ekco = false;
  std::optional<base::WallTime> oos_at{};  // ekco.kurl.sh/out-of-service-at
  bool unreachable = false;
};

json nodeJson(const NodeSpec& s) {
  json n = {{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", s.name}, {"annotations", json::object()}}},
            {"spec", {{"taints", json::array()}}},
            {"status",
             {{"conditions", {{{"type", "Ready"}, {"status", s.ready}}}},
              {"nodeInfo", {{"bootID", s.boot_id}}}}}};
  if (s.beacon_at) {
    n["metadata"]["annotations"]["ekco.kurl.sh/shutdown-at"] = stamp(*s.beacon_at);
    n["metadata"]["annotations"]["ekco.kurl.sh/shutdown-boot-id"] = s.beacon_boot;
  }
  if (s.oos) {
    n["spec"]["taints"].push_back({{"key", "node.kubernetes.io/out-of-service"},
                                   {"value", "nodeshutdown"},
                                   {"effect", "NoExecute"},
                                   {"timeAdded", stamp(kT0)}});
  }
  if (s.oos_by_ekco) n["metadata"]["annotations"]["ekco.kurl.sh/out-of-service-by"] = "ekco";
  if (s.oos_at) n["metadata"]["annotations"]["ekco.kurl.sh/out-of-service-at"] = stamp(*s.oos_at);
  if (s.unreachable) {
    n["spec"]["taints"].push_back({{"key", "node.kubernetes.io/unreachable"},
                                   {"effect", "NoExecute"},
                                   {"timeAdded", stamp(kT0)}});
  }
  return n;
}

kube::NodeRecord record(const NodeSpec& s) { return *kube::projectNode(nodeJson(s)); }

json leaseJson(const std::string& node, base::WallTime renewed) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", node}, {"namespace", "kube-node-lease"}}},
          {"spec", {{"holderIdentity", node}, {"renewTime", kube::formatRfc3339Micro(renewed)}}}};
}

const RecoveryRules kRules{.lease_grace = seconds(15), .storm_guard_percent = 55};

RecoveryState stateOf(const NodeSpec& s, std::optional<base::WallTime> renewed, base::WallTime now,
                      std::string* reason = nullptr) {
  std::vector<NodeLease> leases;
  if (renewed) leases.push_back({.name = s.name, .renew_time = renewed});
  RecoveryPlan plan = planRecovery({record(s)}, leases, now, kRules);
  EXPECT_EQ(plan.nodes.size(), 1U) << s.name;
  if (plan.nodes.empty()) return RecoveryState::kShuttingDown;
  if (reason) *reason = plan.nodes.front().reason;
  return plan.nodes.front().state;
}

// --- the decision ---------------------------------------------------------------------------

TEST(NodeRecoveryPlan, ABeaconedNodeIsDueOnceNotReadyAndItsLeaseSilentForTheGrace) {
  const NodeSpec down{.name = "b", .ready = "Unknown", .beacon_at = kT0};
  // Lease last renewed at T0 + 2s: due at T0 + 17s exactly.
  EXPECT_EQ(stateOf(down, kT0 + seconds(2), kT0 + seconds(16)), RecoveryState::kWaiting);
  EXPECT_EQ(stateOf(down, kT0 + seconds(2), kT0 + seconds(17)), RecoveryState::kDue);
  NodeSpec not_ready = down;
  not_ready.ready = "False";
  EXPECT_EQ(stateOf(not_ready, kT0 + seconds(2), kT0 + seconds(30)), RecoveryState::kDue);
  // No Lease at all: silent since the beacon.
  EXPECT_EQ(stateOf(down, std::nullopt, kT0 + seconds(15)), RecoveryState::kDue);
  std::string reason;
  stateOf(down, kT0 + seconds(2), kT0 + seconds(20), &reason);
  EXPECT_THAT(reason, HasSubstr("heartbeat Lease not renewed since"));
}

TEST(NodeRecoveryPlan, ANodeThatStillReportsReadyIsOnlyShuttingDown) {
  const NodeSpec up{.name = "b", .ready = "True", .beacon_at = kT0};
  EXPECT_EQ(stateOf(up, kT0, kT0 + minutes(3)), RecoveryState::kShuttingDown);
}

TEST(NodeRecoveryPlan, AStaleBeaconIsNeverActedOn) {
  // The kubelet reports another boot: it booted since the beacon.
  NodeSpec rebooted{.name = "b", .ready = "Unknown", .beacon_at = kT0, .boot_id = kBoot2};
  EXPECT_EQ(stateOf(rebooted, kT0, kT0 + minutes(1)), RecoveryState::kStaleBeacon);
  // The Lease went on being renewed long after the beacon: the node kept running.
  NodeSpec kept{.name = "b", .ready = "Unknown", .beacon_at = kT0};
  EXPECT_EQ(stateOf(kept, kT0 + minutes(11), kT0 + minutes(12)), RecoveryState::kStaleBeacon);
  EXPECT_EQ(stateOf(kept, kT0 + minutes(9), kT0 + minutes(12)), RecoveryState::kDue);
}

TEST(NodeRecoveryPlan, NoBeaconIsNotThisControllersNode) {
  const NodeSpec lost{.name = "b", .ready = "Unknown", .unreachable = true};
  RecoveryPlan plan =
      planRecovery({record(lost)}, {{.name = "b", .renew_time = kT0}}, kT0 + minutes(10), kRules);
  EXPECT_TRUE(plan.nodes.empty());
}

TEST(NodeRecoveryPlan, APersonsTaintIsLeftAloneAndEkcosIsRemovedOnceReady) {
  EXPECT_EQ(stateOf({.name = "b", .ready = "True", .beacon_at = kT0, .oos = true}, kT0, kT0),
            RecoveryState::kPersonsTaint);
  EXPECT_EQ(stateOf({.name = "b", .ready = "True", .oos = true}, kT0, kT0),
            RecoveryState::kPersonsTaint);
  EXPECT_EQ(
      stateOf({.name = "b", .ready = "Unknown", .beacon_at = kT0, .oos = true, .oos_by_ekco = true},
              kT0, kT0),
      RecoveryState::kTainted);
  std::vector<NodeLease> none;
  RecoveryPlan same_boot =
      planRecovery({record({.name = "b", .beacon_at = kT0, .oos = true, .oos_by_ekco = true})},
                   none, kT0, kRules);
  ASSERT_EQ(same_boot.nodes.size(), 1U);
  EXPECT_EQ(same_boot.nodes[0].state, RecoveryState::kUntaintDue);
  EXPECT_TRUE(same_boot.nodes[0].partition);
  EXPECT_THAT(same_boot.nodes[0].reason, HasSubstr("a partition"));
  RecoveryPlan new_boot = planRecovery(
      {record(
          {.name = "b", .beacon_at = kT0, .boot_id = kBoot2, .oos = true, .oos_by_ekco = true})},
      none, kT0, kRules);
  EXPECT_FALSE(new_boot.nodes[0].partition);
}

// Issue 34, item 10: a person's `kubectl taint … out-of-service-` left ekco's marker behind, and a
// taint the person applied later was taken for ekco's and removed when the node turned Ready.
// ekco's taint is the one whose timeAdded ekco recorded beside its marker.
TEST(NodeRecoveryPlan, ATaintAddedAfterEkcosMarkerWasLeftBehindIsAPersons) {
  // The person's taint (timeAdded kT0) under ekco's leftover marker from an hour before.
  EXPECT_EQ(stateOf({.name = "b",
                     .ready = "True",
                     .oos = true,
                     .oos_by_ekco = true,
                     .oos_at = kT0 - std::chrono::hours(1)},
                    kT0, kT0),
            RecoveryState::kPersonsTaint);
  // ekco's own: the recorded time is the taint's.
  EXPECT_EQ(stateOf({.name = "b",
                     .ready = "Unknown",
                     .beacon_at = kT0,
                     .oos = true,
                     .oos_by_ekco = true,
                     .oos_at = kT0},
                    kT0, kT0),
            RecoveryState::kTainted);
}

TEST(NodeRecoveryPlan, TheNextWakeUpIsTheEarliestGraceEnd) {
  RecoveryPlan plan = planRecovery({record({.name = "b", .ready = "Unknown", .beacon_at = kT0}),
                                    record({.name = "c", .ready = "Unknown", .beacon_at = kT0})},
                                   {{.name = "b", .renew_time = kT0 + seconds(5)},
                                    {.name = "c", .renew_time = kT0 + seconds(3)}},
                                   kT0 + seconds(10), kRules);
  ASSERT_TRUE(plan.next);
  EXPECT_EQ(*plan.next, kT0 + seconds(18));
}

TEST(NodeRecoveryPlan, OutOfServiceNeedsKubernetes128) {
  EXPECT_TRUE(*supportsOutOfService({{"major", "1"}, {"minor", "28"}}));
  EXPECT_TRUE(*supportsOutOfService({{"major", "1"}, {"minor", "30+"}}));
  EXPECT_FALSE(*supportsOutOfService({{"major", "1"}, {"minor", "27"}}));
  EXPECT_TRUE(*supportsOutOfService({{"gitVersion", "v1.29.1"}}));
  EXPECT_FALSE(*supportsOutOfService({{"major", ""}, {"gitVersion", "v1.26.0+k3s1"}}));
  EXPECT_FALSE(supportsOutOfService(json::object()).has_value());
}

// --- the controller on the in-memory API ----------------------------------------------------

class NodeRecoveryControllerTest : public ::testing::Test {
 protected:
  NodeRecoveryControllerTest() : clock_(kT0) {}

  std::unique_ptr<NodeRecoveryController> make(bool dry_run = false) {
    return std::make_unique<NodeRecoveryController>(
        [this] {
          ObservedNodes o{.synced = true};
          for (const json& n : kube_.objects(kube::resources::kNodes)) {
            o.nodes.push_back(*kube::projectNode(n));
          }
          return o;
        },
        [this] {
          ObservedNodeLeases o{.synced = true};
          for (const json& l : kube_.objects(kube::resources::kLeases, "kube-node-lease")) {
            auto lease = kube::parseLease(l);
            o.leases.push_back({.name = lease->name, .renew_time = lease->renew_time});
          }
          return o;
        },
        kube_, clock_,
        NodeRecoveryOptions{
            .rules = kRules,
            .effects = {.dry_run = dry_run,
                        .is_leader_fresh = [this] { return fresh_; },
                        .record_event =
                            [this](const kube::EventSpec& e) { ASSERT_TRUE(kube_.recordEvent(e)); },
                        .count_action = [this](std::string_view k) { actions_.emplace_back(k); }}},
        NodeRecoveryCallbacks{.server_version = [] {
          return base::Result<json>(json{{"major", "1"}, {"minor", "32"}});
        }});
  }
  void put(const NodeSpec& s) { kube_.put(kube::resources::kNodes, nodeJson(s)); }
  void lease(const std::string& node, base::WallTime renewed) {
    kube_.put(kube::resources::kLeases, leaseJson(node, renewed));
  }
  json node(const std::string& name) {
    return kube_.object(kube::resources::kNodes, "", name).value_or(json());
  }
  bool outOfService(const std::string& name) {
    for (const json& t : node(name)["spec"].value("taints", json::array())) {
      if (t.value("key", "") == "node.kubernetes.io/out-of-service") return true;
    }
    return false;
  }
  std::vector<std::string> eventReasons() {
    std::vector<std::string> out;
    for (const json& e : kube_.objects(kube::resources::kEvents, "default")) {
      out.push_back(e.value("reason", ""));
    }
    return out;
  }

  base::ManualClock clock_;
  FakeKube kube_;
  bool fresh_ = true;
  std::vector<std::string> actions_;
};

TEST_F(NodeRecoveryControllerTest, TaintsAtTheExactEndOfTheGraceWithEkcosMarkerAndAnEvent) {
  put({.name = "a"});
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0});
  lease("b", kT0 + seconds(1));
  clock_.setWall(kT0 + seconds(10));
  auto c = make();
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(outOfService("b"));
  ASSERT_TRUE(r->requeue_after);
  EXPECT_EQ(*r->requeue_after, milliseconds(6000));  // T0 + 1s + 15s
  clock_.setWall(kT0 + seconds(16));
  r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(outOfService("b"));
  json b = node("b");
  EXPECT_EQ(b["metadata"]["annotations"]["ekco.kurl.sh/out-of-service-by"], "ekco");
  EXPECT_EQ(b["metadata"]["annotations"]["ekco.kurl.sh/out-of-service-at"],
            stamp(kT0 + seconds(16)));
  json taint = b["spec"]["taints"].back();
  EXPECT_EQ(taint["value"], "nodeshutdown");
  EXPECT_EQ(taint["effect"], "NoExecute");
  EXPECT_EQ(taint["timeAdded"], stamp(kT0 + seconds(16)));
  EXPECT_THAT(eventReasons(), ::testing::Contains("OutOfServiceTaintApplied"));
  EXPECT_THAT(actions_, ::testing::Contains("node_out_of_service"));
  EXPECT_FALSE(outOfService("a"));
  EXPECT_EQ(c->status()["nodes"][0]["state"], "due");
  // The next pass sees it tainted.
  r = c->reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(c->status()["nodes"][0]["state"], "tainted");
  EXPECT_EQ(c->status()["nodes"][0]["since"], stamp(kT0 + seconds(16)));
}

TEST_F(NodeRecoveryControllerTest, TheApiIsReadAgainBeforeTainting) {
  put({.name = "a"});  // a healthy node: no storm
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0});
  lease("b", kT0);
  clock_.setWall(kT0 + seconds(20));
  auto c = make();
  // The cache still says silent, but the Lease was renewed right before the write.
  kube_.afterNext(Verb::kGet, [this] { lease("b", kT0 + seconds(19)); });
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(outOfService("b"));
  EXPECT_THAT(c->status()["last_skip"].get<std::string>(), HasSubstr("waiting"));
}

TEST_F(NodeRecoveryControllerTest, NothingIsWrittenByALeaderThatIsNoLongerFresh) {
  put({.name = "a"});  // a healthy node: no storm
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0});
  clock_.setWall(kT0 + seconds(20));
  fresh_ = false;
  auto c = make();
  auto r = c->reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("not a fresh leader"));
  EXPECT_FALSE(outOfService("b"));
  EXPECT_TRUE(kube_.calls(Verb::kPatch).empty());
}

TEST_F(NodeRecoveryControllerTest, TheStormGuardBlocksTainting) {
  put({.name = "a", .ready = "Unknown", .unreachable = true});
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0, .unreachable = true});
  put({.name = "c"});
  clock_.setWall(kT0 + seconds(20));
  auto c = make();
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(outOfService("b"));
  EXPECT_THAT(r->plan, HasSubstr("blocked by the storm guard"));
}

TEST_F(NodeRecoveryControllerTest, DryRunWritesNothing) {
  put({.name = "a"});  // a healthy node: no storm
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0});
  clock_.setWall(kT0 + seconds(20));
  auto c = make(/*dry_run=*/true);
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("dry run: would taint out-of-service"));
  EXPECT_TRUE(kube_.calls(Verb::kPatch).empty());
}

TEST_F(NodeRecoveryControllerTest, APersonsTaintIsNeverRemoved) {
  put({.name = "b", .ready = "True", .beacon_at = kT0, .oos = true});
  auto c = make();
  ASSERT_TRUE(c->reconcile());
  EXPECT_TRUE(outOfService("b"));
  EXPECT_TRUE(kube_.calls(Verb::kPatch).empty());
  EXPECT_EQ(c->status()["nodes"][0]["state"], "persons-taint");
}

TEST_F(NodeRecoveryControllerTest, EkcosTaintStaysWhileNotReadyAndGoesWhenReadyAgain) {
  put({.name = "b", .ready = "Unknown", .beacon_at = kT0, .oos = true, .oos_by_ekco = true});
  auto c = make();
  ASSERT_TRUE(c->reconcile());
  EXPECT_TRUE(outOfService("b"));
  // The kubelet is back with the same boot id: a partition.
  put({.name = "b",
       .ready = "True",
       .beacon_at = kT0,
       .oos = true,
       .oos_by_ekco = true,
       .unreachable = true});
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(outOfService("b"));
  json b = node("b");
  EXPECT_FALSE(b["metadata"]["annotations"].contains("ekco.kurl.sh/out-of-service-by"));
  EXPECT_FALSE(b["metadata"]["annotations"].contains("ekco.kurl.sh/shutdown-at"));
  EXPECT_EQ(b["spec"]["taints"].size(), 1U);  // the other taints stay
  EXPECT_THAT(eventReasons(), ::testing::Contains("NodePartitionEnded"));
}

}  // namespace
}  // namespace ekco::agent
