// The controller manager: the one place in the agent that waits. Controllers are registered
// with a scope — node-local reconcilers run on every node, leader controllers only while this
// agent holds the Lease — and the manager runs each when it is woken (a watch event), when its
// requested requeue time comes, or after an error with jittered exponential backoff.
//
//   Manager manager(clock);
//   manager.add(Scope::kNode, haproxy);        // before run()
//   manager.add(Scope::kLeader, clear_nodes);
//   informer handlers → manager.wake("clear-nodes");
//   elector callbacks → manager.setLeader(true / false);
//   std::thread t = base::startThread("manager", [&] { manager.run(); });
//   ...  manager.stop(); t.join();
//
// Scheduling rules:
//   - Every controller runs once at start (its scope permitting), to reconcile what is there.
//   - A successful reconcile that asks for `requeue_after` runs again that much later — never
//     sooner than min_requeue (a controller that asks for 0, e.g. "look again at once" after an
//     action its caches have not caught up with, must not spin) and never later than a day;
//     one that does not ask runs again only when woken.
//   - A failed reconcile runs again after a backoff (initial_backoff doubling to max_backoff,
//     each wait uniform in [d/2, d]); a wake during the backoff is remembered but does not cut
//     it short, so a flood of watch events cannot turn an API outage into a retry storm. The
//     first success resets the backoff.
//   - Node and leader controllers run on two worker threads, so a long leader task (a purge)
//     never delays a node reconciler. Within a scope, controllers run one at a time, in
//     registration order when several are due.
//   - setLeader(false) stops leader controllers from starting; one that is running finishes
//     its call (it must ask the elector before every irreversible step: fencing).
//     setLeader(true) makes every leader controller due at once.
//   - A controller is never run concurrently with itself.
//   - Maintenance mode (agent/maintenance/maintenance.h): setPaused("maintenance (reason)") stops
//     the controllers registered as pausable from starting (a running one finishes its call:
//     its fencing check answers false too); their status says why. setPaused("") makes each of
//     them due at once. The one exception: a pausable controller whose windowToClose() is not
//     empty (it left the cluster in a state that must not last, such as MinIO with writes
//     stopped) keeps running while paused, to close that window, and its status says so
//     (`closing`).
//
// runDue() is the deterministic step the tests drive with a ManualClock; run() loops it on
// real time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "agent/controller/controller.h"
#include "base/clock.h"
#include "base/result.h"

namespace ekco::agent {

struct ControllerStatus {
  std::string name{};
  Scope scope = Scope::kNode;
  bool active = true;     // false: a leader controller on an agent that is not the leader
  bool pausable = false;  // registered as pausing in maintenance mode
  std::string paused{};   // why it does not run now ("maintenance (reason)"); "" when it may
  std::string closing{};  // paused, yet running to close this window (Controller::windowToClose)
  bool running = false;
  std::optional<base::WallTime> last_run = std::nullopt;  // start of the last reconcile
  std::string last_result{};                              // the last success's summary
  std::string last_error{};  // the last failure's message; cleared by a success
  std::string last_plan{};
  std::optional<base::WallTime> next_run = std::nullopt;  // scheduled; nullopt: on wake only
  std::chrono::nanoseconds last_duration{0};
  std::uint64_t runs = 0;
  std::uint64_t errors = 0;
  int consecutive_errors = 0;
};

struct ManagerOptions {
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
  // The shortest requeue_after honoured (see the scheduling rules).
  std::chrono::milliseconds min_requeue{100};
  // Workers wake at least this often, so liveness reflects a loop that is really turning.
  std::chrono::milliseconds heartbeat{1000};
  // Uniform in [0, 1) for backoff jitter; default a generator seeded from random_device.
  std::function<double()> random{};
  // Called after every reconcile (for metrics and logs), on the worker thread.
  std::function<void(const ControllerStatus& after, bool ok)> on_reconciled{};
};

class Manager {
 public:
  explicit Manager(const base::Clock& clock, ManagerOptions options = {});
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Registers a controller (before run()). A duplicate or empty name is kInvalidArgument.
  base::Status add(Scope scope, std::shared_ptr<Controller> controller,
                   bool pauses_in_maintenance = false);

  // Thread-safe; an unknown name is ignored (returns false).
  bool wake(std::string_view name);
  void wakeAll(Scope scope);
  void setLeader(bool leader);
  bool leader() const;
  // Why pausable controllers must not start now ("" = they may); see the scheduling rules.
  void setPaused(std::string reason);

  // Runs every due controller of the scope once, now, on the calling thread. Returns the
  // earliest time (monotonic) one of them is due next, or nullopt when none is scheduled.
  std::optional<base::MonoTime> runDue(Scope scope);

  // Runs both workers until stop(). Call once.
  void run();
  void stop();  // idempotent; a running reconcile finishes first

  std::vector<ControllerStatus> status() const;
  // Liveness: each worker is either waiting and went around its loop within `max_stall`, or is
  // inside a reconcile that started within `max_reconcile`.
  bool alive(std::chrono::milliseconds max_stall, std::chrono::milliseconds max_reconcile) const;

 private:
  struct Entry;
  struct Worker {
    std::optional<base::MonoTime> last_loop = std::nullopt;
    std::optional<base::MonoTime> busy_since = std::nullopt;
  };

  bool dueLocked(const Entry& e, base::MonoTime now) const;
  // Paused and not closing a window: it must not start now.
  bool heldLocked(const Entry& e) const;
  std::chrono::milliseconds backoffLocked(int consecutive_errors);
  void workerLoop(Scope scope);
  Worker& worker(Scope scope) { return scope == Scope::kNode ? node_worker_ : leader_worker_; }

  const base::Clock& clock_;
  ManagerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Entry>> entries_;
  bool leader_ = false;
  std::string paused_{};
  bool stopping_ = false;
  bool started_ = false;
  Worker node_worker_{};
  Worker leader_worker_{};
  std::mt19937_64 rng_;
};

}  // namespace ekco::agent
