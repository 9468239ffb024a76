// rook-ceph on real Ceph output: ekco-kubesim's rook-ceph-tools pod runs the real `ceph` CLI
// against the Ceph fixture (tests/ceph: one mon, one mgr, memstore OSDs with ids above 9 on
// CRUSH hosts node-1..3). As hosts' OSDs come up, the CephCluster's storage nodes, mon and mgr
// counts and the CephBlockPool follow, and the real built-in pool's size is set through
// `ceph osd pool set`; a host going down lowers nothing.
#include "tests/ceph/ceph_fixture.h"
#include "tests/rook/rook_ceph_support.h"

#include <thread>

namespace ekco::agent::rook_testing {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;

class RookCephOnRealCephTest : public RookClusterTest {
 protected:
  // -1 (and, when `must`, a failure) while the pool does not exist.
  std::int64_t realPoolSize(const std::string& pool, bool must = true) {
    auto out = ceph_->ceph({"osd", "pool", "get", pool, "size", "-f", "json"});
    if (must) {
      EXPECT_TRUE(out) << out.error().message();
    }
    return out ? json::parse(*out).value("size", -1) : -1;
  }
  std::unique_ptr<ekco::testing::CephFixture> ceph_;
};

TEST_F(RookCephOnRealCephTest, ReplicationMonsAndMgrsFollowHostsWhoseOsdsComeUp) {
  if (!ekco::testing::CephFixture::available())
    GTEST_SKIP() << "Ceph is not installed (scripts/setup)";
  auto ceph = ekco::testing::CephFixture::start(dir_.path() + "/ceph");
  ASSERT_TRUE(ceph) << ceph.error().message();
  ceph_ = std::move(*ceph);
  ASSERT_TRUE(ceph_->addOsd(10, "node-1"));
  ASSERT_TRUE(ceph_->waitForUpOsds(1, seconds(60)));

  std::vector<json> objects = kurlRookObjects();
  for (const char* n : {"node-1", "node-2", "node-3"}) objects.push_back(readyNode(n));
  startCluster(objects, {ceph_->toolsPodExec()});
  setNodes({"node-1", "node-2", "node-3"});
  auto o = options();
  o.mds_placement = o.csi_resources = false;  // proven in rook_ceph_test.cc
  auto c = controller(o);

  // One host with an up OSD: factor 1, nothing raised; the storage nodes are the Ready nodes.
  // The mgr creates the built-in pool (device_health_metrics on Ceph 16) a moment after start.
  for (int i = 0; i < 100 && realPoolSize("device_health_metrics", false) < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  auto r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(c->status()["ceph"]["up_hosts"], json({"node-1"}));
  EXPECT_EQ(storageNodes(), (std::vector<std::string>{"node-1", "node-2", "node-3"}));
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 1);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 1);
  EXPECT_EQ(realPoolSize("device_health_metrics"), 1);

  // node-2's OSD (id 11) comes up: size 2, two mgrs.
  ASSERT_TRUE(ceph_->addOsd(11, "node-2"));
  ASSERT_TRUE(ceph_->waitForUpOsds(2, seconds(60)));
  clock_.advance(minutes(1));
  r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 2);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 2);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 1);
  EXPECT_EQ(realPoolSize("device_health_metrics"), 2);

  // node-3's OSD (id 12) comes up: size 3, three mons.
  ASSERT_TRUE(ceph_->addOsd(12, "node-3"));
  ASSERT_TRUE(ceph_->waitForUpOsds(3, seconds(60)));
  clock_.advance(minutes(1));
  r = c->reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 3);
  EXPECT_EQ(spec("cephfilesystems", "rook-shared-fs")["metadataPool"]["replicated"]["size"], 3);
  EXPECT_EQ(realPoolSize("device_health_metrics"), 3);
  EXPECT_EQ(c->status()["ceph"]["up_hosts"], json({"node-1", "node-2", "node-3"}));

  // node-3's OSD dies (down, still in): well past the hold-down, nothing is lowered.
  ASSERT_TRUE(ceph_->stopOsd(12));
  ASSERT_TRUE(ceph_->waitForUpOsds(2, seconds(60)));
  for (int i = 0; i < 3; ++i) {
    clock_.advance(minutes(10));
    r = c->reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->plan, HasSubstr("not lowered while OSDs are down but in (osd.12)"));
  }
  EXPECT_EQ(c->status()["ceph"]["down_in"], json({12}));
  EXPECT_EQ(spec("cephblockpools", "replicapool")["replicated"]["size"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mon"]["count"], 3);
  EXPECT_EQ(spec("cephclusters", "rook-ceph")["mgr"]["count"], 2);
  EXPECT_EQ(realPoolSize("device_health_metrics"), 3);
}

}  // namespace
}  // namespace ekco::agent::rook_testing
