#include "kube/decode/records.h"

#include <algorithm>

namespace ekco::kube {

std::uint16_t volumeKindBit(std::string_view kind) {
  if (kind == "persistentVolumeClaim") return kVolumePersistentVolumeClaim;
  if (kind == "hostPath") return kVolumeHostPath;
  if (kind == "emptyDir") return kVolumeEmptyDir;
  if (kind == "cephfs") return kVolumeCephFs;
  if (kind == "rbd") return kVolumeRbd;
  if (kind == "csi") return kVolumeCsi;
  if (kind == "configMap" || kind == "secret" || kind == "projected" || kind == "downwardAPI") {
    return kVolumeConfigLike;
  }
  return kVolumeOther;
}

const ConditionRecord* NodeRecord::condition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

const TaintRecord* NodeRecord::taint(std::string_view key) const {
  for (const auto& t : taints) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

std::string_view NodeRecord::address(std::string_view type) const {
  for (const auto& a : addresses) {
    if (a.type == type) return a.address;
  }
  return {};
}

std::optional<std::string_view> NodeRecord::annotation(std::string_view key) const {
  for (const auto& [k, v] : ekco_annotations) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

NodeRecord toRecord(const Node& node) {
  NodeRecord r;
  r.name = Atom(node.name);
  r.uid = node.uid;
  for (const auto& [key, value] : node.labels) {
    if (key.starts_with(kNodeRoleLabelPrefix) && key.size() > kNodeRoleLabelPrefix.size()) {
      r.roles.emplace_back(std::string_view(key).substr(kNodeRoleLabelPrefix.size()));
    }
  }
  // std::map iterates in key order, so roles are already sorted.
  if (auto it = node.labels.find("kubernetes.io/hostname"); it != node.labels.end()) {
    r.hostname = Atom(it->second);
  }
  r.control_plane = node.control_plane;
  r.unschedulable = node.unschedulable;
  r.taints.reserve(node.taints.size());
  for (const auto& t : node.taints) {
    r.taints.push_back({.key = Atom(t.key),
                        .effect = Atom(t.effect),
                        .value = t.value,
                        .time_added = t.time_added});
  }
  r.conditions.reserve(node.conditions.size());
  for (const auto& c : node.conditions) {
    r.conditions.push_back({.type = Atom(c.type),
                            .status = Atom(c.status),
                            .last_transition_time = c.last_transition_time});
  }
  r.addresses.reserve(node.addresses.size());
  for (const auto& a : node.addresses) {
    r.addresses.push_back({.type = Atom(a.type), .address = a.address});
  }
  for (const auto& [key, value] : node.annotations) {
    if (key.starts_with(kEkcoAnnotationPrefix)) r.ekco_annotations.emplace_back(key, value);
  }
  r.boot_id = node.boot_id;
  return r;
}

PodRecord toRecord(const Pod& pod) {
  PodRecord r;
  r.ns = Atom(pod.ns);
  r.name = pod.name;
  r.uid = pod.uid;
  r.node_name = Atom(pod.node_name);
  r.phase = Atom(pod.phase);
  if (auto it = pod.labels.find("app"); it != pod.labels.end()) r.app = Atom(it->second);
  if (const OwnerReference* owner = pod.controllerRef()) {
    r.owner_kind = Atom(owner->kind);
  }
  r.deletion_timestamp = pod.deletion_timestamp;
  r.deletion_grace_period_seconds = pod.deletion_grace_period_seconds;
  for (const auto& kind : pod.volume_kinds) r.volume_kinds |= volumeKindBit(kind);
  const auto clamp = [](std::size_t n) {
    return static_cast<std::uint16_t>(std::min<std::size_t>(n, UINT16_MAX));
  };
  r.containers = clamp(pod.container_statuses.size());
  r.containers_ready = clamp(static_cast<std::size_t>(
      std::count_if(pod.container_statuses.begin(), pod.container_statuses.end(),
                    [](const ContainerStatus& c) { return c.ready; })));
  return r;
}

base::Result<NodeRecord> projectNode(const nlohmann::json& object) {
  auto node = parseNode(object);
  if (!node) return std::move(node).error();
  return toRecord(*node);
}

base::Result<PodRecord> projectPod(const nlohmann::json& object) {
  auto pod = parsePod(object);
  if (!pod) return std::move(pod).error();
  return toRecord(*pod);
}

}  // namespace ekco::kube
