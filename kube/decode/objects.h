// Typed views of the few kinds ekco reads: only the fields the controllers use (design.md
// "Inside a controller"). Parsed from the API's JSON; a field of the wrong type or a bad
// timestamp is a kParse error naming the object and the field:
//   parse Node node-a: spec.unschedulable: expected boolean, got string
// Absent optional fields are empty values, not errors (the API omits empty fields).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::kube {

struct Taint {
  std::string key{};
  std::string value{};
  std::string effect{};  // NoSchedule, PreferNoSchedule, NoExecute
  std::optional<base::WallTime> time_added = std::nullopt;
};

struct NodeCondition {
  std::string type{};    // Ready, MemoryPressure, ...
  std::string status{};  // True, False, Unknown
  std::optional<base::WallTime> last_transition_time = std::nullopt;
  std::optional<base::WallTime> last_heartbeat_time = std::nullopt;
};

struct NodeAddress {
  std::string type{};  // InternalIP, ExternalIP, Hostname
  std::string address{};
};

struct Node {
  std::string name{};
  std::string uid{};
  std::string resource_version{};
  std::map<std::string, std::string> labels{};
  std::map<std::string, std::string> annotations{};
  // Labelled node-role.kubernetes.io/control-plane or the older node-role.kubernetes.io/master.
  bool control_plane = false;
  bool unschedulable = false;
  std::vector<Taint> taints{};
  std::vector<NodeCondition> conditions{};
  std::vector<NodeAddress> addresses{};
  // status.nodeInfo.bootID as the kubelet reports it ("" when absent).
  std::string boot_id{};

  // The condition of that type, or null.
  const NodeCondition* condition(std::string_view type) const;
};

struct OwnerReference {
  std::string kind{};
  std::string name{};
  std::string uid{};
  bool controller = false;

  bool operator==(const OwnerReference&) const = default;
};

struct ContainerStatus {
  std::string name{};
  bool ready = false;
  // state.running.startedAt: set while the container runs.
  std::optional<base::WallTime> running_since = std::nullopt;

  bool operator==(const ContainerStatus&) const = default;
};

struct PodCondition {
  std::string type{};    // PodScheduled, Initialized, ContainersReady, Ready
  std::string status{};  // True, False, Unknown
  std::string reason{};  // ContainersNotReady, ...
  std::optional<base::WallTime> last_transition_time = std::nullopt;

  bool operator==(const PodCondition&) const = default;
};

struct Pod {
  std::string ns{};
  std::string name{};
  std::string uid{};
  std::string resource_version{};
  std::string node_name{};
  std::string phase{};  // Pending, Running, Succeeded, Failed, Unknown
  std::map<std::string, std::string> labels{};
  std::optional<base::WallTime> deletion_timestamp = std::nullopt;
  std::optional<std::int64_t> deletion_grace_period_seconds = std::nullopt;
  std::vector<OwnerReference> owner_references{};
  // spec.volumes[].persistentVolumeClaim.claimName, in volume order.
  std::vector<std::string> pvc_claim_names{};
  // The source kind of each volume, in order: "persistentVolumeClaim", "hostPath", "emptyDir",
  // "configMap", "rbd", "cephfs", "csi", ... (the key other than "name").
  std::vector<std::string> volume_kinds{};
  std::vector<ContainerStatus> container_statuses{};
  std::vector<PodCondition> conditions{};

  // The owner reference with controller: true, or null.
  const OwnerReference* controllerRef() const;
  // Every container status is ready (false when there are none).
  bool allContainersReady() const;
  // The container status / condition of that name / type, or null.
  const ContainerStatus* containerStatus(std::string_view container) const;
  const PodCondition* condition(std::string_view type) const;

  bool operator==(const Pod&) const = default;
};

struct Lease {
  std::string ns{};
  std::string name{};
  std::string resource_version{};
  std::string holder_identity{};
  std::optional<std::int64_t> lease_duration_seconds = std::nullopt;
  std::optional<base::WallTime> acquire_time = std::nullopt;
  std::optional<base::WallTime> renew_time = std::nullopt;
  std::int64_t lease_transitions = 0;
};

// A certificates.k8s.io/v1 CertificateSigningRequest, as the kubelet-serving approval reads it.
// Every field is kept, so the informer that caches these sees each change.
struct CertificateSigningRequest {
  std::string name{};
  std::string uid{};
  std::string resource_version{};
  std::string signer_name{};
  std::string username{};  // set by kube-apiserver from the authenticated creator
  std::vector<std::string> groups{};
  std::vector<std::string> usages{};
  std::optional<std::int64_t> expiration_seconds = std::nullopt;
  std::string request{};  // spec.request decoded from base64: the PEM text
  // status.conditions with status "True" (an absent status counts as "True", as the API's
  // helpers read it).
  bool approved = false;
  bool denied = false;
  bool failed = false;
  bool issued = false;  // status.certificate is set

  bool operator==(const CertificateSigningRequest&) const = default;
};

base::Result<Node> parseNode(const nlohmann::json& object);
base::Result<Pod> parsePod(const nlohmann::json& object);
base::Result<Lease> parseLease(const nlohmann::json& object);
// spec.request that is not base64 is a kParse error like a field of the wrong type.
base::Result<CertificateSigningRequest> parseCertificateSigningRequest(
    const nlohmann::json& object);

}  // namespace ekco::kube
