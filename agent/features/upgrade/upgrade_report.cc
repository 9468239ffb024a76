#include "agent/features/upgrade/upgrade_report.h"

#include "base/log/log.h"
#include "base/utf8.h"
#include "kube/resource.h"

namespace ekco::agent {

UpgradeReporter::UpgradeReporter(kube::KubeClient& kube, const base::Clock& clock, std::string ns,
                                 std::string node)
    : kube_(kube), clock_(clock), ns_(std::move(ns)), node_(std::move(node)) {}

void UpgradeReporter::event(const std::string& reason, const std::string& message,
                            const std::string& type) {
  // An Event message is at most 1 KiB in practice (kubectl shows one line).
  std::string text(base::utf8Prefix(message, kube::kEventMessageBytes));
  base::Status recorded = node_.empty()
                              ? recordMaintenanceEvent(kube_, ns_, reason, text)
                              : kube_.recordEvent({.involved_resource = kube::resources::kNodes,
                                                   .involved_name = node_,
                                                   .reason = reason,
                                                   .message = text,
                                                   .type = type});
  if (!recorded) {
    base::logWarn("cannot record the upgrade Event",
                  {{"reason", reason}, {"error", recorded.error().message()}});
  }
}

base::Result<std::optional<MaintenanceState>> UpgradeReporter::foreignMaintenance() {
  auto state = readMaintenance(kube_, ns_);
  if (!state) return std::move(state).error();
  if (!state->activeAt(clock_.wallNow()) || state->by == kUpgradeMaintenanceBy) {
    return std::optional<MaintenanceState>();
  }
  return std::optional<MaintenanceState>(std::move(*state));
}

base::Status UpgradeReporter::enter(const std::string& reason, std::chrono::seconds expiry) {
  auto entered = enterMaintenance(
      kube_, ns_, {.reason = reason, .duration = expiry, .by = std::string(kUpgradeMaintenanceBy)},
      clock_);
  if (!entered) return std::move(entered).error();
  entered_ = true;
  base::logInfo("maintenance mode on for the upgrade",
                {{"until", describeMaintenance(*entered, clock_.wallNow())}});
  return base::ok();
}

void UpgradeReporter::leave() {
  if (!entered_) return;
  auto left = leaveMaintenance(kube_, ns_, std::string(kUpgradeMaintenanceBy));
  if (!left) {
    base::logWarn("cannot turn maintenance mode off after the upgrade (it expires by itself)",
                  {{"error", left.error().message()}});
    return;
  }
  entered_ = false;
  base::logInfo("maintenance mode off after the upgrade", {});
}

}  // namespace ekco::agent
