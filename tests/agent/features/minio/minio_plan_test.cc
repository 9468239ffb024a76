// minio-ha's decision alone (agent/features/minio/minio_plan.h): views in, steps out, no API and
// no S3 server. What the steps do against kubesim and real S3 servers: minio_ha_test.cc.
#include "agent/features/minio/minio_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ekco::agent {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using Step = MinioPlan::Step;

std::vector<kube::NodeRecord> readyNodes(int n) {
  std::vector<kube::NodeRecord> out;
  for (int i = 0; i < n; ++i) {
    kube::NodeRecord node;
    node.name = kube::Atom("node-" + std::to_string(i));
    node.conditions.push_back({.type = kube::Atom("Ready"), .status = kube::Atom("True")});
    out.push_back(std::move(node));
  }
  return out;
}

json haMinio(int replicas, const char* desired) {
  return {
      {"metadata", {{"name", "ha-minio"}, {"annotations", {{"kurl.sh/desired-scale", desired}}}}},
      {"spec", {{"replicas", replicas}}}};
}

// Three Ready nodes, the StorageClass, ha-minio at 3 of 3 and healthy, the old Deployment: a
// migration is due.
MinioView due() {
  return MinioView{.nodes_synced = true,
                   .nodes = readyNodes(3),
                   .storage_class = true,
                   .statefulset = haMinio(3, "3"),
                   .deployment = true,
                   .service_selector = {{"app", "minio"}},
                   .healthy_host = "10.32.0.7:9000"};
}

StorageMigrationState migration(const std::string& phase, const std::string& kind = "minio") {
  return StorageMigrationState{.present = true,
                               .migration = kind,
                               .phase = phase,
                               .data = {{"migration", kind}, {"phase", phase}}};
}

MinioPlan plan(const MinioView& view) {
  auto p = planMinio(view);
  EXPECT_TRUE(p) << p.error().message();
  return p ? *p : MinioPlan{};
}

TEST(PlanMinio, StartsAMigrationOnlyWhenEveryConditionHolds) {
  MinioPlan p = plan(due());
  EXPECT_EQ(p.step, Step::kStartMigration);
  EXPECT_FALSE(p.scale_to);
  EXPECT_THAT(p.plan, HasSubstr("migrate the single-replica MinIO to ha-minio (10.32.0.7:9000)"));

  MinioView v = due();
  v.dry_run = true;
  EXPECT_EQ(plan(v).summary, "would migrate MinIO to ha-minio (dry run)");

  v = due();
  v.nodes = readyNodes(2);
  EXPECT_EQ(plan(v).step, Step::kWait);
  EXPECT_EQ(plan(v).summary, "2 Ready nodes: fewer than 3, MinIO left alone");

  v = due();
  v.storage_class = false;
  EXPECT_THAT(plan(v).summary, HasSubstr("no OpenEBS local PV StorageClass"));

  v = due();
  v.statefulset.reset();
  EXPECT_EQ(plan(v).summary, "StatefulSet minio/ha-minio absent: nothing to manage");

  v = due();
  v.healthy_host.clear();
  EXPECT_EQ(plan(v).step, Step::kWait);
  EXPECT_THAT(plan(v).summary, HasSubstr("waiting for ha-minio to report"));
}

TEST(PlanMinio, ScalesHaMinioFirstWhateverComesNext) {
  MinioView v = due();
  v.statefulset = haMinio(0, "3");
  MinioPlan p = plan(v);
  EXPECT_EQ(p.scale_to, 3);
  EXPECT_EQ(p.step, Step::kStartMigration);
  EXPECT_THAT(p.plan, HasSubstr("scale ha-minio to 3 (kurl.sh/desired-scale)"));

  v.deployment = false;
  p = plan(v);
  EXPECT_EQ(p.scale_to, 3);
  EXPECT_EQ(p.step, Step::kWait);
  EXPECT_EQ(p.rebalance["decision"], "waiting: ha-minio is not at its desired scale");

  // A read that failed after ha-minio's still lets ha-minio be scaled, then fails the pass.
  v.read_error = base::Error("read Deployment minio: boom", base::ErrorCode::kIo);
  p = plan(v);
  EXPECT_EQ(p.step, Step::kFail);
  EXPECT_EQ(p.scale_to, 3);

  v = due();
  v.statefulset = haMinio(0, "three");
  auto bad = planMinio(v);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("kurl.sh/desired-scale"));
}

TEST(PlanMinio, AMigrationUnderWayGoesOnWhateverTheNodesAndMaintenanceClosesItsWindow) {
  MinioView v = due();
  v.nodes = readyNodes(1);
  v.state = migration("copying");
  EXPECT_EQ(plan(v).step, Step::kContinue);
  v.paused = true;
  EXPECT_EQ(plan(v).step, Step::kCloseWindow);

  v = due();
  v.state = migration("copying", "rook");
  EXPECT_EQ(plan(v).step, Step::kWait);
  EXPECT_THAT(plan(v).summary, HasSubstr("another storage migration is running"));

  v = MinioView{};
  EXPECT_EQ(plan(v).step, Step::kWaitForNodes);
}

TEST(PlanMinio, AFailedMigrationIsNotRetriedAndADisabledServiceIsRestored) {
  MinioView v = due();
  v.state = migration("failed");
  v.state.data["failure"] = "verification: 1 differences";
  MinioPlan p = plan(v);
  EXPECT_EQ(p.step, Step::kWait);
  EXPECT_THAT(p.summary, HasSubstr("the MinIO migration failed: verification: 1 differences"));
  EXPECT_THAT(p.summary, HasSubstr("delete ConfigMap kurl/ekco-storage-migration to retry"));

  v = due();
  v.healthy_host.clear();
  v.service_selector = disabledMinioSelector();
  EXPECT_EQ(plan(v).step, Step::kRestoreService);
}

TEST(PlanMinio, RebalancesOnlyOnceTheOldMinioIsGoneAndHaMinioIsHealthyAtScale) {
  MinioView v = due();
  v.deployment = false;
  MinioPlan p = plan(v);
  EXPECT_EQ(p.step, Step::kRebalance);
  EXPECT_EQ(p.summary, "ha-minio at its desired scale; no single-replica MinIO left to migrate");

  v.healthy_host.clear();
  p = plan(v);
  EXPECT_EQ(p.step, Step::kWait);
  EXPECT_EQ(p.rebalance["decision"], "waiting: no ha-minio pod reports /minio/health/cluster 200");

  v = due();
  v.deployment = false;
  v.state = migration("failed");
  p = plan(v);
  EXPECT_EQ(p.step, Step::kWait);
  EXPECT_THAT(p.summary, HasSubstr("rebalance waiting: ConfigMap kurl/ekco-storage-migration"));
}

TEST(PlanMinio, TheOfflineWindowIsTheRunningPhasesBeforeCleaningUp) {
  for (const char* phase : {"stopping-writes", "copying", "verifying", "switching"}) {
    EXPECT_TRUE(inOfflineWindow(migration(phase))) << phase;
  }
  EXPECT_FALSE(inOfflineWindow(migration("cleaning-up")));
  EXPECT_FALSE(inOfflineWindow(migration("failed")));
  EXPECT_FALSE(inOfflineWindow(migration("copying", "rook")));
  StorageMigrationState recorded = migration("copying");
  EXPECT_EQ(recordedSelector(recorded), (json{{"app", "minio"}}));
  recorded.data["service-selector"] = R"({"app":"minio","tier":"storage"})";
  EXPECT_EQ(recordedSelector(recorded), (json{{"app", "minio"}, {"tier", "storage"}}));
}

}  // namespace
}  // namespace ekco::agent
