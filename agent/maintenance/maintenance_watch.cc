#include "agent/maintenance/maintenance_watch.h"

#include "base/os/thread.h"
#include "kube/resource.h"

namespace ekco::agent {

MaintenanceWatch::MaintenanceWatch(kube::KubeClient& client, const base::Clock& clock,
                                   std::string ns,
                                   std::function<void(const MaintenanceChange&)> on_change,
                                   std::function<void(const base::Error&)> on_error)
    : clock_(clock), ns_(std::move(ns)), on_change_(std::move(on_change)) {
  auto changed = [this] { check(); };
  informer_ = std::make_unique<kube::Informer<MaintenanceState>>(
      client, clock_, kube::resources::kConfigMaps, ns_,
      kube::InformerOptions{.field_selector = "metadata.name=" + std::string(kMaintenanceConfigMap),
                            // One small object: come back quickly after an outage.
                            .max_backoff = std::chrono::milliseconds(3000)},
      [](const nlohmann::json& object) -> base::Result<MaintenanceState> {
        return parseMaintenance(object);
      },
      kube::InformerHandlers<MaintenanceState>{
          .on_add = [changed](const MaintenanceState&) { changed(); },
          .on_update = [changed](const MaintenanceState&, const MaintenanceState&) { changed(); },
          .on_delete = [changed](const MaintenanceState&) { changed(); },
          .on_error = std::move(on_error)});
}

MaintenanceWatch::~MaintenanceWatch() { stop(); }

void MaintenanceWatch::start() {
  if (!thread_.joinable()) {
    thread_ = base::startThread("maintenance-watch", [this] { informer_->run(); });
  }
}

void MaintenanceWatch::stop() {
  informer_->stop();
  if (thread_.joinable()) thread_.join();
}

bool MaintenanceWatch::synced() const { return informer_->synced(); }

MaintenanceState MaintenanceWatch::state() const {
  return informer_->get(ns_, kMaintenanceConfigMap).value_or(MaintenanceState{});
}

bool MaintenanceWatch::mayAct() const { return synced() && !state().activeAt(clock_.wallNow()); }

std::string MaintenanceWatch::pauseReason() const {
  if (!synced()) return "maintenance state not read yet";
  const MaintenanceState s = state();
  if (!s.activeAt(clock_.wallNow())) return "";
  return "maintenance (" + s.reasonText() + ")";
}

void MaintenanceWatch::check() {
  if (!synced()) return;
  const MaintenanceState s = state();
  const bool active = s.activeAt(clock_.wallNow());
  MaintenanceChange change{.state = s, .active = active};
  // Held through the callback: the informer's thread and the agent's loop both check, and the
  // changes must be reported in the order they were seen.
  std::lock_guard lock(mu_);
  if (last_ && last_active_ == active && (!active || *last_ == s)) return;
  change.initial = !last_.has_value();
  change.expired = !active && last_active_ && s.expiredAt(clock_.wallNow());
  last_ = s;
  last_active_ = active;
  if (on_change_) on_change_(change);
}

}  // namespace ekco::agent
