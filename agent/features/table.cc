// Every controller, one line each, in the order the manager runs them when several are due
// (agent/controller/spec.h), and every service (agent/controller/service.h). Adding a
// controller or a service adds a line here.
#include "agent/controller/service.h"
#include "agent/controller/spec.h"
#include "agent/features/api_address/change_leader.h"
#include "agent/features/api_address/change_node.h"
#include "agent/features/certs/cluster_certs.h"
#include "agent/features/certs/control_plane_certs.h"
#include "agent/features/clear/clear_nodes.h"
#include "agent/features/csr_approval/kubelet_csr_approval.h"
#include "agent/features/envoy/envoy_restarts.h"
#include "agent/features/host_checks/host_checks.h"
#include "agent/features/host_jobs/host_jobs.h"
#include "agent/features/host_units/host_units.h"
#include "agent/features/internal_lb/internal_lb.h"
#include "agent/features/minio/kotsadm_ha.h"
#include "agent/features/minio/minio_ha.h"
#include "agent/features/purge/purge_dead_nodes.h"
#include "agent/features/reboot/node_recovery.h"
#include "agent/features/reboot/shutdown_inhibitor.h"
#include "agent/features/rook/rook_ceph.h"
#include "agent/features/scaling/resource_scaling.h"
#include "agent/features/webhook/webhook_config.h"
#include "agent/features/webhook/webhook_serving.h"

namespace ekco::agent {

const std::vector<ControllerSpec>& controllerSpecs() {
  static const std::vector<ControllerSpec> table = {
      hostChecksSpec(),         // every node: the node as the host and the API see it
      hostUnitsSpec(),          // every node: ekco-reboot.service, ekco-upgrade.timer
      internalLbSpec(),         // every node: HAProxy in front of the apiservers
      controlPlaneCertsSpec(),  // every node: the kubeadm certificates, renewed inside the TTL
      clusterCertsSpec(),       // every node: the add-ons' TLS secrets (control-plane nodes act)
      webhookServingSpec(),     // every node: the pod image overrides webhook's HTTPS server
      hostJobsSpec(),           // every node: HostJobs selecting it (enable_host_jobs)
      changeNodeSpec(),         // every node: its step of a change of the API address
      nodeRecoverySpec(),       // leader: out-of-service taint for nodes ekco shutdown took down
      clearNodesSpec(),         // leader: force-delete pods stuck on dead nodes
      purgeDeadNodesSpec(),     // leader: purge dead nodes, after clear-nodes is done with them
      resourceScalingSpec(),    // leader: Prometheus/Alertmanager replicas follow the node count
      rookCephSpec(),           // leader: Rook storage nodes, pool replication, mons/mgrs, MDS, CSI
      envoyRestartsSpec(),      // leader: force-delete Envoy pods stuck not ready (contour#3192)
      kubeletCsrApprovalSpec(),  // leader: approve kubelet-serving CSRs that pass every rule
      webhookConfigSpec(),       // leader: its CA Secret, Service and MutatingWebhookConfiguration
      kotsadmHaSpec(),           // leader: kotsadm-rqlite to 3 replicas at 3 Ready nodes
      minioHaSpec(),             // leader: ha-minio scaled, the old MinIO's data migrated to it
      changeLeaderSpec(),        // leader: a change of the API address, one node at a time
  };
  return table;
}

const std::vector<ServiceSpec>& serviceSpecs() {
  static const std::vector<ServiceSpec> table = {
      shutdownInhibitorSpec(),
  };
  return table;
}

}  // namespace ekco::agent
