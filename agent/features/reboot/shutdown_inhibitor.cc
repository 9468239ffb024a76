#include "agent/features/reboot/shutdown_inhibitor.h"

#include <unistd.h>

#include <utility>

#include "agent/edge/command_env.h"
#include "agent/features/reboot/shutdown_beacon.h"
#include "agent/features/reboot/shutdown_drain.h"
#include "base/duration.h"
#include "base/log/log.h"
#include "units/systemd_manager.h"

namespace ekco::agent {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

ShutdownInhibitor::ShutdownInhibitor(Connect connect, Drain drain, BootId boot_id,
                                     hostfs::HostFs& host_fs, ShutdownInhibitorOptions options)
    : connect_(std::move(connect)),
      drain_(std::move(drain)),
      boot_id_(std::move(boot_id)),
      host_fs_(host_fs),
      options_(std::move(options)) {}

void ShutdownInhibitor::stop() {
  std::lock_guard lock(mu_);
  stop_ = true;
  cv_.notify_all();
}

bool ShutdownInhibitor::held() const {
  std::lock_guard lock(mu_);
  return held_;
}

bool ShutdownInhibitor::sleepUnlessStopped(milliseconds d) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, d, [&] { return stop_; });
  return !stop_;
}

void ShutdownInhibitor::setError(const std::string& what) {
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = last_error_ != what;
    last_error_ = what;
    held_ = false;
    state_ = "unavailable";
  }
  // Logged once per distinct error, not every retry.
  if (changed) {
    base::logWarn("shutdown inhibitor unavailable; ekco-reboot.service's stop job drains instead",
                  {{"error", what}, {"retry", options_.retry_interval}});
  }
  lock_.reset();
  logind_.reset();
}

void ShutdownInhibitor::run() {
  bool released_for_shutdown = false;  // (2) done: no new lock until PrepareForShutdown(false)
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stop_) break;
    }
    // (1)
    if (!logind_) {
      auto connected = connect_();
      if (!connected) {
        setError(connected.error().message());
        if (!sleepUnlessStopped(options_.retry_interval)) break;
        continue;
      }
      logind_ = std::move(*connected);
    }
    if (!lock_.valid() && !released_for_shutdown) {
      auto fd = logind_->inhibitShutdownDelay(options_.who, options_.why);
      if (!fd) {
        setError(fd.error().message());
        if (!sleepUnlessStopped(options_.retry_interval)) break;
        continue;
      }
      lock_ = std::move(*fd);
      auto delay = logind_->inhibitDelayMax();
      std::lock_guard lock(mu_);
      held_ = true;
      state_ = "waiting";
      last_error_.clear();
      delay_known_ = delay.has_value();
      if (delay) delay_max_ = *delay;
      const bool too_short =
          delay_known_ && duration_cast<milliseconds>(delay_max_) < options_.drain_bound;
      base::log(too_short ? base::LogLevel::kWarn : base::LogLevel::kInfo,
                too_short ? "shutdown inhibitor lock taken; logind's InhibitDelayMaxSec is "
                            "shorter than the drain may take (the stop job finishes a longer one)"
                          : "shutdown inhibitor lock taken",
                {{"inhibit_delay_max",
                  delay_known_ ? base::formatDuration(duration_cast<milliseconds>(delay_max_))
                               : std::string("unknown")},
                 {"drain_bound", base::formatDuration(options_.drain_bound)}});
    }
    auto signal = logind_->waitPrepareForShutdown(options_.poll);
    if (!signal) {
      setError(signal.error().message());
      if (!sleepUnlessStopped(options_.retry_interval)) break;
      continue;
    }
    if (!signal->has_value()) continue;
    if (**signal) {
      if (!lock_.valid()) continue;  // a second PrepareForShutdown(true): already done
      // (2)
      onPrepareForShutdown(released_for_shutdown);
    } else {
      // (3)
      released_for_shutdown = false;
      if (auto removed = removeShutdownMarker(host_fs_); !removed) {
        base::logWarn("shutdown cancelled: cannot remove the drain marker",
                      {{"error", removed.error()}});
      }
      base::logWarn(
          "shutdown cancelled (PrepareForShutdown false): the node stays cordoned; `ekco startup` "
          "uncordons it",
          {});
    }
  }
  lock_.reset();
  logind_.reset();
  std::lock_guard lock(mu_);
  held_ = false;
  state_ = "stopped";
}

void ShutdownInhibitor::onPrepareForShutdown(bool& lock_released) {
  const std::string boot = boot_id_();
  {
    std::lock_guard lock(mu_);
    state_ = "draining";
  }
  base::logInfo("system shutting down: draining the node while holding the inhibitor lock", {});
  // Without a boot id the stop job could not tell this boot's marker from an old one: it drains
  // again, which is safe (every step is idempotent), only slower.
  if (auto w = writeShutdownMarker(
          host_fs_, {.state = DrainState::kDraining, .pid = options_.pid, .boot_id = boot});
      !w) {
    base::logWarn("shutdown: cannot write the drain marker", {{"error", w.error()}});
  }
  const bool ok = drain_();
  if (auto w = writeShutdownMarker(
          host_fs_,
          {.state = ok ? DrainState::kDrained : DrainState::kFailed, .pid = 0, .boot_id = boot});
      !w) {
    base::logWarn("shutdown: cannot write the drain marker", {{"error", w.error()}});
  }
  lock_.reset();  // logind goes on now
  lock_released = true;
  std::lock_guard lock(mu_);
  held_ = false;
  state_ = "released";
  ++drains_;
  last_drain_ = ok ? "drained" : "failed";
  base::log(ok ? base::LogLevel::kInfo : base::LogLevel::kWarn,
            ok ? "shutdown: node drained; inhibitor lock released"
               : "shutdown: the drain failed; inhibitor lock released, the stop job tries again",
            {});
}

std::unique_ptr<AgentService> makeAgentShutdownInhibitor(const ServiceDeps& deps) {
  // A dry run changes nothing, so it must not tell the stop job that the node was drained.
  if (deps.config.disable_reboot_service || deps.dry_run) return nullptr;
  // The references outlive the service (ServiceDeps); the lambdas keep them, not `deps`.
  const Config& config = deps.config;
  const std::string& node_name = deps.node_name;
  const std::string& host_root = deps.host_root;
  const std::string& kubeconfig = deps.kubeconfig;
  const kube::Environment& env = deps.env;
  const std::string& working_dir = deps.working_dir;
  const base::Clock& clock = deps.clock;
  hostfs::HostFs& host_fs = deps.host_fs;
  const std::string bus = units::systemBusAddress(host_root);
  auto connect = [bus, &clock] { return units::connectLogind(bus, clock); };
  auto drain = [&config, &node_name, &host_root, &kubeconfig, &env, &working_dir, &clock]() {
    CommandClient c;
    kube::RestClientOptions rest;
    rest.request_timeout = std::chrono::seconds(5);
    rest.retry.max_attempts = 2;
    rest.reporting_instance = node_name;
    // An agent that may not lead holds no cluster-wide write (the worker DaemonSet's
    // ekco-node): it drains as the node itself, with the kubelet's credentials, which the Node
    // authorizer and NodeRestriction confine to this node, its pods and Events — what
    // `ekco shutdown` uses on a worker too.
    if (auto built = buildClient(c,
                                 {.host_root = host_root,
                                  .kubeconfig = kubeconfig,
                                  .node_credentials = !config.leader_election_candidate,
                                  .rest = std::move(rest)},
                                 env, working_dir, clock);
        !built) {
      base::logError("shutdown: no API client", {{"error", built.error()}});
      return false;
    }
    return drainNodeForShutdown(*c.client, *c.host_fs, clock, config, node_name,
                                /*dry_run=*/false)
        .ok();
  };
  auto boot_id = [&host_fs]() {
    auto id = readBootId(host_fs);
    return id ? *id : std::string();
  };
  ShutdownInhibitorOptions inhibitor;
  inhibitor.drain_bound =
      duration_cast<milliseconds>(config.shutdown_unmount_timeout) + std::chrono::seconds(30);
  inhibitor.pid = static_cast<long>(::getpid());
  return std::make_unique<ShutdownInhibitor>(std::move(connect), std::move(drain),
                                             std::move(boot_id), host_fs, std::move(inhibitor));
}

ServiceSpec shutdownInhibitorSpec() {
  return {.name = "inhibitor",
          .status_key = "shutdown_inhibitor",
          .build = [](const ServiceDeps& deps) { return makeAgentShutdownInhibitor(deps); }};
}

nlohmann::json ShutdownInhibitor::status() const {
  std::lock_guard lock(mu_);
  nlohmann::json out;
  out["held"] = held_;
  out["state"] = state_;
  out["inhibit_delay_max"] =
      delay_known_ ? nlohmann::json(base::formatDuration(duration_cast<milliseconds>(delay_max_)))
                   : nlohmann::json(nullptr);
  out["drain_bound"] = base::formatDuration(options_.drain_bound);
  out["delay_too_short"] =
      delay_known_ && duration_cast<milliseconds>(delay_max_) < options_.drain_bound;
  out["drains"] = drains_;
  out["last_drain"] = last_drain_;
  out["last_error"] = last_error_;
  return out;
}

}  // namespace ekco::agent
