// The controller contract: what every feature's controller is (Controller), what one run
// returns (ReconcileResult) and where it runs (Scope). The runtime's manager
// (agent/runtime/manager.h) schedules controllers; the features implement them; this header
// includes neither. A controller's spec, how the runtime builds it, is agent/controller/spec.h.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::agent {

enum class Scope { kNode, kLeader };
// "node", "leader"
inline std::string_view scopeName(Scope scope) { return scope == Scope::kNode ? "node" : "leader"; }

struct ReconcileResult {
  // One line for /status and logs: "config unchanged", "force-deleted 3 pods".
  std::string summary{};
  // The printable plan the decision produced (shown by /status; logged under --dry-run).
  std::string plan{};
  // Run again this long after this run (periodic work, a threshold about to pass).
  std::optional<std::chrono::milliseconds> requeue_after = std::nullopt;
};

class Controller {
 public:
  virtual ~Controller() = default;
  // Stable, kebab-case: "internal-load-balancer", "clear-nodes". Unique per manager.
  virtual std::string name() const = 0;
  // Observe, decide, act. Errors are returned (the manager backs off), never thrown.
  virtual base::Result<ReconcileResult> reconcile() = 0;
  // Its own object in /status (under its spec's status_key); null when it has nothing to show.
  virtual nlohmann::json status() const { return nullptr; }
  // Leader controllers: this agent started or stopped leading (on the elector's thread; quick).
  virtual void leadershipChanged(bool /*leading*/) {}
  // A pausable controller: why it must run even while paused (maintenance), "" when it need
  // not: the cluster is in a window it opened that must be closed (finished or rolled back)
  // rather than left as it is for as long as maintenance lasts. Its reconcile, run while
  // paused, must only close that window. Called under the manager's lock from any thread, so
  // quick and thread-safe, and never calling back into the manager.
  virtual std::string windowToClose() const { return {}; }
};

}  // namespace ekco::agent
