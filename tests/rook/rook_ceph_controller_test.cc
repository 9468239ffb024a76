// rook-ceph against ekco-kubesim as the ekco ServiceAccount (deploy/ and deploy-rook-ceph/ RBAC
// enforced) with kURL's Rook custom resources: every rule in one pass through pods/exec's scripted
// `ceph` replies, dry run, the fencing check, and, with a `ceph` whose host count changes (a test
// PodExecutor), the hold-down: a flapping 3 -> 2 -> 3 lowers nothing.
#include <algorithm>
#include <map>

#include "base/os/process.h"

#include "tests/rook/rook_ceph_support.h"

namespace ekco::agent::rook_testing {
namespace {

using std::chrono::minutes;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string osdTree(const std::vector<std::pair<std::string, bool>>& hosts) {
  json nodes = json::array();
  int id = 9;  // ids above 9, which EKCO's pattern never saw
  for (const auto& [host, up] : hosts) {
    ++id;
    nodes.push_back({{"id", -id}, {"name", host}, {"type", "host"}, {"children", {id}}});
    nodes.push_back({{"id", id},
                     {"name", "osd." + std::to_string(id)},
                     {"type", "osd"},
                     {"status", up ? "up" : "down"},
                     {"reweight", 1}});
  }
  return json{{"nodes", nodes}, {"stray", json::array()}}.dump();
}

// `ceph` as a test double: the tree, the built-in pool's size, safe-to-destroy's answer.
class FakeCeph final : public kube::PodExecutor {
 public:
  base::Result<kube::ExecResult> exec(const kube::ExecRequest& r) override {
    commands.push_back(base::formatArgv(r.command));
    const auto& c = r.command;
    auto is = [&](std::initializer_list<const char*> prefix) {
      return c.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), c.begin());
    };
    if (is({"ceph", "osd", "tree"})) return kube::ExecResult{.stdout_data = tree};
    if (is({"ceph", "osd", "pool", "ls"})) {
      return kube::ExecResult{.stdout_data = R"(["device_health_metrics","replicapool"])"};
    }
    if (is({"ceph", "osd", "pool", "get"})) {
      return kube::ExecResult{.stdout_data = json{{"size", builtin_size}}.dump()};
    }
    if (is({"ceph", "osd", "pool", "set"}) && c[5] == "size") builtin_size = std::stoi(c[6]);
    if (is({"ceph", "osd", "safe-to-destroy"})) {
      return kube::ExecResult{.stdout_data = safe ? R"({"safe_to_destroy":[10,11,12]})"
                                                  : R"({"safe_to_destroy":[],"active":[12]})"};
    }
    return kube::ExecResult{};
  }
  std::string tree;
  int builtin_size = 1;
  bool safe = true;
  std::vector<std::string> commands;
};

class RookCephTest : public RookClusterTest {};

TEST_F(RookCephTest, ThreeHostsRaiseEverythingOnceWithAnEventPerChange) {
  std::vector<json> objects = kurlRookObjects();
  for (const char* n : {"node-1", "node-2", "node-3"}) objects.push_back(readyNode(n));
  startCluster(objects,
               {{.command_prefix = {"ceph", "osd", "tree"},
                 .stdout_data = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", true}})},
                {.command_prefix = {"ceph", "osd", "pool", "ls"},
                 .stdout_data = R"(["device_health_metrics","replicapool"])"},
                {.command_prefix = {"ceph", "osd", "pool", "get"},
                 .stdout_data = R"({"pool":"device_health_metrics","pool_id":1,"size":1})"}});
  setNodes({"node-1", "node-2", "node-3"});
  auto c = controller(options());
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "changed Rook");
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2", "node-3"}));
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 2);
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  const json fs = spec("cephfilesystems", "rook-shared-fs");
  EXPECT_EQ(fs["metadataPool"]["replicated"]["size"], 3);
  EXPECT_EQ(fs["dataPools"][0]["replicated"]["size"], 3);
  const json anti = fs["metadataServer"]["placement"]["podAntiAffinity"];
  EXPECT_EQ(anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
            "kubernetes.io/hostname");
  EXPECT_EQ(anti["preferredDuringSchedulingIgnoredDuringExecution"].size(), 1u);
  EXPECT_EQ(fs["metadataServer"]["activeCount"], 1);  // the merge patch kept the rest
  const json store = spec("cephobjectstores", "rook-ceph-store");
  EXPECT_EQ(store["metadataPool"]["replicated"]["size"], 3);
  EXPECT_EQ(store["dataPool"]["replicated"]["size"], 3);
  const json cm = get("configmaps", "rook-ceph-operator-config");
  EXPECT_EQ(cm["data"]["ROOK_LOG_LEVEL"], "INFO");
  EXPECT_THAT(cm["data"]["CSI_RBD_PLUGIN_RESOURCE"].get<std::string>(),
              HasSubstr("- name : csi-rbdplugin\n"));
  std::vector<std::string> commands;
  for (const auto& e : server_->execLog()) {
    EXPECT_EQ(e.pod, "rook-ceph-tools-5f8d");
    commands.push_back(base::formatArgv(e.command));
  }
  EXPECT_THAT(commands, Contains("ceph osd pool set device_health_metrics size 3"));
  EXPECT_THAT(commands, Contains("ceph osd pool set device_health_metrics min_size 2"));
  EXPECT_THAT(
      events_,
      ElementsAre("rook-ceph-operator-config CephCsiResourcesSet",
                  "rook-shared-fs MdsPlacementUpdated", "rook-ceph StorageNodesAdded",
                  "rook-ceph MonCountRaised", "rook-ceph MgrCountRaised",
                  "replicapool PoolReplicationChanged", "rook-shared-fs PoolReplicationChanged",
                  "rook-ceph-store PoolReplicationChanged", "rook-ceph PoolReplicationChanged"));
  const json s = c->status();
  EXPECT_EQ(s["ceph"]["factor"], 3);
  EXPECT_EQ(s["ceph"]["up_hosts"], json({"node-1", "node-2", "node-3"}));
  EXPECT_EQ(s["history"].size(), 9u);
}

TEST_F(RookCephTest, StorageNodesFollowTheLabelAndLeaveUseAllNodesAndAUserListAlone) {
  std::vector<json> objects = kurlRookObjects();
  json labelled = readyNode("node-2");
  labelled["metadata"]["labels"]["ekco/storage"] = "yes";
  objects.insert(objects.end(), {readyNode("node-1"), labelled, readyNode("node-3")});
  startCluster(objects);
  setNodes({"node-1", "node-2", "node-3"});
  auto o = options();
  o.maintain_storage = true;
  o.storage_nodes_label = "ekco/storage=yes";
  o.mds_placement = o.csi_resources = false;
  auto c = controller(o);
  (void)c->reconcile();  // `ceph osd tree` has no scripted reply: an error after step 3a
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2"}));
  // A node that is not Ready is not added.
  json not_ready = readyNode("node-3");
  not_ready["status"]["conditions"][0]["status"] = "False";
  auto record = kube::projectNode(not_ready);
  ASSERT_TRUE(record);
  nodes_[2] = *record;
  o.storage_nodes_label.clear();
  (void)controller(o)->reconcile();
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2"}));
  // The user manages the list: node-3 Ready again, not added.
  setNodes({"node-1", "node-2", "node-3"});
  o.user_managed_nodes = true;
  (void)controller(o)->reconcile();
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2"}));
  // useAllNodes: nothing appended.
  o.user_managed_nodes = false;
  json cluster = get("cephclusters.ceph.rook.io", "rook-ceph");
  cluster["spec"]["storage"]["useAllNodes"] = true;
  ASSERT_TRUE(server_->put(cluster));
  (void)controller(o)->reconcile();
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2"}));
  EXPECT_EQ(events_, (std::vector<std::string>{"rook-ceph StorageNodesAdded"}));
}

TEST_F(RookCephTest, AFlappingHostCountWithinTheHoldDownLowersNothing) {
  std::vector<json> objects = kurlRookObjects();
  startCluster(objects);
  setNodes({"node-1", "node-2", "node-3"});
  FakeCeph ceph;
  ceph.tree = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", true}});
  auto c = controller(options(), &ceph);
  ASSERT_TRUE(c->reconcile());
  ASSERT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  const auto settled = events_.size();
  // 3 -> 2 -> 3 -> 2 hosts, a pass a minute, for 30 minutes: the count was 3 within every
  // 10-minute window, so nothing is lowered.
  for (int minute = 1; minute <= 30; ++minute) {
    clock_.advance(minutes(1));
    const bool third_up = minute % 8 >= 4;
    ceph.tree = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", third_up}});
    if (!third_up) {  // the host is gone from the tree altogether (its OSDs out and purged)
      ceph.tree = osdTree({{"node-1", true}, {"node-2", true}});
    }
    auto r = c->reconcile();
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3) << minute;
    ASSERT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 3) << minute;
    ASSERT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 2) << minute;
    ASSERT_EQ(ceph.builtin_size, 3) << minute;
  }
  EXPECT_EQ(events_.size(), settled);
  // Two hosts for longer than the hold-down: the block pool and the built-in pool follow; the
  // filesystem and object store pools, and the mon and mgr counts, never come down.
  ceph.tree = osdTree({{"node-1", true}, {"node-2", true}});
  for (int minute = 1; minute <= 10; ++minute) {
    clock_.advance(minutes(1));
    ASSERT_TRUE(c->reconcile());
    ASSERT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3) << minute;
  }
  for (int minute = 11; minute <= 12; ++minute) {
    clock_.advance(minutes(1));
    ASSERT_TRUE(c->reconcile());
  }
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 2);
  EXPECT_EQ(ceph.builtin_size, 2);
  EXPECT_EQ(spec("cephfilesystems", "rook-shared-fs")["metadataPool"]["replicated"]["size"], 3);
  EXPECT_EQ(spec("cephobjectstores", "rook-ceph-store")["dataPool"]["replicated"]["size"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 2);
}

TEST_F(RookCephTest, NoDecreaseWhileOsdsAreDownButInOrWhenCephSaysTheirDataIsNotSafe) {
  startCluster(kurlRookObjects());
  setNodes({"node-1", "node-2", "node-3"});
  FakeCeph ceph;
  ceph.tree = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", true}});
  auto c = controller(options(), &ceph);
  ASSERT_TRUE(c->reconcile());
  // node-3's OSD down but in, for an hour: degraded, nothing lowered.
  ceph.tree = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", false}});
  for (int i = 0; i < 6; ++i) {
    clock_.advance(minutes(10));
    auto r = c->reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->plan, HasSubstr("not lowered while OSDs are down but in (osd.12)"));
  }
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  // Marked out (reweight 0) but Ceph says its data has no other copy yet: refused, one Event.
  json tree = json::parse(ceph.tree);
  tree["nodes"][5]["reweight"] = 0;
  ceph.tree = tree.dump();
  ceph.safe = false;
  const auto before = events_.size();
  for (int i = 0; i < 3; ++i) {
    clock_.advance(minutes(1));
    auto r = c->reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->plan, HasSubstr("says their data has no other copy yet"));
  }
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  EXPECT_EQ(ceph.builtin_size, 3);
  ASSERT_EQ(events_.size(), before + 2);  // the block pool and the built-in pool, once each
  EXPECT_EQ(events_[before], "replicapool ReplicationDecreaseRefused");
  // Once it is safe, lowered.
  ceph.safe = true;
  ASSERT_TRUE(c->reconcile());
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 2);
  EXPECT_EQ(ceph.builtin_size, 2);
}

TEST_F(RookCephTest, DryRunWritesNothingAndStaleLeadershipStopsBeforeTheWrite) {
  std::vector<json> objects = kurlRookObjects();
  startCluster(objects);
  setNodes({"node-1", "node-2", "node-3"});
  FakeCeph ceph;
  ceph.tree = osdTree({{"node-1", true}, {"node-2", true}, {"node-3", true}});
  auto dry = controller(options(/*dry_run=*/true), &ceph);
  auto r = dry->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "would change Rook (dry run)");
  EXPECT_THAT(r->plan, HasSubstr("would append node-2, node-3 to CephCluster"));
  EXPECT_THAT(r->plan, HasSubstr("would CephBlockPool/replicapool: raise size 1 -> 3"));
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 1);
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1"}));
  EXPECT_EQ(ceph.builtin_size, 1);
  EXPECT_TRUE(events_.empty());
  EXPECT_THAT(dry->status()["plan"].dump(), HasSubstr("would append node-2, node-3"));
  EXPECT_EQ(dry->status()["dry_run"], true);

  leader_fresh_ = false;
  auto stale = controller(options(), &ceph)->reconcile();
  ASSERT_FALSE(stale);
  EXPECT_THAT(stale.error().message(), HasSubstr("leadership is not fresh"));
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 1);
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1"}));
  EXPECT_TRUE(events_.empty());
}

TEST_F(RookCephTest, WithoutACephClusterNothingIsDone) {
  startCluster({readyNode("node-1")});
  setNodes({"node-1", "node-2", "node-3"});
  FakeCeph ceph;
  auto c = controller(options(), &ceph);
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "no CephCluster rook-ceph/rook-ceph: nothing to do");
  EXPECT_TRUE(ceph.commands.empty());
  EXPECT_EQ(c->status()["present"], false);
}

}  // namespace
}  // namespace ekco::agent::rook_testing
