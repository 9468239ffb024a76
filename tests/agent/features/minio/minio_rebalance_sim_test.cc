// minio-ha's rebalancing (agent/features/minio/minio_rebalance.h) against ekco-kubesim as the ekco
// ServiceAccount (deploy/ and deploy-minio/ RBAC enforced, no request forbidden), with ha-minio's
// pods pointing at real S3 servers on loopback whose MinIO health endpoints answer as a test
// says (tests/s3/s3rver/serve.js; one answers 412 in maintenance mode): one pod per pass, its PVC
// deleted before it, only a pod whose MinIO answers 200 with maintenance=true, the guards checked
// again right before deleting, nothing under --dry-run or while a storage migration exists, and
// the 5-minute rule on the injected clock; and the real `ekco agent` (with and without
// --dry-run) showing it in /status. (The decision's tables: minio_rebalance_test.cc.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include <map>
#include <string>
#include <vector>

#include "agent/features/minio/minio_ha.h"
#include "agent/features/minio/minio_rebalance.h"
#include "agent/policy/storage_migration.h"
#include "agent/serve/health_server.h"
#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "tests/agent/features/minio/minio_ha_fixture.h"
#include "tests/agent/process_support.h"
#include "tests/kubesim/store/store.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;

const base::WallTime kStart = *kube::parseRfc3339("2030-03-01T12:00:00Z");

kube::NodeRecord readyNode(const std::string& name) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  n.conditions.push_back({.type = kube::Atom("Ready"), .status = kube::Atom("True")});
  return n;
}

// A pod of ha-minio as the StatefulSet controller makes it: claim minio-data-<name>.
json haPod(int ordinal, const std::string& host_ip, int port) {
  const std::string name = "ha-minio-" + std::to_string(ordinal);
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "minio"}, {"labels", {{"app", "ha-minio"}}}}},
      {"spec",
       {{"nodeName", "node-" + host_ip},
        {"volumes",
         {{{"name", "minio-data"},
           {"persistentVolumeClaim", {{"claimName", "minio-data-" + name}}}}}},
        {"containers",
         {{{"name", "minio"}, {"image", "minio/minio"}, {"ports", {{{"containerPort", port}}}}}}}}},
      {"status",
       {{"phase", "Running"},
        {"hostIP", host_ip},
        {"podIP", "127.0.0.1"},
        {"conditions",
         {{{"type", "PodScheduled"}, {"status", "True"}},
          {{"type", "Ready"}, {"status", "True"}}}}}}};
}

json haClaim(int ordinal) {
  return {
      {"apiVersion", "v1"},
      {"kind", "PersistentVolumeClaim"},
      {"metadata",
       {{"name", "minio-data-ha-minio-" + std::to_string(ordinal)}, {"namespace", "minio"}}},
      {"spec",
       {{"accessModes", {"ReadWriteOnce"}}, {"resources", {{"requests", {{"storage", "10Gi"}}}}}}}};
}

// kURL's MinIO after the migration: no Deployment minio, ha-minio at its desired scale.
std::vector<json> haMinioObjects(int replicas) {
  return {
      {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "minio"}}}},
      {{"apiVersion", "storage.k8s.io/v1"},
       {"kind", "StorageClass"},
       {"metadata", {{"name", "openebs"}}},
       {"provisioner", "openebs.io/local"}},
      {{"apiVersion", "apps/v1"},
       {"kind", "StatefulSet"},
       {"metadata",
        {{"name", "ha-minio"},
         {"namespace", "minio"},
         {"annotations", {{"kurl.sh/desired-scale", std::to_string(replicas)}}}}},
       {"spec",
        {{"replicas", replicas},
         {"serviceName", "ha-minio"},
         {"selector", {{"matchLabels", {{"app", "ha-minio"}}}}},
         {"template",
          {{"metadata", {{"labels", {{"app", "ha-minio"}}}}},
           {"spec", {{"containers", {{{"name", "minio"}, {"image", "minio/minio"}}}}}}}},
         {"volumeClaimTemplates",
          {{{"metadata", {{"name", "minio-data"}}},
            {"spec",
             {{"accessModes", {"ReadWriteOnce"}},
              {"resources", {{"requests", {{"storage", "10Gi"}}}}}}}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata", {{"name", "minio"}, {"namespace", "minio"}}},
       {"spec",
        {{"selector", {{"app", "ha-minio"}}},
         {"ports", {{{"port", 80}, {"targetPort", 9000}, {"protocol", "TCP"}}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "Secret"},
       {"metadata", {{"name", "minio-credentials"}, {"namespace", "minio"}}},
       {"data", {{"MINIO_ACCESS_KEY", "UzNSVkVS"}, {"MINIO_SECRET_KEY", "UzNSVkVS"}}}},
  };
}

class MinioRebalanceSimTest : public ::testing::Test {
 protected:
  // `placement`: each pod's hostIP, and whether its MinIO is safe to lose (its S3 server answers
  // 200 in maintenance mode) or not (412).
  struct Placement {
    std::string host_ip;
    bool safe = true;
  };
  void start(const std::vector<Placement>& placement, std::vector<json> extra = {}) {
    std::string error;
    safe_ = s3::testing::S3rver::start(dir_.path() + "/safe", &error);
    ASSERT_TRUE(safe_) << error;
    unsafe_ = s3::testing::S3rver::start(dir_.path() + "/unsafe", &error);
    ASSERT_TRUE(unsafe_) << error;
    unsafe_->setMaintenanceHealth(412);  // healthy, but not without it
    std::vector<json> objects = haMinioObjects(static_cast<int>(placement.size()));
    for (std::size_t i = 0; i < placement.size(); ++i) {
      const int port = placement[i].safe ? safe_->port() : unsafe_->port();
      objects.push_back(haPod(static_cast<int>(i), placement[i].host_ip, port));
      objects.push_back(haClaim(static_cast<int>(i)));
    }
    objects.insert(objects.end(), extra.begin(), extra.end());
    ASSERT_NO_FATAL_FAILURE(
        cluster_.start(dir_.path(), std::move(objects), {"/deploy", "/deploy-minio"}, wall_));
    nodes_ = {readyNode("node-a"), readyNode("node-b"), readyNode("node-c")};
  }
  void TearDown() override { cluster_.expectEveryRequestAllowed(); }

  MinioHa controller(bool dry_run = false) {
    return MinioHa([this] { return ObservedNodes{.synced = true, .nodes = nodes_}; },
                   cluster_.client(), clock_,
                   {.interval = milliseconds(60'000),
                    .tmp_dir = dir_.path(),
                    .effects = {.dry_run = dry_run,
                                .is_leader_fresh = [] { return true; },
                                .record_event =
                                    [this](const kube::EventSpec& e) {
                                      ASSERT_TRUE(cluster_.client().recordEvent(e));
                                      events_.push_back(e.reason + " " + e.involved_name);
                                    }}});
  }
  std::string pass(MinioHa& c) {
    auto r = c.reconcile();
    EXPECT_TRUE(r) << r.error().message();
    return r ? r->summary : r.error().message();
  }
  // "delete persistentvolumeclaims minio-data-ha-minio-0", ... in the order the API saw them.
  std::vector<std::string> deletes() {
    std::vector<std::string> out;
    for (const auto& r : cluster_.server().requestLog()) {
      if (r.verb == "delete") out.push_back(r.resource + " " + r.name);
    }
    return out;
  }
  bool podGone(const std::string& name) {
    auto pod = cluster_.server().get("pods", "minio", name);
    return !pod || (*pod)["metadata"].contains("deletionTimestamp");
  }
  bool claimExists(int ordinal) {
    return cluster_.server()
        .get("persistentvolumeclaims", "minio", "minio-data-ha-minio-" + std::to_string(ordinal))
        .has_value();
  }
  // The StatefulSet controller and the scheduler: the pod back, with a new PVC, on `host_ip`.
  void recreate(int ordinal, const std::string& host_ip) {
    cluster_.server().remove("pods", "minio", "ha-minio-" + std::to_string(ordinal));
    ASSERT_TRUE(cluster_.server().put(haPod(ordinal, host_ip, safe_->port())));
    ASSERT_TRUE(cluster_.server().put(haClaim(ordinal)));
  }
  void putMigrationState(const std::string& migration, const std::string& phase) {
    ASSERT_TRUE(cluster_.server().put(
        {{"apiVersion", "v1"},
         {"kind", "ConfigMap"},
         {"metadata", {{"name", std::string(kStorageMigrationConfigMap)}, {"namespace", "kurl"}}},
         {"data", {{"migration", migration}, {"phase", phase}, {"failure", "test"}}}}));
  }

  ekco::agent::testing::TempDir dir_{"ekco-minio-rebalance"};
  base::SystemClock wall_;           // the API client's and kubesim's
  base::ManualClock clock_{kStart};  // the controller's
  std::unique_ptr<s3::testing::S3rver> safe_;
  std::unique_ptr<s3::testing::S3rver> unsafe_;
  ekco::agent::testing::ServiceAccountCluster cluster_;
  std::vector<kube::NodeRecord> nodes_;
  std::vector<std::string> events_;
};

TEST_F(MinioRebalanceSimTest, OnePodPerPassItsPvcDeletedFirstUntilBalanced) {
  // Four pods on one node of three: max 2, so two must move.
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}}));
  auto c = controller();
  std::string summary = pass(c);
  EXPECT_THAT(summary, HasSubstr("rescheduled ha-minio-0 (PVC minio-data-ha-minio-0 and the pod "
                                 "deleted): over-max: node 10.0.0.1 holds 4 ha-minio pods"));
  EXPECT_EQ(deletes(), (std::vector<std::string>{"persistentvolumeclaims minio-data-ha-minio-0",
                                                 "pods ha-minio-0"}));
  EXPECT_FALSE(claimExists(0));
  EXPECT_TRUE(podGone("ha-minio-0"));
  for (int i = 1; i < 4; ++i) {
    EXPECT_TRUE(claimExists(i)) << i;
    EXPECT_FALSE(podGone("ha-minio-" + std::to_string(i))) << i;
  }
  EXPECT_EQ(events_, std::vector<std::string>{"MinioPodRescheduled ha-minio-0"});
  const json status = c.status();
  EXPECT_EQ(status["rebalance"]["rule"], "over-max");
  EXPECT_EQ(status["rebalance"]["pod"], "ha-minio-0");
  EXPECT_EQ(status["rebalance"]["claim"], "minio-data-ha-minio-0");
  EXPECT_EQ(status["rebalance"]["dry_run"], false);
  // The Event is in the API, on the pod.
  auto& store = cluster_.server().store();
  auto events = store.list(*store.findQualified("events"), "minio", {});
  bool found = false;
  for (const json& e : events.body["items"]) {
    found = found ||
            (e["reason"] == "MinioPodRescheduled" && e["involvedObject"]["name"] == "ha-minio-0" &&
             e["involvedObject"]["kind"] == "Pod");
  }
  EXPECT_TRUE(found);

  // The next passes touch nothing while the moved pod is away.
  summary = pass(c);
  EXPECT_THAT(summary, ::testing::AnyOf(HasSubstr("waiting: ha-minio-0 is terminating"),
                                        HasSubstr("waiting: 3 ha-minio pods for 4 replicas")));
  EXPECT_EQ(deletes().size(), 2u);
  cluster_.server().remove("pods", "minio", "ha-minio-0");
  EXPECT_THAT(pass(c), HasSubstr("waiting: 3 ha-minio pods for 4 replicas"));
  EXPECT_EQ(deletes().size(), 2u);

  // Back on another node: the second one moves, and only it.
  ASSERT_NO_FATAL_FAILURE(recreate(0, "10.0.0.2"));
  EXPECT_THAT(pass(c), HasSubstr("rescheduled ha-minio-1"));
  EXPECT_EQ(deletes(), (std::vector<std::string>{
                           "persistentvolumeclaims minio-data-ha-minio-0", "pods ha-minio-0",
                           "persistentvolumeclaims minio-data-ha-minio-1", "pods ha-minio-1"}));
  ASSERT_NO_FATAL_FAILURE(recreate(1, "10.0.0.3"));
  summary = pass(c);
  EXPECT_THAT(summary, HasSubstr("balanced: 4 ha-minio pods on 3 nodes, 3 Ready (at most 2 per "
                                 "node)"));
  EXPECT_EQ(deletes().size(), 4u);
  EXPECT_EQ(c.status()["rebalance"]["rule"], nullptr);
}

TEST_F(MinioRebalanceSimTest, APodWhoseMinioIsNotHealthyInMaintenanceModeIsNotMoved) {
  // Three pods on 10.0.0.1 whose MinIO answers 412 with maintenance=true (200 without).
  ASSERT_NO_FATAL_FAILURE(
      start({{"10.0.0.1", false}, {"10.0.0.1", false}, {"10.0.0.1", false}, {"10.0.0.2", true}}));
  auto c = controller();
  for (int i = 0; i < 2; ++i) {
    const std::string summary = pass(c);
    EXPECT_THAT(summary, HasSubstr("waiting: over-max: node 10.0.0.1 holds 3 ha-minio pods"));
    EXPECT_THAT(summary, HasSubstr("no pod there is safe to move (ha-minio-0 answered 412, "
                                   "ha-minio-1 answered 412, ha-minio-2 answered 412 on "
                                   "/minio/health/cluster?maintenance=true)"));
  }
  EXPECT_TRUE(deletes().empty());
  EXPECT_TRUE(events_.empty());
  // MinIO says it can do without them now: one moves.
  unsafe_->setMaintenanceHealth(200);
  EXPECT_THAT(pass(c), HasSubstr("rescheduled ha-minio-0"));
  EXPECT_EQ(deletes(), (std::vector<std::string>{"persistentvolumeclaims minio-data-ha-minio-0",
                                                 "pods ha-minio-0"}));
}

TEST_F(MinioRebalanceSimTest, DryRunPlansAndDeletesNothing) {
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.2"}}));
  auto c = controller(/*dry_run=*/true);
  for (int i = 0; i < 2; ++i) {
    auto r = c.reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->summary, HasSubstr("would reschedule ha-minio-0 (delete PVC "
                                      "minio-data-ha-minio-0, then the pod): over-max"));
    EXPECT_THAT(r->summary, HasSubstr("(dry run)"));
    EXPECT_THAT(r->plan, HasSubstr("would reschedule ha-minio-0"));
  }
  EXPECT_TRUE(deletes().empty());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(claimExists(i));
  EXPECT_TRUE(events_.empty());
  const json status = c.status();
  EXPECT_EQ(status["rebalance"]["dry_run"], true);
  EXPECT_THAT(status["rebalance"]["decision"].get<std::string>(), HasSubstr("(dry run)"));
}

TEST_F(MinioRebalanceSimTest, NothingMovesWhileAStorageMigrationStateExists) {
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}}));
  auto c = controller();
  // Another migration running.
  ASSERT_NO_FATAL_FAILURE(putMigrationState("rook", "copying"));
  EXPECT_THAT(pass(c), HasSubstr("waiting: another storage migration is running"));
  // A failed MinIO migration: a person looks at it first.
  ASSERT_NO_FATAL_FAILURE(putMigrationState("minio", "failed"));
  EXPECT_THAT(pass(c), HasSubstr("no single-replica MinIO left to migrate; rebalance waiting: "
                                 "ConfigMap kurl/ekco-storage-migration exists (minio migration "
                                 "failed)"));
  EXPECT_EQ(c.status()["rebalance"]["decision"],
            "waiting: ConfigMap kurl/ekco-storage-migration exists (minio migration failed)");
  // A MinIO migration running (copying, its source gone: the pass fails, nothing else).
  ASSERT_NO_FATAL_FAILURE(putMigrationState("minio", "copying"));
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("no running app=minio pod"));
  EXPECT_TRUE(deletes().empty());
  // The state gone: the rebalance runs.
  ASSERT_TRUE(
      cluster_.server().remove("configmaps", "kurl", std::string(kStorageMigrationConfigMap)));
  EXPECT_THAT(pass(c), HasSubstr("rescheduled ha-minio-0"));
  EXPECT_EQ(deletes().size(), 2u);
}

TEST_F(MinioRebalanceSimTest, NothingMovesWhileTheOldMinioRemainsOrHaMinioIsUnhealthyOrScaling) {
  ASSERT_NO_FATAL_FAILURE(
      start({{"10.0.0.1", false}, {"10.0.0.1", false}, {"10.0.0.1", false}, {"10.0.0.1", false}}));
  unsafe_->setMaintenanceHealth(200);
  // The single-replica MinIO is still there: its migration comes first (planned under
  // --dry-run, which leaves it alone).
  ASSERT_TRUE(cluster_.server().put(testing::minioObjects(safe_->port(), safe_->port())[2]));
  ASSERT_EQ(testing::minioObjects(0, 0)[2]["kind"], "Deployment");
  auto dry = controller(/*dry_run=*/true);
  EXPECT_THAT(pass(dry), HasSubstr("would migrate MinIO to ha-minio (dry run)"));
  EXPECT_EQ(dry.status()["rebalance"], nullptr);
  ASSERT_TRUE(cluster_.server().remove("deployments.apps", "minio", "minio"));
  auto c = controller();
  // ha-minio reports the cluster unhealthy.
  unsafe_->setHealth(503);
  EXPECT_THAT(pass(c), HasSubstr("rebalance waiting: no ha-minio pod reports "
                                 "/minio/health/cluster 200"));
  // Not yet at the desired scale: scaled this pass, rebalanced later.
  unsafe_->setHealth(200);
  auto sts = cluster_.server().get("statefulsets.apps", "minio", "ha-minio");
  ASSERT_TRUE(sts);
  (*sts)["metadata"]["annotations"]["kurl.sh/desired-scale"] = "6";
  ASSERT_TRUE(cluster_.server().put(*sts));
  EXPECT_THAT(pass(c), HasSubstr("scale ha-minio to 6"));
  EXPECT_EQ(c.status()["rebalance"]["decision"], "waiting: ha-minio is not at its desired scale");
  EXPECT_TRUE(deletes().empty());
}

// ha-minio-3 Pending, unschedulable since kStart, its PVC bound to a local PV on `volume_node`
// (OpenEBS local PV: the PV's kubernetes.io/hostname node affinity).
void pendOnVolumeNode(kubesim::Server& server, int port, const std::string& node) {
  json pending = haPod(3, "", port);
  pending["spec"].erase("nodeName");
  pending["status"] = {{"phase", "Pending"},
                       {"conditions",
                        {{{"type", "PodScheduled"},
                          {"status", "False"},
                          {"reason", "Unschedulable"},
                          {"lastTransitionTime", kube::formatRfc3339(kStart)}}}}};
  server.remove("pods", "minio", "ha-minio-3");
  ASSERT_TRUE(server.put(pending));
  json claim = haClaim(3);
  claim["spec"]["volumeName"] = "pvc-3";
  server.remove("persistentvolumeclaims", "minio", "minio-data-ha-minio-3");
  ASSERT_TRUE(server.put(claim));
  json volume = {
      {"apiVersion", "v1"}, {"kind", "PersistentVolume"}, {"metadata", {{"name", "pvc-3"}}}};
  volume["spec"]["capacity"]["storage"] = "10Gi";
  volume["spec"]["accessModes"] = {"ReadWriteOnce"};
  volume["spec"]["local"]["path"] = "/var/openebs/local/pvc-3";
  volume["spec"]["claimRef"] = {{"namespace", "minio"}, {"name", "minio-data-ha-minio-3"}};
  json expression = {{"key", "kubernetes.io/hostname"}, {"operator", "In"}, {"values", {node}}};
  json term = {{"matchExpressions", json::array({expression})}};
  volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"] = json::array({term});
  ASSERT_TRUE(server.put(volume));
}

TEST_F(MinioRebalanceSimTest, APodPendingForMoreThanFiveMinutesOnTheInjectedClockIsRescheduled) {
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.2"}, {"10.0.0.3"}, {"10.0.0.1"}}));
  // ha-minio-3's node is gone: its local PV pins it there, it cannot be scheduled.
  ASSERT_NO_FATAL_FAILURE(pendOnVolumeNode(cluster_.server(), safe_->port(), "node-d"));
  auto c = controller();
  clock_.advance(std::chrono::minutes(5));
  EXPECT_THAT(pass(c), HasSubstr("waiting: ha-minio-3 is not on a node yet (Pending, "
                                 "unschedulable for 5m00s; rescheduled after 5m if its volume's "
                                 "node is gone)"));
  EXPECT_TRUE(deletes().empty());
  clock_.advance(std::chrono::seconds(1));
  EXPECT_THAT(pass(c), HasSubstr("rescheduled ha-minio-3 (PVC minio-data-ha-minio-3 and the pod "
                                 "deleted): ha-minio-3 has been Pending with PodScheduled=False "
                                 "for 5m01s (more than 5m) and its volume's node node-d is gone"));
  EXPECT_EQ(deletes(), (std::vector<std::string>{"persistentvolumeclaims minio-data-ha-minio-3",
                                                 "pods ha-minio-3"}));
  EXPECT_EQ(c.status()["rebalance"]["rule"], "unschedulable");
  EXPECT_EQ(events_, std::vector<std::string>{"MinioPodRescheduled ha-minio-3"});
}

// Issue 34, item 5: ekco's own reboot drains the node (the minio namespace is not excluded) and
// the reboot takes longer than 5 minutes: the pod is unschedulable meanwhile, and its replica was
// deleted. It is kept while the Node exists, and the API is asked again right before deleting.
TEST_F(MinioRebalanceSimTest, AReplicaWhoseNodeIsRebootingIsKeptHoweverLongItsPodWaits) {
  json node_b = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "node-b"}, {"labels", {{"kubernetes.io/hostname", "node-b"}}}}},
      {"spec", {{"unschedulable", true}}}};
  ASSERT_NO_FATAL_FAILURE(
      start({{"10.0.0.1"}, {"10.0.0.2"}, {"10.0.0.3"}, {"10.0.0.1"}}, {node_b}));
  ASSERT_NO_FATAL_FAILURE(pendOnVolumeNode(cluster_.server(), safe_->port(), "node-b"));
  auto c = controller();
  clock_.advance(std::chrono::hours(2));
  EXPECT_THAT(pass(c), HasSubstr("its volume's node node-b still exists (rebooting or drained?): "
                                 "its data is kept"));
  EXPECT_TRUE(deletes().empty());
  // The cache has lost node-b (a fourth node joined), the API has not: the re-check right before
  // deleting says so.
  nodes_ = {readyNode("node-a"), readyNode("node-c"), readyNode("node-d")};
  EXPECT_THAT(pass(c), HasSubstr("waiting: ha-minio-3 has its volume's node node-b back since the "
                                 "decision; nothing deleted"));
  EXPECT_TRUE(deletes().empty());
  EXPECT_TRUE(claimExists(3));
  // Gone from the API too (the node was removed from the cluster): now it is rescheduled.
  ASSERT_TRUE(cluster_.server().remove("nodes", "", "node-b"));
  EXPECT_THAT(pass(c), HasSubstr("rescheduled ha-minio-3"));
  EXPECT_EQ(deletes(), (std::vector<std::string>{"persistentvolumeclaims minio-data-ha-minio-3",
                                                 "pods ha-minio-3"}));
}

// MinioRebalancer alone, with a health answer that changes between the decision and the act, and
// a leadership that is not fresh.
TEST_F(MinioRebalanceSimTest, TheGuardsAreCheckedAgainRightBeforeDeleting) {
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.2"}}));
  auto sts = cluster_.server().get("statefulsets.apps", "minio", "ha-minio");
  ASSERT_TRUE(sts);
  int asked = 0;
  bool fresh = true;
  MinioRebalancer rebalancer(
      cluster_.client(), clock_,
      {.ns = "minio",
       .health = [&](const std::string&, const std::string& path) -> base::Result<int> {
         EXPECT_EQ(path, "/minio/health/cluster?maintenance=true");
         return ++asked <= 4 ? 200 : 412;  // every pod safe at the decision, not after
       },
       .effects = {.is_leader_fresh = [&] { return fresh; }}});
  auto out = rebalancer.pass(*sts, nodes_);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_FALSE(out->acted);
  EXPECT_EQ(out->summary,
            "waiting: ha-minio-0 is no longer safe to move (/minio/health/cluster?maintenance=true "
            "answered 412) since the decision; nothing deleted");
  EXPECT_EQ(asked, 5);
  // Safe again, but this agent's leadership is not fresh: an error, nothing deleted.
  asked = -100;  // 200 from now on
  fresh = false;
  out = rebalancer.pass(*sts, nodes_);
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code(), base::ErrorCode::kUnavailable);
  EXPECT_TRUE(deletes().empty());
  // The pod re-created between the decision and the act (another uid): nothing deleted.
  asked = -100;
  fresh = true;
  MinioRebalancer racing(
      cluster_.client(), clock_,
      {.ns = "minio", .health = [&](const std::string&, const std::string&) -> base::Result<int> {
         if (++asked == -96) {  // the decision's last answer
           recreate(0, "10.0.0.1");
         }
         return 200;
       }});
  out = racing.pass(*sts, nodes_);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->summary, "waiting: ha-minio-0 was re-created since the decision; nothing deleted");
  EXPECT_TRUE(deletes().empty());
  // A storage migration state written between the decision and the act: nothing deleted.
  asked = 0;
  MinioRebalancer migrating(
      cluster_.client(), clock_,
      {.ns = "minio",
       .migration_namespace = "kurl",
       .health = [&](const std::string&, const std::string&) -> base::Result<int> {
         if (++asked == 5) putMigrationState("rook", "copying");  // the re-check's answer
         return 200;
       }});
  out = migrating.pass(*sts, nodes_);
  ASSERT_TRUE(out) << out.error().message();
  EXPECT_EQ(out->summary,
            "waiting: a storage migration state appeared (rook migration copying) since the "
            "decision; nothing deleted");
  EXPECT_TRUE(deletes().empty());
}

// The real agent, leader, as the ServiceAccount: under --dry-run /status shows the plan and
// nothing is deleted; without it one pod is rescheduled, /status and an Event say so, and the
// passes after it (every second) touch nothing else while that pod is away.
TEST_F(MinioRebalanceSimTest, TheRealAgentShowsTheDecisionInStatusAndMovesOnePod) {
  auto node = [](const std::string& ip) {
    return json{{"apiVersion", "v1"},
                {"kind", "Node"},
                {"metadata", {{"name", "node-" + ip}}},
                {"spec", json::object()},
                {"status",
                 {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
                  {"addresses", {{{"type", "InternalIP"}, {"address", ip}}}}}}};
  };
  ASSERT_NO_FATAL_FAILURE(start({{"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}, {"10.0.0.1"}},
                                {node("10.0.0.1"), node("10.0.0.2"), node("10.0.0.3")}));
  testing::writeMinioAgentFiles(dir_.path(), "1s");
  const std::string socket = dir_.path() + "/agent.sock";
  const std::string log = dir_.path() + "/agent.log";
  auto run = [&](bool dry_run) {
    std::vector<std::string> args = {EKCO_BIN,       "agent",
                                     "--config",     dir_.path() + "/config.yaml",
                                     "--kubeconfig", dir_.path() + "/sa.kubeconfig",
                                     "--node-name",  "node-10.0.0.1",
                                     "--host-root",  dir_.path() + "/host",
                                     "--socket",     socket};
    if (dry_run) args.push_back("--dry-run");
    return testing::spawnLogged(args, log);
  };
  auto status = [&] {
    auto reply = queryHealthSocket(socket, "/status", milliseconds(3000));
    if (!reply || reply->status != 200) return json();
    return json::parse(reply->body, nullptr, false);
  };
  auto rebalance = [&] {
    const json s = status();
    return s.is_object() && s.contains("minio_ha") && s["minio_ha"].is_object()
               ? s["minio_ha"].value("rebalance", json())
               : json();
  };
  auto decision = [&] {
    const json r = rebalance();
    return r.is_object() ? r.value("decision", "") : std::string();
  };

  pid_t agent = run(/*dry_run=*/true);
  ASSERT_GT(agent, 0);
  EXPECT_TRUE(testing::eventually(
      [&] { return decision().starts_with("would reschedule ha-minio-0 (delete PVC"); },
      std::chrono::seconds(30)))
      << status().dump() << "\n"
      << testing::readWholeFile(log);
  EXPECT_EQ(rebalance()["dry_run"], true);
  EXPECT_THAT(decision(), HasSubstr("(dry run)"));
  testing::killAndReap(agent);
  EXPECT_TRUE(deletes().empty());

  agent = run(/*dry_run=*/false);
  json seen;
  ASSERT_GT(agent, 0);
  EXPECT_TRUE(testing::eventually(
      [&] {
        seen = rebalance();
        return seen.is_object() &&
               seen.value("decision", "")
                   .starts_with("rescheduled ha-minio-0 (PVC minio-data-ha-minio-0");
      },
      std::chrono::seconds(30)))
      << status().dump() << "\n"
      << testing::readWholeFile(log);
  EXPECT_EQ(seen["rule"], "over-max");  // as shown while it was the last decision
  // Three more passes: the moved pod is away, nothing else is touched.
  EXPECT_TRUE(testing::eventually([&] { return decision().starts_with("waiting: "); },
                                  std::chrono::seconds(10)))
      << decision();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_THAT(decision(), ::testing::StartsWith("waiting: "));
  testing::killAndReap(agent);
  std::vector<std::string> minio_deletes;
  for (const auto& r : cluster_.server().requestLog()) {
    if (r.verb == "delete" && r.ns == "minio") minio_deletes.push_back(r.resource + " " + r.name);
  }
  EXPECT_EQ(minio_deletes, (std::vector<std::string>{"persistentvolumeclaims minio-data-ha-minio-0",
                                                     "pods ha-minio-0"}));
  auto& store = cluster_.server().store();
  int events = 0;
  const auto listed = store.list(*store.findQualified("events"), "minio", {});
  for (const json& e : listed.body["items"]) {
    events += e.value("reason", "") == "MinioPodRescheduled" ? 1 : 0;
  }
  EXPECT_EQ(events, 1);
}

}  // namespace
}  // namespace ekco::agent
