// Pointing this node's kubeconfigs at another API server address (`ekco set-kubeconfig-server`,
// EKCO's command, and one node's step of `ekco change-load-balancer`), then restarting kubelet
// so it reconnects there.
//
// The old address is kubelet.conf's server. Rewritten (agent/features/api_address/
// kubeconfig_server.h: only the server line changes):
//   kubelet.conf                          always;
//   admin.conf, super-admin.conf,         with `admin` (a control-plane node), each only where it
//   controller-manager.conf,              points at the old address (kubeadm points the last two
//   scheduler.conf                        at the local apiserver, which does not move).
// In order:
//   1. Read every file and make every new text; nothing is written when one cannot be read or
//      rewritten. Nothing to change (already there): done, kubelet untouched.
//   2. Dry run: say what would change; stop.
//   3. Back up the files that change to <kubernetes_dir>/.ekco-backup/kubeconfig-<stamp>/ (0700,
//      files 0600).
//   4. Write each atomically, keeping its mode.
//   5. Restart kubelet.service over the host's systemd (D-Bus), waiting for the job.
//   6. Verify (the caller's check: through the new address, this node is Ready and its kubelet
//      renewed its heartbeat Lease after the restart), polling until verify_timeout.
//   7. A failed restart or verification restores every file from the backup, restarts kubelet
//      again and is an error that says so.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "units/systemd_manager.h"

namespace ekco::agent::api_address {

inline constexpr std::string_view kKubeletUnit = "kubelet.service";

struct KubeconfigSwitchOptions {
  std::string server{};  // the new address, https://HOST[:PORT] (checkServerUrl)
  bool admin = false;    // a control-plane node: its admin and component kubeconfigs too
  std::string kubernetes_dir = "/etc/kubernetes";
  bool dry_run = false;
  // Restart and verify even when every file already points at `server` (a step resumed after
  // the files were written, before kubelet was restarted).
  bool restart_when_unchanged = false;
  // Names this run in its backup (the change's request id): a resumed run with the same id
  // finds the files it backed up, to finish the switch and to restore them on failure.
  std::string run_id{};
  base::WallTime now{};  // the backup's stamp
  std::chrono::milliseconds restart_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds verify_timeout{std::chrono::minutes(2)};
  std::chrono::milliseconds poll{std::chrono::seconds(2)};
};

struct KubeconfigSwitchDeps {
  hostfs::HostFs& fs;
  const base::Clock& clock;
  // kubelet's restart; may be null for a dry run.
  units::SystemdManager* systemd = nullptr;
  // Step 6, asked until it is ok or verify_timeout passed: `restarted_at` is when the restart
  // was asked for. Empty: no verification beyond the restart job's success.
  std::function<base::Status(base::WallTime restarted_at)> verify{};
};

struct KubeconfigSwitchReport {
  std::string old_server{};
  std::vector<std::string> changed{};  // file names ("kubelet.conf"), in the order written
  std::string backup_dir{};            // host path; "" when nothing was written
  std::vector<std::string> lines{};    // for people: what was done or would be, in order
};

[[nodiscard]] base::Result<KubeconfigSwitchReport> switchKubeconfigServer(
    const KubeconfigSwitchOptions& options, const KubeconfigSwitchDeps& deps);

// The verification of step 6 through the kubeconfig at `path` (host path in `fs`, the new
// kubelet.conf): `node`'s heartbeat Lease renewed at or after `since`, and the Node Ready.
[[nodiscard]] base::Status kubeletWorksThrough(const hostfs::HostFs& fs, const std::string& path,
                                               const std::string& node, base::WallTime since,
                                               const base::Clock& clock);

// Whether the API answers at `server` from this host with the credentials and CA of the
// kubeconfig at `path`: GET /version within 10 s (before anything is rewritten: the internal
// load balancer must be up here, the address reachable and its certificate valid for it).
[[nodiscard]] base::Status apiAnswersAt(const hostfs::HostFs& fs, const std::string& path,
                                        const std::string& server, const base::Clock& clock);

}  // namespace ekco::agent::api_address
