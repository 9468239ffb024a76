// The slim cache records: what they keep, what they drop, and that == ignores the rest.
#include "kube/decode/records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/decode/timestamp.h"

namespace ekco::kube {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;

Json nodeJson() {
  return Json::parse(R"({
    "metadata": {"name": "node-a", "uid": "u-1", "resourceVersion": "7",
      "labels": {"kubernetes.io/hostname": "host-a", "node-role.kubernetes.io/master": "",
                 "node-role.kubernetes.io/control-plane": "", "topology.kubernetes.io/zone": "z"},
      "annotations": {"ekco.kurl.sh/cordoned-by": "shutdown", "kubeadm.alpha.kubernetes.io/cri-socket": "x"}},
    "spec": {"unschedulable": true,
      "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                  "timeAdded": "2026-11-22T10:00:00Z"}]},
    "status": {
      "conditions": [{"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "2026-11-22T09:59:00Z",
                      "lastTransitionTime": "2026-11-22T10:00:00Z", "reason": "NodeStatusUnknown"}],
      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "host-a"}],
      "nodeInfo": {"kubeletVersion": "v1.32.4"}}})");
}

TEST(RecordsTest, ANodeKeepsRolesHostnameTaintsConditionsAddressesAndEkcoAnnotations) {
  auto node = projectNode(nodeJson());
  ASSERT_TRUE(node) << node.error().message();
  EXPECT_EQ(node->name, "node-a");
  EXPECT_EQ(node->uid, "u-1");
  EXPECT_THAT(node->roles, ElementsAre(Atom("control-plane"), Atom("master")));
  EXPECT_EQ(node->hostname, "host-a");
  EXPECT_TRUE(node->control_plane);
  EXPECT_TRUE(node->unschedulable);
  ASSERT_NE(node->taint("node.kubernetes.io/unreachable"), nullptr);
  EXPECT_EQ(node->taint("node.kubernetes.io/unreachable")->time_added,
            *parseRfc3339("2026-11-22T10:00:00Z"));
  ASSERT_NE(node->condition("Ready"), nullptr);
  EXPECT_EQ(node->condition("Ready")->status, "Unknown");
  EXPECT_EQ(node->address("InternalIP"), "10.0.0.1");
  EXPECT_EQ(node->address("ExternalIP"), "");
  EXPECT_EQ(node->annotation("ekco.kurl.sh/cordoned-by"), "shutdown");
  EXPECT_EQ(node->ekco_annotations.size(), 1U);
}

TEST(RecordsTest, AHeartbeatOrAnUnkeptFieldLeavesTheNodeRecordEqual) {
  Json later = nodeJson();
  later["metadata"]["resourceVersion"] = "8";
  later["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-22T10:05:00Z";
  later["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.0";
  later["metadata"]["labels"]["topology.kubernetes.io/zone"] = "other";
  EXPECT_EQ(*projectNode(nodeJson()), *projectNode(later));
  later["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-22T10:06:00Z";
  EXPECT_NE(*projectNode(nodeJson()), *projectNode(later));
}

TEST(RecordsTest, APodKeepsWhatTheControllersRead) {
  auto pod = projectPod(Json::parse(R"({
    "metadata": {"name": "osd-0", "namespace": "rook-ceph", "uid": "u-2",
      "labels": {"app": "rook-ceph-osd", "pod-template-hash": "abc"},
      "deletionTimestamp": "2026-11-22T10:00:00Z", "deletionGracePeriodSeconds": 30,
      "ownerReferences": [{"kind": "Node", "name": "x", "uid": "1"},
                          {"kind": "ReplicaSet", "name": "osd-0-abc", "uid": "2", "controller": true}]},
    "spec": {"nodeName": "node-a", "volumes": [
      {"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1"}},
      {"name": "dev", "hostPath": {"path": "/dev"}},
      {"name": "token", "projected": {}}]},
    "status": {"phase": "Running", "containerStatuses": [{"name": "a", "ready": true},
                                                          {"name": "b", "ready": false}]}})"));
  ASSERT_TRUE(pod) << pod.error().message();
  EXPECT_EQ(pod->ns, "rook-ceph");
  EXPECT_EQ(pod->name, "osd-0");
  EXPECT_EQ(pod->uid, "u-2");
  EXPECT_EQ(pod->node_name, "node-a");
  EXPECT_EQ(pod->phase, "Running");
  EXPECT_EQ(pod->app, "rook-ceph-osd");
  EXPECT_EQ(pod->owner_kind, "ReplicaSet");
  EXPECT_TRUE(pod->terminating());
  EXPECT_EQ(pod->deletion_grace_period_seconds, 30);
  EXPECT_TRUE(pod->hasVolume(kVolumePersistentVolumeClaim));
  EXPECT_TRUE(pod->hasVolume(kVolumeHostPath));
  EXPECT_TRUE(pod->hasVolume(kVolumeConfigLike));
  EXPECT_FALSE(pod->hasVolume(kVolumeCephFs));
  EXPECT_EQ(pod->containers, 2);
  EXPECT_EQ(pod->containers_ready, 1);
  EXPECT_FALSE(pod->allContainersReady());
}

TEST(RecordsTest, MalformedJsonIsAParseErrorNamingTheField) {
  auto pod = projectPod(Json::parse(R"({"metadata": {"name": "p", "labels": {"app": 3}}})"));
  ASSERT_FALSE(pod);
  EXPECT_EQ(pod.error().message(), "parse Pod p: metadata.labels.app: expected string, got number");
}

TEST(AtomTest, EqualTextIsTheSameAtom) {
  Atom a("kube-system");
  Atom b(std::string("kube-") + "system");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.view().data(), b.view().data());
  EXPECT_NE(a, Atom("default"));
  EXPECT_TRUE(Atom().empty());
  EXPECT_EQ(Atom(""), Atom());
  EXPECT_GE(Atom::poolSize(), 2U);
}

}  // namespace
}  // namespace ekco::kube
