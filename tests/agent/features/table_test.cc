// The controller table (agent/features/table.cc): every controller once, its scope, what
// enables it, the caches it asks for and where its status goes, as the runtime relies on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
                          "cluster-certificates", "webhook-server", "host-jobs", "node-recovery",
                          "clear-nodes", "purge-dead-nodes", "resource-scaling", "rook-ceph",
                          "envoy-restarts", "kubelet-csr-approval", "pod-image-overrides",
                          "kotsadm-ha", "minio-ha"));
  // /status keys are a contract (ekco status, scripts).
  EXPECT_EQ(keys, (std::set<std::string>{"host_checks", "host_units", "internal_load_balancer",
                                         "certificates", "cluster_certificates", "webhook_server",
                                         "host_jobs", "node_recovery", "clear_nodes",
                                         "purge_dead_nodes", "resource_scaling", "rook_ceph",
                                         "envoy_restarts", "kubelet_csr_approval",
                                         "pod_image_overrides", "kotsadm_ha", "minio_ha"}));
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
  EXPECT_THAT(spec("envoy-restarts").caches, ElementsAre(CacheName::kEnvoyPods));
  // rook-ceph: on while any of its three keys is (MDS placement and CSI resources default on).
  EXPECT_TRUE(spec("rook-ceph").enabled(c));
  c.reconcile_rook_mds_placement = c.reconcile_ceph_csi_resources = false;
  EXPECT_FALSE(spec("rook-ceph").enabled(c));
  c.maintain_rook_storage_nodes = true;
  EXPECT_TRUE(spec("rook-ceph").enabled(c));
  EXPECT_EQ(spec("rook-ceph").scope, Scope::kLeader);
  EXPECT_THAT(spec("rook-ceph").caches, ElementsAre(CacheName::kClusterNodes));
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
  EXPECT_THAT(spec("resource-scaling").caches, ElementsAre(CacheName::kClusterNodes));
  EXPECT_EQ(spec("kubelet-csr-approval").scope, Scope::kLeader);
  EXPECT_THAT(spec("kubelet-csr-approval").caches,
              ElementsAre(CacheName::kKubeletServingCsrs, CacheName::kClusterNodes));
  EXPECT_THAT(spec("internal-lb").caches, ElementsAre(CacheName::kApiservers));
  EXPECT_THAT(spec("clear-nodes").caches,
              ElementsAre(CacheName::kClusterNodes, CacheName::kUnhealthyNodePods));
  EXPECT_THAT(spec("purge-dead-nodes").caches,
              ElementsAre(CacheName::kClusterNodes, CacheName::kUnhealthyNodePods));
  // Node recovery: on by default (the beacon path), off with shutdown_out_of_service.
  EXPECT_TRUE(spec("node-recovery").enabled(c));
  EXPECT_EQ(spec("node-recovery").scope, Scope::kLeader);
  EXPECT_THAT(spec("node-recovery").caches,
              ElementsAre(CacheName::kClusterNodes, CacheName::kNodeLeases));
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
    EXPECT_THAT(spec(name).caches, ElementsAre(CacheName::kClusterNodes));
  }
}

}  // namespace
}  // namespace ekco::agent

namespace ekco::agent {
namespace {

// Maintenance mode (issue 19): exactly the controllers that change the cluster on their own
// initiative pause; node-keeping and reporting ones, and an administrator's HostJobs, do not.
TEST(ControllerTable, ExactlyTheClusterChangingControllersPauseInMaintenance) {
  std::set<std::string> pausing;
  for (const auto& s : controllerSpecs()) {
    if (s.pauses_in_maintenance) pausing.insert(std::string(s.name));
  }
  EXPECT_EQ(pausing, (std::set<std::string>{"clear-nodes", "purge-dead-nodes", "resource-scaling",
                                            "envoy-restarts", "node-recovery", "rook-ceph",
                                            "cluster-certificates", "kubelet-csr-approval",
                                            "kotsadm-ha", "minio-ha"}));
}

TEST(ControllerTable, HostJobsRunOnEveryNodeOnlyWhenEnabled) {
  Config c;
  EXPECT_FALSE(spec("host-jobs").enabled(c));
  c.enable_host_jobs = true;
  EXPECT_TRUE(spec("host-jobs").enabled(c));
  EXPECT_EQ(spec("host-jobs").scope, Scope::kNode);
  EXPECT_THAT(spec("host-jobs").caches, ElementsAre(CacheName::kHostJobs));
}

}  // namespace
}  // namespace ekco::agent
