#include "kube/decode/objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "kube/decode/timestamp.h"

namespace ekco::kube {
namespace {

using base::ErrorCode;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

Json fixture(const std::string& name) {
  std::ifstream in(std::string(EKCO_TESTDATA_DIR) + "/kube/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

base::WallTime ts(const char* text) { return *parseRfc3339(text); }

TEST(ParseNode, ReadsTheFieldsControllersUse) {
  auto node = parseNode(fixture("node.json"));
  ASSERT_TRUE(node) << node.error().message();
  EXPECT_EQ(node->name, "node-a");
  EXPECT_EQ(node->uid, "0f7f4c3e-8d1a-4b8e-9e57-3c7d4c1a2b10");
  EXPECT_EQ(node->resource_version, "48213");
  EXPECT_EQ(node->labels.at("kubernetes.io/hostname"), "node-a");
  EXPECT_TRUE(node->control_plane);
  EXPECT_TRUE(node->unschedulable);
  ASSERT_EQ(node->taints.size(), 2u);
  EXPECT_EQ(node->taints[0].key, "node-role.kubernetes.io/control-plane");
  EXPECT_EQ(node->taints[0].effect, "NoSchedule");
  EXPECT_FALSE(node->taints[0].time_added);
  EXPECT_EQ(node->taints[1].time_added, ts("2026-11-22T04:08:28Z"));
  const NodeCondition* ready = node->condition("Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ(ready->status, "Unknown");
  EXPECT_EQ(ready->last_transition_time, ts("2026-11-22T04:08:28.123456Z"));
  EXPECT_EQ(ready->last_heartbeat_time, ts("2026-11-22T04:03:11Z"));
  EXPECT_EQ(node->condition("DiskPressure"), nullptr);
  ASSERT_EQ(node->addresses.size(), 2u);
  EXPECT_EQ(node->addresses[0].type, "InternalIP");
  EXPECT_EQ(node->addresses[0].address, "10.0.0.11");
}

TEST(ParseNode, TheOlderMasterLabelAlsoMeansControlPlane) {
  auto node = parseNode(
      Json::parse(R"({"metadata":{"name":"m","labels":{"node-role.kubernetes.io/master":""}}})"));
  ASSERT_TRUE(node);
  EXPECT_TRUE(node->control_plane);
  auto worker = parseNode(Json::parse(R"({"metadata":{"name":"w"}})"));
  ASSERT_TRUE(worker);
  EXPECT_FALSE(worker->control_plane);
  EXPECT_FALSE(worker->unschedulable);
  EXPECT_TRUE(worker->taints.empty());
}

TEST(ParseNode, AWrongTypeIsAParseErrorNamingObjectAndField) {
  auto node =
      parseNode(Json::parse(R"({"metadata":{"name":"node-a"},"spec":{"unschedulable":"yes"}})"));
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code(), ErrorCode::kParse);
  EXPECT_EQ(node.error().message(),
            "parse Node node-a: spec.unschedulable: expected boolean, got string");
}

// Found with tests/fuzz/list_watch_fuzz.cc's one-line check: the object's name and a label key
// went raw into the message.
TEST(ParseNode, TheNameAndKeysInAParseErrorAreEscaped) {
  auto node = parseNode(Json::parse(
      R"({"metadata":{"name":"a\n\u001b[2J","labels":{"k\r":1}},"spec":{"unschedulable":1}})"));
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().message(),
            R"(parse Node a\n\x1b[2J: metadata.labels.k\r: expected string, got number)");
}

TEST(ParseNode, ABadTimestampIsAParseErrorNamingTheField) {
  auto node = parseNode(Json::parse(
      R"({"metadata":{"name":"n"},"status":{"conditions":[{"type":"Ready","lastTransitionTime":"yesterday"}]}})"));
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().code(), ErrorCode::kParse);
  EXPECT_THAT(node.error().message(),
              HasSubstr("parse Node n: status.conditions[0].lastTransitionTime: timestamp"));
}

TEST(ParseNode, GarbageJsonIsAParseErrorNotACrash) {
  for (const char* garbage :
       {R"([1,2,3])", R"("node")", R"(null)", R"({"metadata":[]})",
        R"({"metadata":{"labels":{"a":1}}})", R"({"spec":{"taints":{}}})",
        R"({"spec":{"taints":[7]}})", R"({"status":{"addresses":[{"type":3}]}})"}) {
    auto node = parseNode(Json::parse(garbage));
    ASSERT_FALSE(node) << garbage;
    EXPECT_EQ(node.error().code(), ErrorCode::kParse) << garbage;
  }
}

TEST(ParsePod, ReadsTheFieldsControllersUse) {
  auto pod = parsePod(fixture("pod.json"));
  ASSERT_TRUE(pod) << pod.error().message();
  EXPECT_EQ(pod->ns, "rook-ceph");
  EXPECT_EQ(pod->name, "rook-ceph-osd-0-6d8f9c7b5-x2x9q");
  EXPECT_EQ(pod->uid, "2b5d6e7f-1a2b-4c3d-9e8f-0a1b2c3d4e5f");
  EXPECT_EQ(pod->node_name, "node-a");
  EXPECT_EQ(pod->phase, "Running");
  EXPECT_EQ(pod->labels.at("app"), "rook-ceph-osd");
  EXPECT_EQ(pod->deletion_timestamp, ts("2026-11-22T04:10:00Z"));
  EXPECT_EQ(pod->deletion_grace_period_seconds, 30);
  ASSERT_NE(pod->controllerRef(), nullptr);
  EXPECT_EQ(pod->controllerRef()->kind, "ReplicaSet");
  EXPECT_EQ(pod->controllerRef()->name, "rook-ceph-osd-0-6d8f9c7b5");
  EXPECT_THAT(pod->pvc_claim_names, ElementsAre("set1-data-0-abcde"));
  EXPECT_THAT(pod->volume_kinds,
              ElementsAre("persistentVolumeClaim", "hostPath", "emptyDir", "projected"));
  ASSERT_EQ(pod->container_statuses.size(), 2u);
  EXPECT_EQ(pod->container_statuses[0].name, "osd");
  EXPECT_TRUE(pod->container_statuses[0].ready);
  EXPECT_FALSE(pod->container_statuses[1].ready);
  EXPECT_FALSE(pod->allContainersReady());
}

TEST(ParsePod, APodNotBeingDeletedHasNoDeletionTimestamp) {
  auto pod = parsePod(Json::parse(R"({"metadata":{"name":"p","namespace":"default"},
      "status":{"containerStatuses":[{"name":"c","ready":true}]}})"));
  ASSERT_TRUE(pod);
  EXPECT_FALSE(pod->deletion_timestamp);
  EXPECT_FALSE(pod->deletion_grace_period_seconds);
  EXPECT_EQ(pod->controllerRef(), nullptr);
  EXPECT_TRUE(pod->allContainersReady());
}

TEST(ParsePod, AMistypedClaimNameIsAParseErrorNamingTheVolume) {
  auto pod = parsePod(Json::parse(
      R"({"metadata":{"name":"p"},"spec":{"volumes":[{"name":"a","emptyDir":{}},{"name":"b","persistentVolumeClaim":{"claimName":5}}]}})"));
  ASSERT_FALSE(pod);
  EXPECT_EQ(
      pod.error().message(),
      "parse Pod p: spec.volumes[1].persistentVolumeClaim.claimName: expected string, got number");
}

TEST(ParseLease, ReadsHolderDurationAndTimes) {
  auto lease = parseLease(fixture("lease.json"));
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_EQ(lease->ns, "kurl");
  EXPECT_EQ(lease->name, "ekco");
  EXPECT_EQ(lease->resource_version, "52310");
  EXPECT_EQ(lease->holder_identity, "node-a");
  EXPECT_EQ(lease->lease_duration_seconds, 15);
  EXPECT_EQ(lease->lease_transitions, 4);
  EXPECT_EQ(lease->acquire_time, ts("2026-11-22T03:00:00Z"));
  EXPECT_EQ(lease->renew_time, ts("2026-11-22T04:08:26.512345Z"));
}

TEST(ParseLease, AnUnheldLeaseHasEmptyFields) {
  auto lease =
      parseLease(Json::parse(R"({"metadata":{"name":"ekco","namespace":"kurl"},"spec":{}})"));
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->holder_identity, "");
  EXPECT_FALSE(lease->lease_duration_seconds);
  EXPECT_FALSE(lease->renew_time);
  EXPECT_EQ(lease->lease_transitions, 0);
}

TEST(ParseLease, AFractionalDurationIsAParseError) {
  auto lease =
      parseLease(Json::parse(R"({"metadata":{"name":"l"},"spec":{"leaseDurationSeconds":1.5}})"));
  ASSERT_FALSE(lease);
  EXPECT_EQ(lease.error().message(),
            "parse Lease l: spec.leaseDurationSeconds: expected integer, got number");
}

}  // namespace
}  // namespace ekco::kube
