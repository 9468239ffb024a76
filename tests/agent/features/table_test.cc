// The controller table (agent/features/table.cc): every controller once, its scope, what
// enables it, the watches it declares and where its status goes, as the runtime relies on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "agent/controller/spec.h"

namespace ekco::agent {
namespace {

using ::testing::ElementsAre;

const ControllerSpec& spec(std::string_view name) {
  for (const auto& s : controllerSpecs()) {
    if (s.name == name) return s;
  }
  ADD_FAILURE() << "no spec " << name;
  static const ControllerSpec kNone{};
  return kNone;
}

std::vector<std::string> watchKeys(const ControllerSpec& s) {
  std::vector<std::string> keys;
  for (const WatchSpec& w : s.watches) keys.emplace_back(w.key);
  return keys;
}

TEST(ControllerTable, ListsEveryControllerOnceInRunOrder) {
  std::vector<std::string> names;
  std::set<std::string> keys;
  for (const auto& s : controllerSpecs()) {
    names.emplace_back(s.name);
    EXPECT_TRUE(s.enabled) << s.name;
    EXPECT_TRUE(s.build) << s.name;
    if (!s.status_key.empty()) {
      EXPECT_TRUE(keys.insert(std::string(s.status_key)).second) << s.status_key;
    }
  }
  // clear-nodes before purge-dead-nodes: when both are due at the same threshold, the pods go
  // first (the purge also holds the node while pods are due: data, not only this order).
  EXPECT_THAT(names,
              ElementsAre("host-checks", "host-units", "internal-lb", "control-plane-certificates",
                          "cluster-certificates", "webhook-server", "host-jobs", "api-address-node",
                          "node-recovery", "clear-nodes", "purge-dead-nodes", "resource-scaling",
                          "rook-ceph", "envoy-restarts", "kubelet-csr-approval",
                          "pod-image-overrides", "kotsadm-ha", "minio-ha", "api-address"));
  // /status keys are a contract (ekco status, scripts).
  EXPECT_EQ(keys, (std::set<std::string>{
                      "host_checks", "host_units", "internal_load_balancer", "certificates",
                      "cluster_certificates", "webhook_server", "host_jobs", "node_recovery",
                      "clear_nodes", "purge_dead_nodes", "resource_scaling", "rook_ceph",
                      "envoy_restarts", "kubelet_csr_approval", "pod_image_overrides", "kotsadm_ha",
                      "minio_ha", "api_address", "api_address_node"}));
}

TEST(ControllerTable, ScopesSwitchesAndCachesFollowTheConfig) {
  Config c;
  c.enable_internal_load_balancer = false;
  c.clear_dead_nodes = true;
  c.purge_dead_nodes = false;
  EXPECT_TRUE(spec("host-checks").enabled(c));
  EXPECT_TRUE(spec("host-units").enabled(c));
  EXPECT_FALSE(spec("internal-lb").enabled(c));
  EXPECT_TRUE(spec("clear-nodes").enabled(c));
  EXPECT_FALSE(spec("purge-dead-nodes").enabled(c));
  EXPECT_TRUE(spec("resource-scaling").enabled(c));  // on by default, as in EKCO
  c.auto_resource_scaling = false;
  EXPECT_FALSE(spec("resource-scaling").enabled(c));
  EXPECT_TRUE(spec("envoy-restarts").enabled(c));  // on by default, as in EKCO
  c.restart_failed_envoy_pods = false;
  EXPECT_FALSE(spec("envoy-restarts").enabled(c));
  c.restart_failed_envoy_pods = true;
  c.contour_namespace = "";  // no Contour: nothing to watch
  EXPECT_FALSE(spec("envoy-restarts").enabled(c));
  EXPECT_EQ(spec("envoy-restarts").scope, Scope::kLeader);
  EXPECT_THAT(watchKeys(spec("envoy-restarts")), ElementsAre("envoy-pods"));
  // rook-ceph: on while any of its three keys is (MDS placement and CSI resources default on).
  EXPECT_TRUE(spec("rook-ceph").enabled(c));
  c.reconcile_rook_mds_placement = c.reconcile_ceph_csi_resources = false;
  EXPECT_FALSE(spec("rook-ceph").enabled(c));
  c.maintain_rook_storage_nodes = true;
  EXPECT_TRUE(spec("rook-ceph").enabled(c));
  EXPECT_EQ(spec("rook-ceph").scope, Scope::kLeader);
  EXPECT_THAT(watchKeys(spec("rook-ceph")), ElementsAre("cluster-nodes"));
  EXPECT_TRUE(spec("kubelet-csr-approval").enabled(c));  // on by default, as kURL sets it
  c.auto_approve_kubelet_csrs = false;
  EXPECT_FALSE(spec("kubelet-csr-approval").enabled(c));
  c.enable_internal_load_balancer = true;
  c.purge_dead_nodes = true;
  EXPECT_TRUE(spec("internal-lb").enabled(c));
  EXPECT_TRUE(spec("purge-dead-nodes").enabled(c));
  // The webhook's server runs only with overrides; its leader controller always (it removes the
  // configuration when they are gone).
  EXPECT_FALSE(spec("webhook-server").enabled(c));
  EXPECT_TRUE(spec("pod-image-overrides").enabled(c));
  c.pod_image_overrides = {"a=b"};
  EXPECT_TRUE(spec("webhook-server").enabled(c));
  EXPECT_EQ(spec("webhook-server").scope, Scope::kNode);
  EXPECT_EQ(spec("pod-image-overrides").scope, Scope::kLeader);

  EXPECT_EQ(spec("host-checks").scope, Scope::kNode);
  EXPECT_EQ(spec("internal-lb").scope, Scope::kNode);
  EXPECT_EQ(spec("clear-nodes").scope, Scope::kLeader);
  EXPECT_EQ(spec("purge-dead-nodes").scope, Scope::kLeader);
  EXPECT_EQ(spec("resource-scaling").scope, Scope::kLeader);
  EXPECT_THAT(watchKeys(spec("resource-scaling")), ElementsAre("cluster-nodes"));
  EXPECT_EQ(spec("kubelet-csr-approval").scope, Scope::kLeader);
  EXPECT_THAT(watchKeys(spec("kubelet-csr-approval")),
              ElementsAre("kubelet-serving-csrs", "cluster-nodes"));
  EXPECT_THAT(watchKeys(spec("internal-lb")), ElementsAre("apiservers"));
  EXPECT_THAT(watchKeys(spec("clear-nodes")), ElementsAre("cluster-nodes", "unhealthy-node-pods"));
  EXPECT_THAT(watchKeys(spec("purge-dead-nodes")),
              ElementsAre("cluster-nodes", "unhealthy-node-pods"));
  // Node recovery: on by default (the beacon path), off with shutdown_out_of_service.
  EXPECT_TRUE(spec("node-recovery").enabled(c));
  EXPECT_EQ(spec("node-recovery").scope, Scope::kLeader);
  EXPECT_THAT(watchKeys(spec("node-recovery")), ElementsAre("cluster-nodes", "node-leases"));
  c.shutdown_out_of_service = false;
  EXPECT_FALSE(spec("node-recovery").enabled(c));
  // MinIO and kotsadm HA: off unless kURL (or the config) turns them on.
  EXPECT_FALSE(spec("kotsadm-ha").enabled(c));
  EXPECT_FALSE(spec("minio-ha").enabled(c));
  c.enable_ha_kotsadm = true;
  c.enable_ha_minio = true;
  EXPECT_TRUE(spec("kotsadm-ha").enabled(c));
  EXPECT_TRUE(spec("minio-ha").enabled(c));
  for (const char* name : {"kotsadm-ha", "minio-ha"}) {
    EXPECT_EQ(spec(name).scope, Scope::kLeader);
    EXPECT_THAT(watchKeys(spec(name)), ElementsAre("cluster-nodes"));
  }
}

}  // namespace
}  // namespace ekco::agent

namespace ekco::agent {
namespace {

// Maintenance mode (issue 19): exactly the controllers that change the cluster on their own
// initiative pause; node-keeping and reporting ones, and an administrator's HostJobs, do not.
// Two specs that declare the same watch key share one watch: they must mean the same watch.
TEST(ControllerTable, AWatchKeyMeansOneWatch) {
  std::map<std::string, const WatchSpec*> seen;
  for (const auto& s : controllerSpecs()) {
    for (const WatchSpec& w : s.watches) {
      EXPECT_TRUE(w.build) << w.key;
      auto [it, fresh] = seen.emplace(std::string(w.key), &w);
      if (fresh) continue;
      EXPECT_EQ(it->second->scope, w.scope) << w.key << " in " << s.name;
      EXPECT_EQ(it->second->reachability, w.reachability) << w.key << " in " << s.name;
    }
  }
  // Leader controllers read leader watches; a node watch in a leader spec would be fine, a
  // leader watch in a node spec would never start on a follower.
  for (const auto& s : controllerSpecs()) {
    if (s.scope != Scope::kNode) continue;
    for (const WatchSpec& w : s.watches) EXPECT_EQ(w.scope, Scope::kNode) << s.name << " " << w.key;
  }
}

TEST(ControllerTable, ExactlyTheClusterChangingControllersPauseInMaintenance) {
  std::set<std::string> pausing;
  for (const auto& s : controllerSpecs()) {
    if (s.pauses_in_maintenance) pausing.insert(std::string(s.name));
  }
  EXPECT_EQ(pausing,
            (std::set<std::string>{"clear-nodes", "purge-dead-nodes", "resource-scaling",
                                   "envoy-restarts", "node-recovery", "rook-ceph",
                                   "cluster-certificates", "kubelet-csr-approval", "kotsadm-ha",
                                   "minio-ha", "api-address", "api-address-node"}));
}

TEST(ControllerTable, HostJobsRunOnEveryNodeOnlyWhenEnabled) {
  Config c;
  EXPECT_FALSE(spec("host-jobs").enabled(c));
  c.enable_host_jobs = true;
  EXPECT_TRUE(spec("host-jobs").enabled(c));
  EXPECT_EQ(spec("host-jobs").scope, Scope::kNode);
  EXPECT_THAT(watchKeys(spec("host-jobs")), ElementsAre("hostjobs"));
}

}  // namespace
}  // namespace ekco::agent
