// The agent's shutdown inhibitor: a logind delay lock on "shutdown", held while the agent runs,
// so that a power-off waits (up to logind's InhibitDelayMaxSec) for the node's drain, which the
// agent runs at PrepareForShutdown(true) while the API, the network and the container runtime
// are surely still up — ekco-reboot.service's stop job, ordered before kubelet and containerd
// stop, races nothing that it can see, but the network or a remote API may already be going.
// kubelet's graceful node shutdown takes the same kind of lock.
//
//   1. connect to logind, take the lock, read InhibitDelayMaxUSec (a connection or a call that
//      fails is retried every retry_interval; /status says why)
//   2. PrepareForShutdown(true): write the marker "draining"
// (agent/features/reboot/shutdown_drain.h), run
//      the drain, write "drained" or "failed", then release the lock (logind goes on at once)
//   3. PrepareForShutdown(false) (the shutdown was cancelled): remove the marker, take the lock
//      again. The node stays cordoned (logged): `ekco startup` undoes it.
// ekco-reboot.service's stop job stays the fallback (no agent, no logind, a drain that failed);
// the marker keeps the two from ever draining together.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/controller/service.h"
#include "base/clock.h"
#include "base/result.h"
#include "hostfs/host_fs.h"
#include "units/logind.h"

namespace ekco::agent {

struct ShutdownInhibitorOptions {
  std::string who = "ekco";
  std::string why = "drain the node (cordon, delete its pods, wait for volumes) before shutdown";
  // What the drain may need (`ekco shutdown`'s bound: shutdown_unmount_timeout + 30 s); a shorter
  // InhibitDelayMaxSec is warned about, because logind then goes on before the drain ends.
  std::chrono::milliseconds drain_bound{std::chrono::minutes(5) + std::chrono::seconds(30)};
  std::chrono::milliseconds retry_interval{std::chrono::seconds(30)};
  // How long one wait for a signal lasts (how soon stop() is noticed).
  std::chrono::milliseconds poll{std::chrono::milliseconds(500)};
  long pid = 0;  // this process, for the marker
};

class ShutdownInhibitor final : public AgentService {
 public:
  using Connect = std::function<base::Result<std::unique_ptr<units::Logind>>()>;
  // The node's drain (drainNodeForShutdown); true when every step succeeded.
  using Drain = std::function<bool()>;
  // The host's boot id ("" when unreadable), for the marker.
  using BootId = std::function<std::string()>;

  ShutdownInhibitor(Connect connect, Drain drain, BootId boot_id, hostfs::HostFs& host_fs,
                    ShutdownInhibitorOptions options);
  ShutdownInhibitor(const ShutdownInhibitor&) = delete;
  ShutdownInhibitor& operator=(const ShutdownInhibitor&) = delete;

  // Steps 1-3 until stop(); a drain in progress finishes first.
  void run() override;
  void stop() override;

  // {held, state, inhibit_delay_max, drain_bound, delay_too_short, drains, last_drain,
  //  last_error} for /status and `ekco status`.
  nlohmann::json status() const override;
  bool held() const;

 private:
  void setError(const std::string& what);
  bool sleepUnlessStopped(std::chrono::milliseconds d);
  void onPrepareForShutdown(bool& lock_released);

  Connect connect_;
  Drain drain_;
  BootId boot_id_;
  hostfs::HostFs& host_fs_;
  ShutdownInhibitorOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool held_ = false;
  std::string state_ = "starting";  // starting | waiting | draining | released | unavailable
  std::chrono::microseconds delay_max_{0};
  bool delay_known_ = false;
  int drains_ = 0;
  std::string last_drain_;  // "drained" | "failed" | ""
  std::string last_error_;
  std::unique_ptr<units::Logind> logind_;
  base::UniqueFd lock_;
};

// The agent's inhibitor, with the real parts: logind on the host's system bus
// (units::systemBusAddress(host_root)), the drain of `ekco shutdown` through a client built as the
// commands build theirs (5 s attempts, one retry, so its bound holds), the host's boot id.
// nullptr when the reboot procedure is off (disable_reboot_service) or in a dry run (which must
// not mark the node drained for the stop job).
std::unique_ptr<AgentService> makeAgentShutdownInhibitor(const ServiceDeps& deps);

// The service's spec, for the table (agent/features/table.cc).
ServiceSpec shutdownInhibitorSpec();

}  // namespace ekco::agent
