// MinIO pod rebalancing (part of the leader controller `minio-ha`, ../shared/reference/ekco.md
// §3.11, EKCO's MaybeRebalanceMinioServers): once ha-minio is at its desired scale, reports
// /minio/health/cluster 200, and no storage migration is under way, its pods are spread over the
// Ready nodes, at most one pod per pass. "Rescheduling" a pod deletes its PVC and then the pod, so
// the StatefulSet controller re-creates both wherever the scheduler places the pod and MinIO heals
// the new, empty drive from the others: the data of that one replica is deleted on purpose.
//
// The rules, in order (the first pod found is the one acted on):
//   (1) unschedulable: a pod Pending with PodScheduled=False for more than 5 minutes (its
//       condition's lastTransitionTime against the injected clock) whose volume is bound to a
//       node that is gone (OpenEBS local PV: its PV's kubernetes.io/hostname node affinity, else
//       the PVC's volume.kubernetes.io/selected-node): only a new PVC lets it run again. While
//       that node still exists (rebooting, drained by ekco's own reboot: the pod waits for it)
//       or the volume is not tied to a node, the replica is kept, however long the pod waits.
//       The node is looked up again, from the API, right before the PVC is deleted.
//   Pods grouped by status.hostIP; with n pods and r Ready nodes, max = ceil(n/r), min = floor.
//   (2) over-max: a pod on a node holding more than max pods;
//   (3) under-min: when a node holds fewer than min pods, a pod on a node holding max;
//   (4) empty-node: when fewer nodes hold pods than there are Ready nodes, a pod on a node
//       holding more than one.
// For (2)-(4) a pod is moved only when its own MinIO answers 200 to
// GET /minio/health/cluster?maintenance=true ("the cluster stays healthy without me"; 412
// otherwise); the candidates of (2), then (3), then (4) are tried in order and the first safe one
// is moved. Ties: the node holding the most pods first, then by hostIP; within a node, by ordinal.
//
// Stricter than EKCO, on purpose (each move deletes a replica's data): (2)-(4) wait while any
// ha-minio pod is not Running and Ready, is terminating, has no node yet, or while the pod count
// differs from the StatefulSet's replicas (a move made in the previous pass is still healing);
// Ready nodes that are cordoned (spec.unschedulable) are not counted, as the scheduler would not
// place the pod there and the same replica would be deleted again and again; and a pod whose PVC
// is not the one its StatefulSet's volumeClaimTemplates give it (<template>-<pod>) is not touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/controller/effects.h"
#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/records.h"

namespace ekco::agent {

inline constexpr std::chrono::minutes kMinioUnschedulableGrace{5};

// One ha-minio pod as the decision sees it.
struct MinioRebalancePod {
  std::string name{};
  std::string uid{};
  std::string host_ip{};  // status.hostIP; "" until the pod is on a node
  std::string phase{};
  bool ready = false;
  bool terminating = false;  // metadata.deletionTimestamp set
  // PodScheduled=False: its lastTransitionTime (nullopt when scheduled, or no time given).
  std::optional<base::WallTime> unschedulable_since = std::nullopt;
  // The PVC to delete with it: the persistentVolumeClaim volume named after one of the
  // StatefulSet's volumeClaimTemplates whose claim is <template>-<pod name>; "" when none.
  std::string claim{};
  // "10.32.0.7:9000" to ask MinIO's health on ("" when not Running with an IP; podS3Host).
  std::string s3_host{};
  // What GET /minio/health/cluster?maintenance=true answered; nullopt: not asked or no answer.
  std::optional<int> maintenance_status = std::nullopt;
  // The node its volume is bound to (rule 1): nullopt until looked up, "" when the volume is not
  // tied to a node (or its PVC or PV is gone).
  std::optional<std::string> volume_node = std::nullopt;
};

// `pod` (JSON) as the decision sees it; `claim_templates` are the StatefulSet's
// volumeClaimTemplates' names. Pure.
MinioRebalancePod minioRebalancePod(const nlohmann::json& pod,
                                    const std::vector<std::string>& claim_templates);

// The volumeClaimTemplates' names of a StatefulSet (JSON).
std::vector<std::string> claimTemplateNames(const nlohmann::json& statefulset);

struct MinioRebalanceInput {
  std::vector<MinioRebalancePod> pods{};
  std::vector<kube::NodeRecord> nodes{};
  std::int64_t replicas = 0;  // the StatefulSet's spec.replicas
  base::WallTime now{};
};

struct MinioRebalanceDecision {
  // The pod to reschedule (its PVC, then it), or nullopt: nothing this pass (`reason` says why:
  // "balanced: …" or "waiting: …").
  std::optional<MinioRebalancePod> reschedule = std::nullopt;
  std::string rule{};    // "unschedulable", "over-max", "under-min", "empty-node"; "" for none
  std::string reason{};  // one sentence for the log, the Event and /status
  // No move for want of answers: a candidate's maintenance_status was not asked (the caller
  // asks the pods' MinIO and decides again).
  bool wants_health = false;
  // Likewise for rule 1: an unschedulable pod's volume_node was not looked up.
  bool wants_volumes = false;
};

// The one action this pass, or none with the reason. Pure: every input is in `in`.
MinioRebalanceDecision decideMinioRebalance(const MinioRebalanceInput& in);

// Ready nodes that are not cordoned: the nodes a rescheduled pod can go to.
std::int64_t countMinioNodes(const std::vector<kube::NodeRecord>& nodes);

struct MinioRebalanceOptions {
  std::string ns = "minio";
  // Where the storage migration state lives (agent/policy/storage_migration.h): read again
  // right before deleting; "" skips that re-check.
  std::string migration_namespace{};
  // GET path_and_query on host ("10.32.0.7:9000"): the HTTP status (tests and production use
  // s3::Client::healthStatus).
  std::function<base::Result<int>(const std::string& host, const std::string& path_and_query)>
      health{};
  // Dry run, fencing, Events, the action counter (agent/controller/effects.h).
  Effects effects{};
};

// What one pass did, for the controller's summary and /status.
struct MinioRebalanceOutcome {
  std::string summary{};  // "balanced: …", "waiting: …", "rescheduled …", "would reschedule …"
  nlohmann::json status{};  // {"decision", "rule", "pod", "claim", "dry_run"}
  bool acted = false;       // a PVC and a pod were deleted this pass
};

// Observes ha-minio's pods (API reads, not a cache), asks each running pod's MinIO its health
// in maintenance mode, decides, and applies the decision: (1) re-reads the pod and asks its
// health again, and re-reads the storage migration state, (2) asks is_leader_fresh, (3) deletes the
// PVC, (4) deletes the pod (uid precondition), (5) records Event MinioPodRescheduled on the pod.
// The caller runs it only when ha-minio is at its desired scale, healthy, and no migration is under
// way.
class MinioRebalancer {
 public:
  MinioRebalancer(kube::KubeClient& client, const base::Clock& clock,
                  MinioRebalanceOptions options);
  [[nodiscard]] base::Result<MinioRebalanceOutcome> pass(
      const nlohmann::json& statefulset, const std::vector<kube::NodeRecord>& nodes);

 private:
  [[nodiscard]] base::Status reschedule(const MinioRebalanceDecision& decision,
                                        const std::vector<std::string>& claim_templates);
  std::optional<int> maintenanceStatus(const std::string& host);
  // The node `claim`'s volume is bound to, read from the API ("" when not tied to one).
  base::Result<std::string> volumeNode(const std::string& claim);

  kube::KubeClient& client_;
  const base::Clock& clock_;
  MinioRebalanceOptions options_;
  std::string planned_;
};

}  // namespace ekco::agent
