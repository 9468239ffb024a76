// The Rook controller's rules as tables (rook/ceph_policy.h); EKCO's own cases
// (pkg/cluster/rook_ceph_test.go, ../shared/reference/ekco.md §5) are the checklist.
#include "rook/ceph_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace ekco::rook {
namespace {

using nlohmann::json;
using std::chrono::minutes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A tree as real Ceph 16 prints it (tests/rook/testdata/osd_tree_*.json were recorded from the
// Ceph fixture, tests/ceph).
std::string readTestdata(const std::string& name) {
  std::ifstream in(std::string(EKCO_SOURCE_DIR) + "/tests/rook/testdata/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// safeToDestroy's answer, or nullopt when it rejected the text.
std::optional<bool> answer(std::string_view text, const std::vector<std::int64_t>& ids) {
  auto r = safeToDestroy(text, ids);
  if (!r) return std::nullopt;
  return *r;
}

json osd(int id, const char* status, double reweight = 1) {
  return {{"id", id},
          {"name", "osd." + std::to_string(id)},
          {"type", "osd"},
          {"status", status},
          {"reweight", reweight}};
}
json host(int id, const char* name, std::vector<int> children) {
  return {{"id", id}, {"name", name}, {"type", "host"}, {"children", children}};
}

TEST(ParseOsdTree, CountsUniqueHostsWithAnUpOsdForAnyOsdId) {
  // EKCO's "5 unique of 11" case, with ids above 9 (its one-digit regex missed them).
  const json tree = {
      {"nodes",
       {{{"id", -1}, {"name", "default"}, {"type", "root"}, {"children", {-2, -3, -4, -5, -6}}},
        host(-2, "a", {0, 10}),
        host(-3, "b", {1, 11, 12}),
        host(-4, "c", {13}),
        host(-5, "d", {14, 15}),
        host(-6, "e", {16, 17, 18}),
        osd(0, "up"),
        osd(1, "up"),
        osd(10, "up"),
        osd(11, "up"),
        osd(12, "up"),
        osd(13, "up"),
        osd(14, "up"),
        osd(15, "up"),
        osd(16, "up"),
        osd(17, "up"),
        osd(18, "up")}},
      {"stray", json::array()}};
  auto parsed = parseOsdTree(tree.dump());
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->up_hosts, (std::set<std::string>{"a", "b", "c", "d", "e"}));
  EXPECT_EQ(parsed->osds.size(), 11u);
  // A host whose only OSDs are all ids >= 10 counts (EKCO counted 2 here: a and b).
  auto only_high = parseOsdTree(
      json{{"nodes", {host(-2, "x", {21}), host(-3, "y", {22}), osd(21, "up"), osd(22, "up")}}}
          .dump());
  ASSERT_TRUE(only_high);
  EXPECT_EQ(only_high->up_hosts.size(), 2u);
}

TEST(ParseOsdTree, DownOsdsDoNotCountAndDownButInOnesAreReported) {
  auto parsed = parseOsdTree(json{
      {"nodes",
       {host(-2, "a", {0}), host(-3, "b", {11}), host(-4, "c", {12}), osd(0, "up"),
        osd(11, "down", 1),
        osd(12, "down", 0)}}}.dump());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->up_hosts, (std::set<std::string>{"a"}));
  EXPECT_EQ(parsed->hosts.size(), 3u);
  EXPECT_THAT(parsed->down_in(), ElementsAre(11));
  EXPECT_THAT(parsed->down(), ElementsAre(11, 12));
  // No OSDs at all (EKCO's "0" case).
  auto empty = parseOsdTree(
      R"({"nodes":[{"id":-1,"name":"default","type":"root","children":[]}],"stray":[]})");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->up_hosts.empty());
}

TEST(ParseOsdTree, RealCephOutputWithIdsAboveNine) {
  auto parsed = parseOsdTree(readTestdata("osd_tree_3_hosts.json"));
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->up_hosts, (std::set<std::string>{"node-1", "node-2", "node-3"}));
  EXPECT_THAT(parsed->down_in(), ElementsAre());
}

TEST(ParseOsdTree, RealCephOutputWithAHostDown) {
  auto parsed = parseOsdTree(readTestdata("osd_tree_one_host_down.json"));
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->up_hosts, (std::set<std::string>{"node-1", "node-2"}));
  EXPECT_THAT(parsed->down_in(), ElementsAre(12));
  // With no pool holding data, Ceph says the down OSD is safe to destroy.
  EXPECT_EQ(answer(readTestdata("safe_to_destroy_empty_cluster.json"), {12}), true);
}

TEST(ParseOsdTree, MalformedInputIsAOneLineParseError) {
  for (const char* bad :
       {"", "HEALTH_OK", "[]", R"({"nodes":{}})", R"({"nodes":[1]})",
        R"({"nodes":[{"id":"x","type":"osd"}]})", R"({"nodes":[{"id":-2,"type":"host"}]})",
        R"({"nodes":[{"id":-2,"type":"host","name":"a","children":"0"}]})"}) {
    auto parsed = parseOsdTree(bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.error().code(), base::ErrorCode::kParse);
    EXPECT_THAT(parsed.error().message(), HasSubstr("ceph osd tree -f json: "));
    EXPECT_EQ(parsed.error().message().find('\n'), std::string::npos);
  }
}

TEST(ReplicationFactor, ClampsTheHostCountBetweenMinAndMax) {
  EXPECT_EQ(replicationFactor(0, 1, 3), 1);
  EXPECT_EQ(replicationFactor(2, 1, 3), 2);
  EXPECT_EQ(replicationFactor(5, 1, 3), 3);
  EXPECT_EQ(replicationFactor(1, 2, 3), 2);
}

TEST(DecidePoolSize, FollowsUpAtOnceAndDownOnlyAfterTheHoldDownWithNoOsdDownButIn) {
  struct Case {
    std::int64_t current, factor;
    PoolPolicy policy;
    std::optional<std::int64_t> floor;
    std::vector<std::int64_t> down_in;
    std::optional<std::int64_t> want;
    const char* reason;
  };
  const auto follow = PoolPolicy::kFollow;
  const auto raise = PoolPolicy::kRaiseOnly;
  const Case cases[] = {
      {1, 1, follow, 1, {}, std::nullopt, "as wanted"},               // EKCO "stay"
      {1, 3, follow, std::nullopt, {}, 3, "raise size 1 -> 3"},       // EKCO "1 -> 3", at once
      {2, 3, raise, std::nullopt, {}, 3, "raise size 2 -> 3"},        // filesystem/object store
      {3, 2, raise, 2, {}, std::nullopt, "only raised"},              // never lowered
      {3, 2, follow, std::nullopt, {}, std::nullopt, "held until"},   // hold-down not yet passed
      {3, 2, follow, 3, {}, std::nullopt, "held (the count was 3"},   // 3 -> 2 -> 3 inside it
      {3, 2, follow, 2, {11}, std::nullopt, "down but in (osd.11)"},  // degraded: no decrease
      {3, 2, follow, 2, {}, 2, "lower size 3 -> 2"},                  // lasted: lowered
      {3, 1, follow, 2, {}, 2, "lower size 3 -> 2"},                  // only to the window's max
  };
  for (const Case& c : cases) {
    auto d = decidePoolSize(c.current, c.factor, c.policy, c.floor, c.down_in);
    EXPECT_EQ(d.set, c.want) << c.current << "->" << c.factor << " " << d.reason;
    EXPECT_THAT(d.reason, HasSubstr(c.reason));
    EXPECT_EQ(d.decrease, d.set && *d.set < c.current);
  }
}

TEST(HoldDown, AFlappingCountNeverOpensADecreaseAndASteadyOneDoesAfterTheHoldDown) {
  HoldDown hold(minutes(10));
  base::MonoTime t{std::chrono::hours(1)};
  hold.observe(3, t);
  EXPECT_EQ(hold.decreaseFloor(t), std::nullopt);  // a new leader waits the full hold-down
  t += minutes(11);
  hold.observe(3, t);
  EXPECT_EQ(hold.decreaseFloor(t), 3);
  // 3 -> 2 -> 3 within the hold-down, then 2 again: the window still holds a 3.
  hold.observe(2, t + minutes(1));
  hold.observe(3, t + minutes(4));
  hold.observe(2, t + minutes(6));
  for (int m : {1, 4, 6, 10, 15}) EXPECT_EQ(hold.decreaseFloor(t + minutes(m)), 3) << m;
  // 2 for longer than the hold-down since the last 3 ended (minute 6).
  hold.observe(2, t + minutes(16) + std::chrono::seconds(1));
  EXPECT_EQ(hold.decreaseFloor(t + minutes(16) + std::chrono::seconds(1)), 2);
  // Exactly the hold-down is not longer than it.
  HoldDown exact(minutes(10));
  exact.observe(1, t);
  EXPECT_EQ(exact.decreaseFloor(t + minutes(10)), std::nullopt);
}

TEST(MonAndMgrCounts, OnlyEverRaised) {
  EXPECT_EQ(desiredMonCount(1, 1), std::nullopt);  // EKCO "stay 1"
  EXPECT_EQ(desiredMonCount(1, 2), std::nullopt);
  EXPECT_EQ(desiredMonCount(1, 3), 3);             // EKCO "increase"
  EXPECT_EQ(desiredMonCount(3, 1), std::nullopt);  // ekco#26: never 3 -> 1
  EXPECT_EQ(desiredMonCount(5, 3), std::nullopt);
  EXPECT_EQ(desiredMgrCount(1, 1), std::nullopt);  // EKCO "stay"
  EXPECT_EQ(desiredMgrCount(1, 2), 2);             // EKCO "1 -> 2"
  EXPECT_EQ(desiredMgrCount(2, 1), std::nullopt);
}

json cephCluster(json storage) {
  return {{"metadata", {{"name", "rook-ceph"}, {"resourceVersion", "42"}}},
          {"spec", {{"storage", storage}}}};
}

TEST(StorageNodesAppendPatch, AppendsMissingNodesOnlyAndNeverWithUseAllNodes) {
  // EKCO "growth 1 -> 3".
  auto patch = storageNodesAppendPatch(
      cephCluster(
          {{"useAllNodes", false}, {"nodes", {{{"name", "a"}, {"devices", {{{"name", "sdb"}}}}}}}}),
      {"c", "a", "b"});
  ASSERT_TRUE(patch);
  EXPECT_EQ(*patch, json::parse(R"([{"op":"test","path":"/metadata/resourceVersion","value":"42"},
    {"op":"add","path":"/spec/storage/nodes/-","value":{"name":"b"}},
    {"op":"add","path":"/spec/storage/nodes/-","value":{"name":"c"}}])"));
  // No list yet.
  auto first = storageNodesAppendPatch(cephCluster({{"useAllNodes", false}}), {"a"});
  ASSERT_TRUE(first);
  EXPECT_EQ((*first)[1],
            json::parse(R"({"op":"add","path":"/spec/storage/nodes","value":[{"name":"a"}]})"));
  // Nothing missing; useAllNodes (the issue: off, unlike EKCO which turned it off).
  EXPECT_FALSE(storageNodesAppendPatch(cephCluster({{"nodes", {{{"name", "a"}}}}}), {"a"}));
  EXPECT_FALSE(storageNodesAppendPatch(cephCluster({{"useAllNodes", true}}), {"a"}));
}

json filesystemWithPreferred(int n) {
  json terms = json::array();
  for (int i = 0; i < n; ++i) terms.push_back({{"weight", 100}});
  return {{"spec",
           {{"metadataServer",
             {{"placement",
               {{"podAntiAffinity",
                 {{"preferredDuringSchedulingIgnoredDuringExecution", terms}}}}}}}}}};
}

TEST(MdsPlacement, OnlyKurlsSingleNodePlacementIsReplacedAndThePatchIsEkcos) {
  EXPECT_TRUE(hasSingleNodeMdsPlacement(filesystemWithPreferred(2)));
  EXPECT_FALSE(hasSingleNodeMdsPlacement(filesystemWithPreferred(1)));
  EXPECT_FALSE(hasSingleNodeMdsPlacement(filesystemWithPreferred(3)));
  EXPECT_FALSE(hasSingleNodeMdsPlacement(json::object()));
  const json anti =
      multiNodeMdsPlacementPatch()["spec"]["metadataServer"]["placement"]["podAntiAffinity"];
  const json required = anti["requiredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(required.size(), 1u);
  EXPECT_EQ(required[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(required[0]["labelSelector"]["matchExpressions"][0]["values"][0], "rook-ceph-mds");
  const json preferred = anti["preferredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(preferred.size(), 1u);  // after the merge the marker (2 terms) is gone: idempotent
  EXPECT_EQ(preferred[0]["weight"], 100);
  EXPECT_EQ(preferred[0]["podAffinityTerm"]["topologyKey"], "topology.kubernetes.io/zone");
}

TEST(CephCsiResources, EkcosValuesForEveryKeyAndNoPatchWhenTheyAreSet) {
  const auto& table = cephCsiResources();
  ASSERT_EQ(table.size(), 6u);
  EXPECT_EQ(table[0].first, "CSI_RBD_PROVISIONER_RESOURCE");
  EXPECT_THAT(table[0].second, HasSubstr("- name : csi-provisioner\n  resource:\n    requests:\n"
                                         "      memory: 128Mi\n      cpu: 100m\n    limits:\n"
                                         "      memory: 256Mi\n      cpu: 200m\n"));
  EXPECT_THAT(table[0].second, HasSubstr("- name : csi-omap-generator\n  resource:\n    requests:\n"
                                         "      memory: 512Mi\n      cpu: 250m\n    limits:\n"
                                         "      memory: 1Gi\n      cpu: 500m\n"));
  EXPECT_THAT(table[1].second, HasSubstr("- name : driver-registrar\n  resource:\n    requests:\n"
                                         "      memory: 128Mi\n      cpu: 50m\n"));
  auto patch = cephCsiResourcesPatch({{"data", {{"ROOK_LOG_LEVEL", "INFO"}}}});
  ASSERT_TRUE(patch);
  EXPECT_EQ((*patch)["data"].size(), 6u);
  EXPECT_FALSE((*patch)["data"].contains("ROOK_LOG_LEVEL"));  // a merge patch leaves it
  json set = {{"data", (*patch)["data"]}};
  EXPECT_FALSE(cephCsiResourcesPatch(set));
  set["data"]["CSI_NFS_PLUGIN_RESOURCE"] = "changed by hand";
  EXPECT_TRUE(cephCsiResourcesPatch(set));
}

TEST(SafeToDestroy, ReadsTheJsonNotTheExitStatus) {
  // Real Ceph 16 answers (the fixture): -f json exits 0 even when it says no.
  EXPECT_EQ(
      answer(R"({"safe_to_destroy":[],"active":[11],"missing_stats":[],"stored_pgs":[]})", {11}),
      false);
  EXPECT_EQ(answer(R"({"safe_to_destroy":[11,12],"active":[],"missing_stats":[],"stored_pgs":[]})",
                   {11, 12}),
            true);
  EXPECT_EQ(answer(R"({"safe_to_destroy":[11],"active":[12]})", {11, 12}), false);
  EXPECT_FALSE(safeToDestroy("Error EAGAIN", {1}));
}

}  // namespace
}  // namespace ekco::rook
