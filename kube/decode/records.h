// The slim records the informer caches keep (design.md "Inside a controller"): only the fields
// ekco's controllers read, with repeated values interned (kube/decode/atom.h). A cached pod costs a
// few hundred bytes instead of the several KiB of its JSON (bench/, BENCHMARKS.md).
//
// Built from the typed views of kube/decode/objects.h, so malformed JSON is the same kParse error
// naming the object and field. Records compare with ==, which the informer uses to tell a
// change that matters (a condition flips, a taint appears) from one that does not (a
// heartbeat, a status field ekco never reads): handlers only see the former.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "kube/decode/atom.h"
#include "kube/decode/json_text.h"
#include "kube/decode/objects.h"

namespace ekco::kube {

struct TaintRecord {
  Atom key{};
  Atom effect{};
  std::string value{};
  std::optional<base::WallTime> time_added = std::nullopt;
  bool operator==(const TaintRecord&) const = default;
};

struct ConditionRecord {
  Atom type{};
  Atom status{};  // "True", "False", "Unknown"
  std::optional<base::WallTime> last_transition_time = std::nullopt;
  bool operator==(const ConditionRecord&) const = default;
};

struct AddressRecord {
  Atom type{};  // "InternalIP", "ExternalIP", "Hostname"
  std::string address{};
  bool operator==(const AddressRecord&) const = default;
};

// The annotation prefix ekco records its own state under (cordoned-by, purge progress); a
// node record keeps those annotations and no others.
inline constexpr std::string_view kEkcoAnnotationPrefix = "ekco.kurl.sh/";

struct NodeRecord {
  Atom name{};
  std::string uid{};
  // The <role> of every node-role.kubernetes.io/<role> label, sorted.
  std::vector<Atom> roles{};
  // The kubernetes.io/hostname label (Rook's OSD deployments select on it); may differ from
  // the node name.
  Atom hostname{};
  bool control_plane = false;  // a control-plane or master role
  bool unschedulable = false;
  std::vector<TaintRecord> taints{};
  // No heartbeat times: they change every few minutes and ekco decides on transitions.
  std::vector<ConditionRecord> conditions{};
  std::vector<AddressRecord> addresses{};
  // Annotations whose key starts with kEkcoAnnotationPrefix, sorted by key.
  std::vector<std::pair<std::string, std::string>> ekco_annotations{};
  // status.nodeInfo.bootID: changes only when the node boots (the shutdown beacon's proof).
  std::string boot_id{};

  const ConditionRecord* condition(std::string_view type) const;
  const TaintRecord* taint(std::string_view key) const;
  // The first address of that type, or "".
  std::string_view address(std::string_view type) const;
  // The value of an ekco annotation (full key), or nullopt.
  std::optional<std::string_view> annotation(std::string_view key) const;

  bool operator==(const NodeRecord&) const = default;
};

// Volume sources a pod uses, as bits of PodRecord::volume_kinds.
enum VolumeKind : std::uint16_t {
  kVolumePersistentVolumeClaim = 1U << 0U,
  kVolumeHostPath = 1U << 1U,
  kVolumeEmptyDir = 1U << 2U,
  kVolumeCephFs = 1U << 3U,
  kVolumeRbd = 1U << 4U,
  kVolumeCsi = 1U << 5U,
  kVolumeConfigLike = 1U << 6U,  // configMap, secret, projected, downwardAPI
  kVolumeOther = 1U << 7U,
};
// The VolumeKind bit of a pod volume's source key ("persistentVolumeClaim", "hostPath", ...);
// kVolumeOther for any other. Shared by both projections (records.cc, record_decode.cc).
std::uint16_t volumeKindBit(std::string_view kind);
// Node labels "node-role.kubernetes.io/<role>" name the node's roles.
inline constexpr std::string_view kNodeRoleLabelPrefix = "node-role.kubernetes.io/";

// 144 bytes, laid out without padding: the interned fields first, then the two strings that
// are each pod's own, then the optionals and the counts. Fields no controller reads are not kept
// (the owner's name and the PVC claim names were dropped for that: 50-100 B a pod).
struct PodRecord {
  Atom ns{};
  Atom node_name{};  // spec.nodeName ("" while unscheduled)
  Atom phase{};
  Atom app{};         // the app label ("rook-ceph-osd", "envoy", ...)
  Atom owner_kind{};  // the controller owner reference's kind
  std::string name{};
  std::string uid{};  // for delete preconditions: never delete a re-created namesake
  std::optional<base::WallTime> deletion_timestamp = std::nullopt;
  std::optional<std::int64_t> deletion_grace_period_seconds = std::nullopt;
  std::uint16_t volume_kinds = 0;  // VolumeKind bits
  std::uint16_t containers = 0;    // container statuses reported
  std::uint16_t containers_ready = 0;

  bool terminating() const { return deletion_timestamp.has_value(); }
  bool hasVolume(VolumeKind kind) const { return (volume_kinds & kind) != 0; }
  // Every container reports ready (false when none report).
  bool allContainersReady() const { return containers > 0 && containers_ready == containers; }

  bool operator==(const PodRecord&) const = default;
};

NodeRecord toRecord(const Node& node);
PodRecord toRecord(const Pod& pod);

// JSON → record, for a whole object already parsed (a GET's answer).
base::Result<NodeRecord> projectNode(const nlohmann::json& object);
base::Result<PodRecord> projectPod(const nlohmann::json& object);

// JSON text → record, for Informer<NodeRecord> / Informer<PodRecord>: simdjson On-Demand, no
// DOM (kube/decode/record_decode.cc). The same records and errors as projectNode / projectPod;
// `meta` gets metadata.name/.namespace/.resourceVersion, also when the object is rejected. An
// object without metadata.name is "object without metadata.name" (objectKey's error).
// metadata.name, .namespace and .resourceVersion of an object's text (each "" when absent or
// not a string); false when the text is not a JSON object.
bool decodeMeta(JsonText object, ObjectMeta& meta);

base::Result<NodeRecord> decodeNode(JsonText object, ObjectMeta& meta);
base::Result<PodRecord> decodePod(JsonText object, ObjectMeta& meta);

}  // namespace ekco::kube
