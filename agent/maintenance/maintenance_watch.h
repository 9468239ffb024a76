// Every agent's view of maintenance mode (agent/maintenance/maintenance.h): an informer on the one
// ConfigMap `ekco-maintenance` (field selector metadata.name), so a change reaches the runtime
// within one watch event, plus check(), which the agent's loop calls twice a second so an expiry
// takes effect without any API change.
//
// Until the first list completes, the state is unknown and mayAct() is false: an agent that
// starts while maintenance is on must not act in the moment before it has read the ConfigMap.
//
// on_change runs (on the informer's or the caller's thread, one call at a time, in order) whenever
// whether maintenance is active changes, or the active state's contents change (a new reason or
// expiry), with the new state.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/maintenance/maintenance.h"
#include "base/clock.h"
#include "kube/client.h"
#include "kube/watch/informer.h"

namespace ekco::agent {

struct MaintenanceChange {
  MaintenanceState state{};
  bool active = false;   // after the change
  bool expired = false;  // it ended because its expiry passed (not by `off`)
  bool initial = false;  // the first state read after start (not a change anyone made now)
};

class MaintenanceWatch {
 public:
  MaintenanceWatch(kube::KubeClient& client, const base::Clock& clock, std::string ns,
                   std::function<void(const MaintenanceChange&)> on_change,
                   std::function<void(const base::Error&)> on_error);
  ~MaintenanceWatch();
  MaintenanceWatch(const MaintenanceWatch&) = delete;
  MaintenanceWatch& operator=(const MaintenanceWatch&) = delete;

  void start();
  void stop();  // idempotent
  // Re-evaluates the state at the clock's now (the expiry) and reports a change.
  void check();

  bool synced() const;
  // Synced and not active now: the controllers that pause in maintenance may act.
  bool mayAct() const;
  MaintenanceState state() const;
  // Why the pausable controllers wait: "maintenance (reason)" / "maintenance state not read
  // yet"; "" when they may act.
  std::string pauseReason() const;
  kube::InformerStats stats() const { return informer_->stats(); }

 private:
  const base::Clock& clock_;
  std::string ns_;
  std::function<void(const MaintenanceChange&)> on_change_;
  std::unique_ptr<kube::Informer<MaintenanceState>> informer_;
  std::thread thread_;

  std::mutex mu_;                           // check(), through its callback
  std::optional<MaintenanceState> last_{};  // as last reported
  bool last_active_ = false;
};

}  // namespace ekco::agent
