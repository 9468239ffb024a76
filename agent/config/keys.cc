#include "agent/config/keys.h"

namespace ekco::agent {

#define EKCO_KEY(name, kind, help) \
  KeyDef { {#name, ValueKind::kind, help}, &Config::name }
// A key kept for EKCO compatibility whose feature ekco does not offer (see KeyInfo::compat).
#define EKCO_COMPAT_KEY(name, kind, help, why) \
  KeyDef { {#name, ValueKind::kind, help, false, {}, why}, &Config::name }

// Why EKCO's "create the Ceph cluster at N nodes, then migrate storage to it" keys do nothing.
constexpr std::string_view kNoCephBootstrap =
    "ekco does not create the Rook CephCluster (EKCO's embedded Helm chart) nor serve EKCO's "
    "storage migration API; install the CephCluster with kURL's rook add-on";

const std::vector<KeyDef>& keyDefs() {
  static const std::vector<KeyDef> defs = {
      EKCO_KEY(node_unreachable_toleration, kDuration,
               "How long a node must be unreachable before it is dead (cleared, or purged)")
          .fromEkco("EKCO's binary default is 1h; kURL renders 5m, the default here"),
      EKCO_KEY(clear_dead_nodes, kBool, "Force-delete pods stuck terminating on dead nodes")
          .fromEkco("EKCO's binary default is false (it had no flag); kURL renders true, the "
                    "default here"),
      EKCO_KEY(clear_pod_deletion_grace, kDuration,
               "Force-delete a pod on a dead node once it has been terminating this long"),
      EKCO_KEY(storm_guard_percent, kInt,
               "Clear and purge nothing while more than this % of nodes is unreachable (0-100)"),
      EKCO_KEY(purge_dead_nodes, kBool, "Automatically purge dead nodes").fromEkco(),
      EKCO_KEY(min_ready_master_nodes, kInt,
               "Never purge if fewer ready primaries would remain (at least 1)")
          .fromEkco(),
      EKCO_KEY(min_ready_worker_nodes, kInt, "Never purge if fewer ready workers would remain")
          .fromEkco(),
      EKCO_KEY(maintain_rook_storage_nodes, kBool,
               "Add/remove nodes in CephCluster storage.nodes and scale pool replication")
          .fromEkco(),
      EKCO_KEY(rook_storage_nodes_label, kString,
               "Only nodes with this label are added to Rook storage")
          .fromEkco(),
      EKCO_KEY(rook_storage_nodes, kString, "Rook storage node list (YAML, as kURL renders it)")
          .fromEkco(),
      EKCO_KEY(reconcile_rook_mds_placement, kBool,
               "Restore strict MDS anti-affinity once the cluster has more than one node")
          .fromEkco(),
      EKCO_KEY(reconcile_ceph_csi_resources, kBool,
               "Set Ceph CSI requests/limits once the cluster has three nodes")
          .fromEkco(),
      EKCO_KEY(ceph_block_pool, kString, "CephBlockPool whose replication is scaled").fromEkco(),
      EKCO_KEY(ceph_filesystem, kString, "CephFilesystem whose replication is scaled").fromEkco(),
      EKCO_KEY(ceph_object_store, kString, "CephObjectStore whose replication is scaled")
          .fromEkco("EKCO's binary default is replicated; kURL renders rook-ceph-store, the "
                    "default here"),
      EKCO_KEY(min_ceph_pool_replication, kInt, "Lowest Ceph pool replication").fromEkco(),
      EKCO_KEY(max_ceph_pool_replication, kInt, "Highest Ceph pool replication").fromEkco(),
      EKCO_KEY(ceph_pool_replication_hold_down, kDuration,
               "Lower pool replication only after fewer hosts lasted this long"),
      EKCO_COMPAT_KEY(rook_priority_class, kString,
                      "Compatibility only: EKCO's PriorityClass for Rook 1.0.4 pods",
                      "only kURL's Rook 1.0.4 add-on set it (kURL renders \"\" for every later "
                      "Rook, whose CephCluster sets priorityClassNames itself); ekco does not "
                      "patch the priority of Rook's pods")
          .fromEkco("EKCO's binary default is node-critical; kURL renders \"\" (node-critical only "
                    "for Rook 1.0.4, which `config from-kurl` reproduces)"),
      EKCO_COMPAT_KEY(rook_minimum_node_count, kInt,
                      "Compatibility only: EKCO created the Rook cluster at this many nodes",
                      kNoCephBootstrap)
          .fromEkco(),
      EKCO_COMPAT_KEY(rook_storage_class, kString,
                      "Compatibility only: StorageClass of the Rook cluster EKCO created",
                      kNoCephBootstrap)
          .fromEkco(),
      EKCO_COMPAT_KEY(rook_ceph_image, kString,
                      "Compatibility only: Ceph image of the Rook cluster EKCO created",
                      kNoCephBootstrap)
          .fromEkco(),
      EKCO_KEY(reconcile_interval, kDuration, "Fallback period of the leader's full reconcile")
          .fromEkco(),
      EKCO_KEY(reconcile_timeout, kDuration, "Deadline of one reconcile (0 means 15m)")
          .fromEkco("0 means 15m, as in EKCO"),
      EKCO_KEY(certificates_dir, kString, "Kubernetes PKI directory on the host").fromEkco(),
      EKCO_KEY(rotate_certs, kBool, "Renew control-plane certificates before they expire")
          .fromEkco(),
      EKCO_COMPAT_KEY(rotate_certs_namespace, kString,
                      "Namespace EKCO ran its rotate-certs pods in (kept for compatibility)",
                      "EKCO kept its rotation gate ConfigMap there; ekco schedules renewals "
                      "itself and does not read it")
          .fromEkco(),
      EKCO_KEY(rotate_certs_check_interval, kDuration, "How often certificates are checked")
          .fromEkco(),
      EKCO_KEY(rotate_certs_ttl, kDuration, "Renew a certificate when it expires within this")
          .fromEkco(),
      EKCO_KEY(registry_cert_namespace, kString, "Namespace of the registry certificate secret")
          .fromEkco(),
      EKCO_KEY(registry_cert_secret, kString, "Registry certificate secret").fromEkco(),
      EKCO_KEY(kurl_proxy_cert_namespace, kString, "Namespace of the kurl-proxy TLS secret")
          .fromEkco(),
      EKCO_KEY(kurl_proxy_cert_secret, kString, "kurl-proxy TLS secret").fromEkco(),
      EKCO_KEY(kotsadm_kubelet_cert_namespace, kString,
               "Namespace of the kotsadm kubelet client certificate secret")
          .fromEkco(),
      EKCO_KEY(kotsadm_kubelet_cert_secret, kString, "kotsadm kubelet client certificate secret")
          .fromEkco("EKCO's binary default is default; kURL renders kubelet-client-cert, the "
                    "default here"),
      EKCO_KEY(contour_namespace, kString, "Namespace of Contour and Envoy").fromEkco(),
      EKCO_KEY(contour_cert_secret, kString, "Contour certificate secret").fromEkco(),
      EKCO_KEY(envoy_cert_secret, kString, "Envoy certificate secret").fromEkco(),
      EKCO_KEY(restart_failed_envoy_pods, kBool,
               "Delete Envoy pods whose envoy container stays not ready")
          .fromEkco(),
      EKCO_KEY(envoy_pods_not_ready_duration, kDuration,
               "How long an Envoy container may be not ready before its pod is deleted")
          .fromEkco(),
      EKCO_KEY(auto_resource_scaling, kBool,
               "Set Prometheus/Alertmanager replicas to min(2 / 3, nodes) as nodes join and leave"),
      EKCO_KEY(enable_internal_load_balancer, kBool,
               "Run the HAProxy static pod on port 6444 on every node")
          .fromEkco(),
      EKCO_KEY(internal_load_balancer_haproxy_image, kString, "Image of the HAProxy static pod")
          .fromEkco(),
      EKCO_KEY(internal_load_balancer_bind, kString,
               "HAProxy listen address IP:PORT (loopback by default; plus [::1] when IPv6 is up)"),
      EKCO_KEY(pod_image_overrides, kStringList,
               "Pod image overrides, each \"original=overridden\"")
          .fromEkco(),
      EKCO_KEY(pod_image_overrides_port, kInt,
               "Port the agents serve the pod image overrides webhook on (HTTPS)"),
      EKCO_KEY(pod_image_overrides_excluded_namespaces, kStringList,
               "Namespaces whose pods the image overrides webhook is not called for (empty: none)"),
      EKCO_KEY(pod_image_overrides_endpoints, kString,
               "Who backs the webhook's Service: pods (the DaemonSet's, by selector), nodes (the "
               "agents on the control-plane nodes, listed by the leader) or auto"),
      EKCO_KEY(auto_approve_kubelet_csrs, kBool,
               "Approve kubernetes.io/kubelet-serving CSRs that pass every rule of the "
               "kubelet serving CSR approval (and no others)")
          .fromEkco("EKCO's binary default is false; kURL hard-codes true, the default here"),
      EKCO_KEY(kubelet_csr_allowed_ip_prefixes, kStringList,
               "Approve kubelet serving CSRs only when every IP SAN is inside one of these CIDRs "
               "(no host bits); empty: any address that passes the other rules"),
      EKCO_KEY(enable_ha_minio, kBool, "Manage the HA MinIO StatefulSet").fromEkco(),
      EKCO_KEY(minio_namespace, kString, "Namespace of MinIO").fromEkco(),
      EKCO_COMPAT_KEY(minio_util_image, kString,
                      "Compatibility only: image of EKCO's MinIO migration pod",
                      "ekco copies MinIO's objects over the S3 API itself (verified, resumable), "
                      "with no migration pod")
          .fromEkco(),
      EKCO_KEY(enable_ha_kotsadm, kBool, "Scale kotsadm's rqlite to three replicas").fromEkco(),
      EKCO_COMPAT_KEY(storage_migration_auth_token, kString,
                      "Compatibility only: token of EKCO's storage migration API", kNoCephBootstrap)
          .fromEkco(),
      EKCO_KEY(disable_reboot_service, kBool,
               "Do not install ekco-reboot.service (kURL shouldDisableRebootServices)"),
      EKCO_KEY(enable_host_jobs, kBool,
               "Run HostJobs (hostjobs.ekco.kurl.sh): commands as root on the selected nodes"),
      EKCO_KEY(shutdown_excluded_namespaces, kStringList,
               "Namespaces whose pods ekco shutdown does not delete"),
      EKCO_KEY(shutdown_unmount_timeout, kDuration,
               "How long ekco shutdown waits for pod PVC and CephFS volumes to unmount"),
      EKCO_KEY(shutdown_out_of_service, kBool,
               "Leader: taint a node that went down through ekco shutdown (its beacon) "
               "node.kubernetes.io/out-of-service at once"),
      EKCO_KEY(shutdown_out_of_service_grace, kDuration,
               "... once its Ready is not True and its heartbeat Lease has not been renewed for "
               "this long"),
      EKCO_KEY(startup_api_timeout, kDuration,
               "How long ekco startup waits for the API before giving up (node left cordoned)"),
      EKCO_KEY(auto_upgrade_schedule, kString,
               "systemd calendar event of ekco-upgrade.timer, e.g. \"Sat 17:30\" (empty: off)"),
      EKCO_KEY(auto_upgrade_url, kString,
               "Installer URL the upgrade checks (https; http only with auto_upgrade_allow_http)"),
      EKCO_KEY(auto_upgrade_allow_http, kBool,
               "Accept a plain http:// auto_upgrade_url, whose downloads are not verified"),
      EKCO_KEY(leader_election_namespace, kString, "Namespace of the ekco-leader Lease"),
      EKCO_KEY(leader_election_candidate, kBool,
               "false: never lead (only read the Lease) and run only the every-node controllers "
               "that need no cluster-wide permission (the worker DaemonSet sets it)"),
      EKCO_KEY(leader_election_lease_duration, kDuration,
               "How long a leader's Lease holds without renewal before others may take it"),
      EKCO_KEY(leader_election_renew_deadline, kDuration,
               "The leader gives up leading when it could not renew for this long"),
      EKCO_KEY(leader_election_retry_period, kDuration,
               "How often agents try to acquire or renew the Lease"),
      EKCO_KEY(health_socket, kString, "Path of the agent's health socket"),
      EKCO_KEY(metrics_address, kString,
               "Also serve GET /metrics over HTTP on this IP:PORT for Prometheus (empty: off)"),
      EKCO_KEY(log_level, kString, "debug, info, warn or error"),
      // Accepted for compatibility, no effect: ekco does this work on the host itself.
      KeyDef{{"rotate_certs_image", ValueKind::kString,
              "Ignored: EKCO's rotate-certs pod image; ekco renews on the host", true},
             {}}
          .fromEkco(),
      KeyDef{{"host_task_image", ValueKind::kString,
              "Ignored: EKCO's host task pod image; ekco acts on its own host", true},
             {}}
          .fromEkco(),
      KeyDef{{"host_task_namespace", ValueKind::kString, "Ignored: EKCO's host task pod namespace",
              true},
             {}}
          .fromEkco(),
      KeyDef{{"rook_version", ValueKind::kString,
              "Ignored: the Rook version is detected from the operator image", true},
             {}}
          .fromEkco("EKCO's flag only, never used: it detected the version"),
      KeyDef{{"internal_load_balancer_port", ValueKind::kInt,
              "Ignored: EKCO never used it; set the port in internal_load_balancer_bind", true},
             {}}
          .fromEkco("not rendered by kURL and never used by EKCO"),
      KeyDef{{"contour_cert_namespace", ValueKind::kString,
              "Deprecated spelling of contour_namespace", false, "contour_namespace"},
             {}}
          .fromEkco("sets contour_namespace only when that is not set, as EKCO's init.go does"),
  };
  return defs;
}
#undef EKCO_KEY
#undef EKCO_COMPAT_KEY

const KeyDef* findKey(std::string_view key) {
  for (const KeyDef& d : keyDefs()) {
    if (d.info.key == key) return &d;
  }
  return nullptr;
}

}  // namespace ekco::agent
