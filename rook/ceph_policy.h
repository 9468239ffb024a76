// What ekco's Rook controller (agent/features/rook/rook_ceph.h) decides, as pure functions over
// what it read: `ceph osd tree -f json`, the CephCluster, the pools' custom resources, the nodes.
// EKCO's rules (../shared/reference/ekco.md §3.3), with its bugs fixed:
//   - the host count is read from `ceph osd tree -f json` (JSON, any OSD id), not from
//     `ceph osd status` with a one-digit regex that ignored OSD ids >= 10;
//   - a lower host count lowers nothing until it has lasted longer than a hold-down, and never
//     while OSDs are down but in (EKCO's hourly full reconcile lowered the block pool at once;
//     ekco#26 is the mon 3 -> 1 incident that made mon and mgr counts increase-only).
#pragma once

#include <cstdint>
#include <deque>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"

namespace ekco::rook {

struct OsdState {
  std::int64_t id = 0;
  bool up = false;
  bool in = false;  // reweight > 0 (an "out" OSD has reweight 0)
  std::string host{};
};

struct OsdTree {
  std::vector<OsdState> osds{};  // every OSD under a host bucket, by id
  // Hosts with at least one up OSD: Ceph's failure domain, what a replica needs.
  std::set<std::string> up_hosts{};
  std::set<std::string> hosts{};  // every host bucket with an OSD
  std::vector<std::int64_t> down_in() const;
  std::vector<std::int64_t> down() const;
};

// Parses `ceph osd tree -f json` ({"nodes":[{"id":-3,"type":"host","name":..,"children":[..]},
// {"id":11,"type":"osd","status":"up","reweight":1,..}],"stray":[..]}). kParse with a one-line
// reason when it is not that shape. OSDs not under a host (stray, or a host-less crush location)
// do not count.
base::Result<OsdTree> parseOsdTree(std::string_view text);

// clamp(up_hosts, min, max).
std::int64_t replicationFactor(std::int64_t up_hosts, std::int64_t min, std::int64_t max);

// The hold-down of decreases: remembers the factor's history for `hold`, and answers the lowest
// size a decrease may go to now: the highest factor seen within the last `hold` (so 3 -> 2 -> 3
// inside it lowers nothing), or nullopt while the history is shorter than `hold` (a new leader
// does not know how long a low count has lasted, so it waits the full hold-down first).
class HoldDown {
 public:
  explicit HoldDown(base::Duration hold) : hold_(hold) {}
  void observe(std::int64_t factor, base::MonoTime now);
  std::optional<std::int64_t> decreaseFloor(base::MonoTime now) const;
  // For /status: since when the factor has been at its current value.
  std::optional<base::MonoTime> since() const;

 private:
  base::Duration hold_;
  std::optional<base::MonoTime> first_{};
  std::deque<std::pair<base::MonoTime, std::int64_t>> changes_{};  // (since, factor)
};

enum class PoolPolicy {
  kFollow,     // set to the factor (CephBlockPool, the built-in .mgr/device_health_metrics)
  kRaiseOnly,  // only ever raised (CephFilesystem and CephObjectStore pools, as EKCO)
};

struct SizeDecision {
  std::optional<std::int64_t> set{};  // the size to set now; nullopt: leave it
  bool decrease = false;              // `set` lowers the size (ask Ceph first)
  std::string reason{};               // one line, for the log, the Event and /status
};

// The size of one pool. `floor` is HoldDown::decreaseFloor(); `down_in` the OSDs down but in.
SizeDecision decidePoolSize(std::int64_t current, std::int64_t factor, PoolPolicy policy,
                            std::optional<std::int64_t> floor,
                            const std::vector<std::int64_t>& down_in);

// mon count: 3 at >= 3 hosts with an up OSD; mgr count: 2 at >= 2. Only ever raised (ekco#26).
std::optional<std::int64_t> desiredMonCount(std::int64_t current, std::int64_t up_hosts);
std::optional<std::int64_t> desiredMgrCount(std::int64_t current, std::int64_t up_hosts);

// The JSON patch appending `candidates` missing from the CephCluster's spec.storage.nodes (as
// {name}), guarded by a test of metadata.resourceVersion; nullopt when none is missing or the
// cluster uses all nodes (spec.storage.useAllNodes). Never removes a node (the purge does).
std::optional<nlohmann::json> storageNodesAppendPatch(const nlohmann::json& ceph_cluster,
                                                      const std::vector<std::string>& candidates);
// The node names in spec.storage.nodes.
std::vector<std::string> storageNodeNames(const nlohmann::json& ceph_cluster);

// MDS placement: whether a CephFilesystem still has kURL's single-node placement (exactly two
// preferred anti-affinity terms under spec.metadataServer.placement.podAntiAffinity, EKCO's
// marker), and the merge patch that replaces it with required anti-affinity on
// kubernetes.io/hostname plus preferred (weight 100) on topology.kubernetes.io/zone.
bool hasSingleNodeMdsPlacement(const nlohmann::json& filesystem);
nlohmann::json multiNodeMdsPlacementPatch();

// Ceph CSI resources: the CSI_*_RESOURCE keys of rook-ceph/rook-ceph-operator-config and EKCO's
// recommended requests/limits for each (YAML lists of {name, resource}).
const std::vector<std::pair<std::string, std::string>>& cephCsiResources();
// The merge patch {"data": {...}} when any key differs from `config_map`'s data; else nullopt.
std::optional<nlohmann::json> cephCsiResourcesPatch(const nlohmann::json& config_map);

// `ceph osd safe-to-destroy IDS -f json` answered that every id is safe
// ({"safe_to_destroy":[..],"active":[..],...}; the exit status is not the answer: it is 0 here
// even when it says no). kParse for another shape.
base::Result<bool> safeToDestroy(std::string_view text, const std::vector<std::int64_t>& ids);

}  // namespace ekco::rook
