// The reboot procedures behind `ekco shutdown` and `ekco startup`
// (agent/features/reboot/shutdown_cmd.h): starts (EKCO's /opt/ekco/shutdown.sh and startup.sh,
// reference ekco.md §3.13), with bounds.
//
// shutdown, in order (every step runs even when an earlier one failed; exit 1 if any failed):
//   1. cordon   spec.unschedulable=true plus the markers
//                 ekco.kurl.sh/cordoned-by: shutdown
//                 ekco.kurl.sh/was-unschedulable: "true" | "false"
//               in one merge patch guarded by the Node's resourceVersion (a concurrent change is
//               a Conflict: read again and retry, bounded). was-unschedulable "true" means
//               someone else had cordoned the node before: ekco does not claim that cordon.
//               A node that already carries cordoned-by=shutdown and is unschedulable is left
//               as it is (a second run keeps the first run's record).
//   2. pods     delete (graceful, like `kubectl delete pod --wait=false`) every pod with
//               spec.nodeName=<node> outside shutdown_excluded_namespaces; mirror pods and pods
//               already terminating are skipped. Each delete is preconditioned on the pod's uid.
//   3. unmount  wait until the host's mount table (/proc/mounts via HostFs) has no PVC volume
//               of a pod (/var/lib/kubelet/pods/<uid>/volumes/.../pvc-...) and no CephFS mount
//               (a source containing ":6789:/"); a progress line every progress_interval;
//               bounded by shutdown_unmount_timeout (EKCO waited forever).
//   4. rook     delete this node's rook-ceph-operator* and rook-ceph-mds-* pods in rook-ceph, so
//               they reschedule elsewhere.
// The whole run has a deadline: start + unmount_timeout + deadline_margin. No API call starts
// after it and the unmount wait ends early enough to leave deadline_margin/2 for step 4, so the
// command returns by the deadline plus at most one API call's worst case (the CLI's client:
// 5 s per attempt, 2 attempts), i.e. within shutdown_unmount_timeout + 30 s.
//
// startup:
//   - A node that never joined (no /etc/kubernetes/kubelet.conf on the host) has nothing to
//     undo: exit 0 at once (runStartupCommand checks this before looking for a kubeconfig).
//   - Wait for the API (GET of this Node, every poll_interval), bounded by startup_api_timeout.
//     401/403 end the wait at once (the credentials will not get better).
//   - cordoned-by=shutdown and was-unschedulable="false": uncordon and remove both markers in
//     one patch (guarded by resourceVersion). cordoned-by=shutdown and was-unschedulable="true":
//     remove the markers, leave the node cordoned. No marker: leave the node as it is (an
//     unschedulable node is an admin's cordon and survives the reboot; logged).
//   - An admin who cordons the node again after ekco's shutdown cordoned it cannot be told
//     apart from ekco's cordon (the markers are still there): startup uncordons it.
#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/duration.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "kube/client.h"

namespace ekco::agent {

inline constexpr std::string_view kCordonedByAnnotation = "ekco.kurl.sh/cordoned-by";
inline constexpr std::string_view kCordonedByShutdown = "shutdown";
inline constexpr std::string_view kWasUnschedulableAnnotation = "ekco.kurl.sh/was-unschedulable";

// The overall bound of `ekco shutdown` is shutdown_unmount_timeout + this margin (plus one API
// call at most, see above).
inline constexpr std::chrono::seconds kShutdownDeadlineMargin{20};

using SleepFn = std::function<void(std::chrono::milliseconds)>;

struct ShutdownOptions {
  std::string node_name{};
  std::vector<std::string> excluded_namespaces{};
  base::Duration unmount_timeout = std::chrono::minutes(5);
  base::Duration deadline_margin = kShutdownDeadlineMargin;
  std::chrono::milliseconds poll_interval{1000};      // re-reads of the mount table
  std::chrono::milliseconds progress_interval{5000};  // "waiting for ... to unmount" lines
  int cordon_attempts = 5;
  std::chrono::milliseconds cordon_retry_delay{2000};
  bool dry_run = false;
  SleepFn sleep{};  // default: std::this_thread::sleep_for
};

struct StartupOptions {
  std::string node_name{};
  base::Duration api_timeout = std::chrono::minutes(10);
  std::chrono::milliseconds poll_interval{2000};
  std::chrono::milliseconds progress_interval{10000};
  int uncordon_attempts = 5;
  bool dry_run = false;
  SleepFn sleep{};
  // Called with the Node as read, before the uncordon (the shutdown beacon's proof of reboot,
  // agent/features/reboot/shutdown_beacon.h); returns the Node as it is afterwards. kConflict: read
  // the Node again and retry (an attempt); another error fails the "beacon" step and the uncordon
  // still runs.
  std::function<base::Result<nlohmann::json>(const nlohmann::json& node)> before_uncordon{};
};

// What a run did: one entry per failed step ("cordon: ...", "unmount: ..."); empty = success.
struct RebootStepReport {
  std::vector<std::string> failures{};
  bool ok() const { return failures.empty(); }
};

// One pod volume mount that shutdown waits for.
struct PodVolumeMount {
  std::string source{};
  std::string mount_point{};
};

// The mounts of /proc/mounts text that hold a PVC of a pod or a CephFS volume (octal escapes
// such as \040 in paths are decoded).
std::vector<PodVolumeMount> podVolumeMounts(std::string_view proc_mounts);

RebootStepReport shutdownNode(kube::KubeClient& client, const hostfs::HostFs& host_fs,
                              const base::Clock& clock, const ShutdownOptions& options);

// True when /etc/kubernetes/kubelet.conf exists on the host (the node joined a cluster).
base::Result<bool> nodeJoined(const hostfs::HostFs& host_fs);

RebootStepReport startupNode(kube::KubeClient& client, const base::Clock& clock,
                             const StartupOptions& options);

}  // namespace ekco::agent
