// The shutdown beacon and its proof of reboot (issue 20; peers.md §1.8, §5 idea 2).
//
// `ekco shutdown`, once this node's pods are deleted and its pod volumes unmounted, records on
// its Node that it is going down on purpose:
//   ekco.kurl.sh/shutdown-at:      RFC 3339 time of the record
//   ekco.kurl.sh/shutdown-boot-id: /proc/sys/kernel/random/boot_id of the boot that is ending
// The leader (agent/features/reboot/node_recovery.h) reads it to apply
// node.kubernetes.io/out-of-service=nodeshutdown:NoExecute as soon as the node stops reporting,
// and marks the taint as its own with ekco.kurl.sh/out-of-service-by: ekco.
//
// `ekco startup`, once the API answers and before it uncordons:
//   - a beacon whose boot id differs from this boot's: the node rebooted (proof). The
//     out-of-service taint is removed if ekco added it (never a person's, which has no
//     out-of-service-by: ekco beside it), and the beacon and the marker are removed, in one merge
//     patch guarded by the Node's resourceVersion.
//   - a beacon with this boot's id: the shutdown did not end in a reboot (the unit was restarted,
//     or the power-off was aborted). The beacon is removed so the leader cannot act on it later;
//     an ekco taint stays for the leader, which removes it once the kubelet reports Ready.
//   - no beacon: nothing.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"
#include "kube/decode/records.h"

namespace ekco::agent {

inline constexpr std::string_view kShutdownAtAnnotation = "ekco.kurl.sh/shutdown-at";
inline constexpr std::string_view kShutdownBootIdAnnotation = "ekco.kurl.sh/shutdown-boot-id";
inline constexpr std::string_view kOutOfServiceByAnnotation = "ekco.kurl.sh/out-of-service-by";
inline constexpr std::string_view kOutOfServiceByEkco = "ekco";
// The timeAdded of the taint ekco applied, beside the marker: ekco's taint is the one with that
// timeAdded. A person's `kubectl taint … out-of-service-` removes the taint but not the markers,
// and a taint the person applies later has another timeAdded, so it is never taken for ekco's.
inline constexpr std::string_view kOutOfServiceAtAnnotation = "ekco.kurl.sh/out-of-service-at";
inline constexpr std::string_view kTaintOutOfService = "node.kubernetes.io/out-of-service";
inline constexpr std::string_view kOutOfServiceValue = "nodeshutdown";
inline constexpr std::string_view kBootIdPath = "/proc/sys/kernel/random/boot_id";

// The host's current boot id, trimmed; kParse when it is not a UUID (36 characters, hex digits
// and dashes).
base::Result<std::string> readBootId(const hostfs::HostFs& host_fs);

struct Beacon {
  base::WallTime at{};
  std::string boot_id{};
};

// The node's beacon, or nullopt when it has none (or an unreadable one: a beacon must prove
// something, so a malformed time or an empty boot id is no beacon).
std::optional<Beacon> beaconOf(const kube::NodeRecord& node);
// The node's out-of-service taint (any value or effect), or null.
const kube::TaintRecord* outOfServiceTaint(const kube::NodeRecord& node);
// It carries the out-of-service taint and ekco's marker beside it, whose recorded timeAdded is
// the taint's (a marker without one, written before ekco recorded it, counts on the marker alone).
bool outOfServiceByEkco(const kube::NodeRecord& node);

// (1) of the beacon: the merge patch `ekco shutdown` sends. Exposed for tests.
nlohmann::json beaconPatch(base::WallTime at, const std::string& boot_id);

// Records the beacon on `node_name` (dry run: logs it). Errors name the step.
base::Status recordShutdownBeacon(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                                  const base::Clock& clock, const std::string& node_name,
                                  bool dry_run);

// `ekco startup`'s part (see above), on the Node as just read. Returns the Node as the API has
// it afterwards (the input when nothing changed or in a dry run), so the uncordon that follows
// is guarded by the right resourceVersion; kConflict when the Node changed meanwhile (read it
// again and call again).
base::Result<nlohmann::json> settleBeaconOnStartup(kube::KubeClient& client,
                                                   const nlohmann::json& node,
                                                   const std::string& boot_id, bool dry_run);

}  // namespace ekco::agent
