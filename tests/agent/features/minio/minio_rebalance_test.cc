// MinIO pod rebalancing's decision (agent/features/minio/minio_rebalance.h) as tables: every rule,
// its ties, the 5-minute boundary, pods without a node, nodes that do not count, and the pod
// JSON it reads. The controller against ekco-kubesim: minio_rebalance_sim_test.cc.
#include "agent/features/minio/minio_rebalance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kube/decode/timestamp.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const base::WallTime kNow{seconds(1'800'000'000)};

kube::NodeRecord node(const std::string& name, const char* ready = "True", bool cordoned = false) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  n.unschedulable = cordoned;
  n.conditions.push_back({.type = kube::Atom("Ready"), .status = kube::Atom(ready)});
  return n;
}

std::vector<kube::NodeRecord> nodes(int n) {
  std::vector<kube::NodeRecord> out;
  for (int i = 0; i < n; ++i) out.push_back(node("node-" + std::to_string(i)));
  return out;
}

// A Running, Ready pod on `host` whose MinIO answers `health` in maintenance mode.
MinioRebalancePod pod(int ordinal, const std::string& host, std::optional<int> health = 200) {
  const std::string name = "ha-minio-" + std::to_string(ordinal);
  return {.name = name,
          .uid = "uid-" + name,
          .host_ip = host,
          .phase = "Running",
          .ready = true,
          .claim = "minio-data-" + name,
          .s3_host = "10.32.0." + std::to_string(ordinal) + ":9000",
          .maintenance_status = health};
}

MinioRebalancePod unschedulable(int ordinal, std::chrono::nanoseconds pending_for) {
  MinioRebalancePod p = pod(ordinal, "", std::nullopt);
  p.phase = "Pending";
  p.ready = false;
  p.s3_host = "";
  p.unschedulable_since = kNow - pending_for;
  p.volume_node = "node-gone";  // its local volume's node was removed from the cluster
  return p;
}

// Pods spread as `spread` (pods per host, hosts 10.0.0.1, 10.0.0.2, ...), ordinals in order.
std::vector<MinioRebalancePod> spread(const std::vector<int>& per_host) {
  std::vector<MinioRebalancePod> pods;
  int ordinal = 0;
  for (std::size_t h = 0; h < per_host.size(); ++h) {
    for (int i = 0; i < per_host[h]; ++i) {
      pods.push_back(pod(ordinal++, "10.0.0." + std::to_string(h + 1)));
    }
  }
  return pods;
}

MinioRebalanceDecision decide(std::vector<MinioRebalancePod> pods,
                              std::vector<kube::NodeRecord> ns) {
  const auto replicas = static_cast<std::int64_t>(pods.size());
  return decideMinioRebalance(
      {.pods = std::move(pods), .nodes = std::move(ns), .replicas = replicas, .now = kNow});
}

std::string moved(const MinioRebalanceDecision& d) {
  return d.reschedule ? d.rule + " " + d.reschedule->name : "none: " + d.reason;
}

TEST(MinioRebalance, BalancedSpreadsAreLeftAlone) {
  struct Case {
    std::vector<int> spread;
    int ready_nodes;
  };
  for (const Case& c : std::vector<Case>{{{2, 1, 1}, 3},
                                         {{2, 2, 2}, 3},
                                         {{1, 1, 1, 1, 1, 1}, 6},
                                         {{2, 2, 1, 1}, 4},
                                         {{3, 3}, 2},
                                         {{1, 1, 1}, 3}}) {
    const auto d = decide(spread(c.spread), nodes(c.ready_nodes));
    EXPECT_FALSE(d.reschedule) << moved(d);
    EXPECT_THAT(d.reason, StartsWith("balanced: ")) << c.ready_nodes;
    EXPECT_EQ(d.rule, "");
  }
  const auto d = decide(spread({2, 1, 1}), nodes(3));
  EXPECT_EQ(d.reason, "balanced: 4 ha-minio pods on 3 nodes, 3 Ready (at most 2 per node)");
}

TEST(MinioRebalance, APodOnANodeAboveCeilIsMovedFromTheFullestNodeLowestOrdinalFirst) {
  // 6 pods, 3 nodes: max 2. 10.0.0.2 holds 4 (ha-minio-1..4).
  auto d = decide(spread({1, 4, 1}), nodes(3));
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(d.rule, "over-max");
  EXPECT_EQ(d.reschedule->name, "ha-minio-1");
  EXPECT_EQ(d.reschedule->claim, "minio-data-ha-minio-1");
  EXPECT_THAT(d.reason, HasSubstr("node 10.0.0.2 holds 4 ha-minio pods, more than ceil(6 pods / "
                                  "3 nodes) = 2"));
  EXPECT_THAT(d.reason, HasSubstr("/minio/health/cluster?maintenance=true 200"));
  // Two nodes above max: the one holding more goes first, whatever its hostIP.
  d = decide(spread({4, 5, 0}), nodes(3));  // 9 pods: max 3
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(moved(d), "over-max ha-minio-4");
  // Ordinals in numeric order: ha-minio-10 after ha-minio-9.
  std::vector<MinioRebalancePod> pods;
  for (int i : {10, 9, 11}) pods.push_back(pod(i, "10.0.0.1"));
  d = decide(pods, nodes(3));
  EXPECT_EQ(moved(d), "over-max ha-minio-9");  // 3 pods on 3 nodes: max 1
}

TEST(MinioRebalance, OnlyAPodWhoseMinioReportsTheClusterHealthyInMaintenanceModeIsMoved) {
  auto pods = spread({1, 4, 1});
  pods[1].maintenance_status = 412;  // ha-minio-1: the cluster would lose quorum without it
  auto d = decide(pods, nodes(3));
  EXPECT_EQ(moved(d), "over-max ha-minio-2");
  for (int i = 1; i <= 4; ++i) pods[i].maintenance_status = i == 3 ? std::optional<int>() : 412;
  d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule) << moved(d);
  EXPECT_THAT(d.reason, StartsWith("waiting: over-max: node 10.0.0.2 holds 4"));
  EXPECT_THAT(d.reason, HasSubstr("no pod there is safe to move (ha-minio-1 answered 412, "
                                  "ha-minio-2 answered 412, ha-minio-3 did not answer"));
  EXPECT_TRUE(d.wants_health);  // ha-minio-3 was not asked: ask and decide again
  pods[3].maintenance_status = 503;
  EXPECT_FALSE(decide(pods, nodes(3)).wants_health);
  // A pod without its StatefulSet PVC is never deleted.
  pods = spread({1, 4, 1});
  for (int i = 1; i <= 4; ++i) pods[i].claim = "";
  d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule) << moved(d);
  EXPECT_THAT(d.reason, HasSubstr("ha-minio-1 has no PVC from ha-minio's volumeClaimTemplates"));
}

TEST(MinioRebalance, ANodeBelowFloorTakesAPodFromANodeAtCeilTiesByHostIp) {
  // 7 pods, 3 nodes: max 3, min 2; 10.0.0.3 holds 1. Both others hold 3: 10.0.0.1 first.
  auto d = decide(spread({3, 3, 1}), nodes(3));
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(moved(d), "under-min ha-minio-0");
  EXPECT_THAT(d.reason, HasSubstr("node 10.0.0.3 holds 1 ha-minio pods, fewer than floor(7 pods "
                                  "/ 3 nodes) = 2"));
  // The first node's pods all unsafe: the other node at max.
  auto pods = spread({3, 3, 1});
  for (int i = 0; i < 3; ++i) pods[i].maintenance_status = 412;
  EXPECT_EQ(moved(decide(pods, nodes(3))), "under-min ha-minio-3");
  // A node at max-1 is not a source.
  d = decide(spread({3, 2, 2, 1}), nodes(4));  // 8 pods, 4 nodes: max = min = 2 -> over-max
  EXPECT_EQ(moved(d), "over-max ha-minio-0");
}

TEST(MinioRebalance, AReadyNodeWithoutPodsTakesOneFromANodeHoldingMoreThanOne) {
  // 4 pods, 3 Ready nodes, only two hold pods: max 2, min 1; nobody above max or below min.
  auto d = decide(spread({2, 2}), nodes(3));
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(moved(d), "empty-node ha-minio-0");
  EXPECT_THAT(d.reason, HasSubstr("4 ha-minio pods on 2 of 3 Ready nodes; node 10.0.0.1 holds 2"));
  // A node holding one pod is not a source.
  auto pods = spread({2, 2});
  pods[0].maintenance_status = pods[1].maintenance_status = 412;
  EXPECT_EQ(moved(decide(pods, nodes(3))), "empty-node ha-minio-2");
  d = decide(spread({1, 1}), nodes(3));
  EXPECT_FALSE(d.reschedule);
  EXPECT_THAT(d.reason, StartsWith("balanced: 2 ha-minio pods on 2 nodes, 3 Ready"));
}

TEST(MinioRebalance, NotReadyAndCordonedNodesDoNotCount) {
  // {2, 2} is balanced over 2 nodes, not over 3.
  std::vector<kube::NodeRecord> ns = {node("a"), node("b"), node("c", "False")};
  EXPECT_THAT(decide(spread({2, 2}), ns).reason, StartsWith("balanced: "));
  ns[2] = node("c", "Unknown");
  EXPECT_THAT(decide(spread({2, 2}), ns).reason, StartsWith("balanced: "));
  ns[2] = node("c", "True", /*cordoned=*/true);
  EXPECT_THAT(decide(spread({2, 2}), ns).reason, StartsWith("balanced: "));
  ns[2] = node("c");
  EXPECT_EQ(moved(decide(spread({2, 2}), ns)), "empty-node ha-minio-0");
  EXPECT_EQ(countMinioNodes({node("a"), node("b", "False"), node("c", "True", true)}), 1);
  const auto d = decide(spread({2, 2}), {node("a", "False")});
  EXPECT_EQ(d.reason, "waiting: no Ready, schedulable node");
}

TEST(MinioRebalance, APodUnschedulableForMoreThanFiveMinutesIsRescheduledFirst) {
  // Exactly 5 minutes is not more than 5 minutes.
  auto pods = spread({1, 4, 0});
  pods.push_back(unschedulable(5, minutes(5)));
  auto d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule) << moved(d);
  EXPECT_EQ(d.reason,
            "waiting: ha-minio-5 is not on a node yet (Pending, unschedulable for 5m00s; "
            "rescheduled after 5m if its volume's node is gone)");
  // One second more: it goes before the over-max pods, and needs no health answer (no IP).
  pods.back() = unschedulable(5, minutes(5) + seconds(1));
  d = decide(pods, nodes(3));
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(moved(d), "unschedulable ha-minio-5");
  EXPECT_EQ(d.reschedule->claim, "minio-data-ha-minio-5");
  EXPECT_THAT(d.reason, HasSubstr("Pending with PodScheduled=False for 5m01s (more than 5m)"));
  // Two of them: the lower ordinal, though the other has waited longer.
  pods.push_back(unschedulable(6, minutes(30)));
  EXPECT_EQ(moved(decide(pods, nodes(3))), "unschedulable ha-minio-5");
  // Without its StatefulSet PVC: left alone, and nothing else moves meanwhile.
  pods.pop_back();
  pods.back().claim = "";
  d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule) << moved(d);
  EXPECT_THAT(d.reason, HasSubstr("it has no PVC from ha-minio's volumeClaimTemplates"));
  // A terminating one is on its way already.
  pods.back() = unschedulable(5, minutes(30));
  pods.back().terminating = true;
  EXPECT_EQ(decide(pods, nodes(3)).reason, "waiting: ha-minio-5 is terminating");
}

// Issue 34, item 5: a pod unschedulable because its node is rebooting (drained by ekco's own
// reboot, longer than 5 minutes) lost its replica; only a volume on a node that is gone is.
TEST(MinioRebalance, AnUnschedulablePodsReplicaIsKeptWhileItsVolumesNodeExists) {
  auto pods = spread({2, 2, 1});  // ha-minio-0 ... -4 on three nodes
  MinioRebalancePod waiting = unschedulable(5, std::chrono::hours(2));
  waiting.volume_node = std::nullopt;  // not looked up yet
  pods.push_back(waiting);
  auto d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule);
  EXPECT_TRUE(d.wants_volumes);
  // node-1 is rebooting: NotReady, cordoned, but a Node still.
  std::vector<kube::NodeRecord> rebooting = {node("node-0"), node("node-1", "Unknown", true),
                                             node("node-2")};
  pods.back().volume_node = "node-1";
  d = decide(pods, rebooting);
  EXPECT_FALSE(d.reschedule) << moved(d);
  EXPECT_FALSE(d.wants_volumes);
  EXPECT_EQ(d.reason,
            "waiting: ha-minio-5 is not on a node yet (Pending, unschedulable for 120m00s; its "
            "volume's node node-1 still exists (rebooting or drained?): its data is kept)");
  // Named by its hostname label, not its node name: the same.
  rebooting[1].name = kube::Atom("ip-10-0-0-2");
  rebooting[1].hostname = kube::Atom("node-1");
  EXPECT_FALSE(decide(pods, rebooting).reschedule);
  // A volume not tied to a node: a new PVC would not help.
  pods.back().volume_node = "";
  d = decide(pods, nodes(3));
  EXPECT_FALSE(d.reschedule);
  EXPECT_THAT(d.reason, HasSubstr("its volume is not tied to a node"));
  // The node is gone: now, and only now, it is rescheduled.
  pods.back().volume_node = "node-1";
  d = decide(pods, {node("node-0"), node("node-2")});
  ASSERT_TRUE(d.reschedule) << d.reason;
  EXPECT_EQ(moved(d), "unschedulable ha-minio-5");
  EXPECT_THAT(d.reason, HasSubstr("and its volume's node node-1 is gone"));
}

TEST(MinioRebalance, SpreadingWaitsForACompleteRunningSet) {
  // A pod without a node (just created, no PodScheduled condition yet).
  auto pods = spread({1, 4, 0});
  MinioRebalancePod fresh = pod(5, "", std::nullopt);
  fresh.phase = "Pending";
  fresh.ready = false;
  pods.push_back(fresh);
  EXPECT_EQ(decide(pods, nodes(3)).reason, "waiting: ha-minio-5 is not on a node yet (Pending)");
  pods.back().phase = "";
  EXPECT_EQ(decide(pods, nodes(3)).reason, "waiting: ha-minio-5 is not on a node yet (no phase)");
  // On a node but not Ready.
  pods = spread({1, 4, 1});
  pods[5].ready = false;
  EXPECT_EQ(decide(pods, nodes(3)).reason,
            "waiting: ha-minio-5 is not Running and Ready (Running)");
  pods[5].ready = true;
  pods[5].terminating = true;
  EXPECT_EQ(decide(pods, nodes(3)).reason, "waiting: ha-minio-5 is terminating");
  // A pod missing (the one rescheduled last pass, not re-created yet).
  pods = spread({1, 4, 1});
  const auto d =
      decideMinioRebalance({.pods = pods, .nodes = nodes(3), .replicas = 7, .now = kNow});
  EXPECT_EQ(d.reason, "waiting: 6 ha-minio pods for 7 replicas");
}

TEST(MinioRebalance, PodJsonGivesItsNodeConditionsAndOnlyItsOwnStatefulSetClaim) {
  const json sts = {
      {"spec",
       {{"volumeClaimTemplates",
         {{{"metadata", {{"name", "minio-data"}}}}, {{"metadata", json::object()}}}}}}};
  const std::vector<std::string> templates = claimTemplateNames(sts);
  EXPECT_EQ(templates, std::vector<std::string>{"minio-data"});
  EXPECT_TRUE(claimTemplateNames(json::object()).empty());

  json p = {{"metadata", {{"name", "ha-minio-2"}, {"uid", "u2"}}},
            {"spec",
             {{"volumes",
               {{{"name", "config"}, {"configMap", {{"name", "x"}}}},
                {{"name", "minio-data"},
                 {"persistentVolumeClaim", {{"claimName", "minio-data-ha-minio-2"}}}}}},
              {"containers", {{{"name", "minio"}, {"ports", {{{"containerPort", 9000}}}}}}}}},
            {"status",
             {{"phase", "Running"},
              {"hostIP", "10.0.0.7"},
              {"podIP", "10.32.0.9"},
              {"conditions",
               {{{"type", "PodScheduled"}, {"status", "True"}},
                {{"type", "Ready"}, {"status", "True"}}}}}}};
  MinioRebalancePod got = minioRebalancePod(p, templates);
  EXPECT_EQ(got.name, "ha-minio-2");
  EXPECT_EQ(got.uid, "u2");
  EXPECT_EQ(got.host_ip, "10.0.0.7");
  EXPECT_TRUE(got.ready);
  EXPECT_FALSE(got.terminating);
  EXPECT_FALSE(got.unschedulable_since);
  EXPECT_EQ(got.claim, "minio-data-ha-minio-2");
  EXPECT_EQ(got.s3_host, "10.32.0.9:9000");
  // Another pod's claim, or a claim under a volume that is no template, is not its own.
  json other = p;
  other["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"] = "minio-data-ha-minio-0";
  EXPECT_EQ(minioRebalancePod(other, templates).claim, "");
  other = p;
  other["spec"]["volumes"][1]["name"] = "scratch";
  EXPECT_EQ(minioRebalancePod(other, templates).claim, "");
  EXPECT_EQ(minioRebalancePod(p, {}).claim, "");
  // Pending, unschedulable since a time; terminating.
  json pending = p;
  pending["status"] = {{"phase", "Pending"},
                       {"conditions",
                        {{{"type", "PodScheduled"},
                          {"status", "False"},
                          {"reason", "Unschedulable"},
                          {"lastTransitionTime", "2027-01-15T08:00:00Z"}}}}};
  pending["metadata"]["deletionTimestamp"] = "2027-01-15T08:10:00Z";
  got = minioRebalancePod(pending, templates);
  EXPECT_EQ(got.host_ip, "");
  EXPECT_FALSE(got.ready);
  EXPECT_TRUE(got.terminating);
  ASSERT_TRUE(got.unschedulable_since);
  EXPECT_EQ(kube::formatRfc3339(*got.unschedulable_since), "2027-01-15T08:00:00Z");
  EXPECT_EQ(got.s3_host, "");
  // Fields of another type are read as absent, never thrown on.
  json odd = p;
  odd["metadata"]["uid"] = 7;
  odd["status"]["hostIP"] = json::array();
  odd["status"]["conditions"] = {"Ready", 3, {{"type", 1}, {"status", true}}};
  odd["spec"]["volumes"] = {{{"name", "minio-data"}, {"persistentVolumeClaim", "x"}}, 5};
  got = minioRebalancePod(odd, templates);
  EXPECT_EQ(got.name, "ha-minio-2");
  EXPECT_EQ(got.uid, "");
  EXPECT_EQ(got.host_ip, "");
  EXPECT_FALSE(got.ready);
  EXPECT_EQ(got.claim, "");
  EXPECT_TRUE(
      claimTemplateNames({{"spec", {{"volumeClaimTemplates", {1, "x", {{"metadata", 2}}}}}}})
          .empty());
  const MinioRebalancePod empty = minioRebalancePod(json("not an object"), templates);
  EXPECT_EQ(empty.name, "");
}

}  // namespace
}  // namespace ekco::agent
