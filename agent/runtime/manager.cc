#include "agent/runtime/manager.h"

#include <algorithm>
#include <exception>

#include "base/log/log.h"
#include "base/os/thread.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;

namespace {

// Controllers return errors as values, and third-party exceptions stop in their adapters, so an
// exception out of reconcile() is a bug. It is this run's error, logged and backed off like any
// other, rather than the end of the agent and of every other controller with it.
base::Result<ReconcileResult> reconcileCatching(Controller& controller) {
  try {
    return controller.reconcile();
  } catch (const std::exception& e) {
    base::logError("controller threw; its run counts as failed",
                   {{"controller", controller.name()}, {"exception", e.what()}});
    return Error(std::string("internal error: reconcile threw: ") + e.what());
  }
}

}  // namespace

struct Manager::Entry {
  Scope scope = Scope::kNode;
  std::shared_ptr<Controller> controller{};
  bool woken = true;  // every controller runs once at start
  std::optional<base::MonoTime> next_due = std::nullopt;
  std::optional<base::MonoTime> backoff_until = std::nullopt;
  ControllerStatus status{};
};

Manager::Manager(const base::Clock& clock, ManagerOptions options)
    : clock_(clock), options_(std::move(options)), rng_(std::random_device()()) {}

Manager::~Manager() { stop(); }

base::Status Manager::add(Scope scope, std::shared_ptr<Controller> controller,
                          bool pauses_in_maintenance) {
  if (!controller) return Error("manager: null controller", ErrorCode::kInvalidArgument);
  std::string name = controller->name();
  if (name.empty()) return Error("manager: controller without a name", ErrorCode::kInvalidArgument);
  std::lock_guard lock(mu_);
  if (started_) {
    return Error("manager: add " + name + " after run()", ErrorCode::kInvalidArgument);
  }
  for (const auto& e : entries_) {
    if (e->status.name == name) {
      return Error("manager: controller " + name + " registered twice",
                   ErrorCode::kInvalidArgument);
    }
  }
  auto entry = std::make_unique<Entry>();
  entry->scope = scope;
  entry->controller = std::move(controller);
  entry->status.name = std::move(name);
  entry->status.scope = scope;
  entry->status.pausable = pauses_in_maintenance;
  entries_.push_back(std::move(entry));
  return base::ok();
}

bool Manager::wake(std::string_view name) {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e->status.name == name) {
      e->woken = true;
      cv_.notify_all();
      return true;
    }
  }
  return false;
}

void Manager::wakeAll(Scope scope) {
  std::lock_guard lock(mu_);
  for (auto& e : entries_) {
    if (e->scope == scope) e->woken = true;
  }
  cv_.notify_all();
}

void Manager::setLeader(bool leader) {
  std::lock_guard lock(mu_);
  if (leader && !leader_) {
    for (auto& e : entries_) {
      if (e->scope == Scope::kLeader) e->woken = true;
    }
  }
  leader_ = leader;
  cv_.notify_all();
}

void Manager::setPaused(std::string reason) {
  std::lock_guard lock(mu_);
  if (!reason.empty() == !paused_.empty()) {
    paused_ = std::move(reason);
    return;
  }
  if (reason.empty()) {
    // Resumed: each pausable controller looks again now (what it was woken for, or what became
    // due, was held back).
    for (auto& e : entries_) {
      if (e->status.pausable) e->woken = true;
    }
  }
  paused_ = std::move(reason);
  cv_.notify_all();
}

bool Manager::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

bool Manager::heldLocked(const Entry& e) const {
  return e.status.pausable && !paused_.empty() && e.controller->windowToClose().empty();
}

bool Manager::dueLocked(const Entry& e, base::MonoTime now) const {
  if (e.scope == Scope::kLeader && !leader_) return false;
  if (e.status.running) return false;
  if (heldLocked(e)) return false;
  if (e.backoff_until && now < *e.backoff_until) return false;
  if (e.woken) return true;
  return e.next_due && *e.next_due <= now;
}

std::chrono::milliseconds Manager::backoffLocked(int consecutive_errors) {
  auto delay = options_.initial_backoff;
  for (int i = 1; i < consecutive_errors && delay < options_.max_backoff; ++i) delay *= 2;
  delay = std::min(delay, options_.max_backoff);
  double r = 0;
  if (options_.random) {
    r = options_.random();
  } else {
    r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  }
  r = std::clamp(r, 0.0, 1.0);
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(static_cast<double>(delay.count()) * (0.5 + 0.5 * r)));
}

std::optional<base::MonoTime> Manager::runDue(Scope scope) {
  std::vector<Entry*> due;
  {
    std::lock_guard lock(mu_);
    const auto now = clock_.monoNow();
    for (auto& e : entries_) {
      if (e->scope == scope && dueLocked(*e, now)) due.push_back(e.get());
    }
    for (Entry* e : due) {
      // Cleared before the run: a wake that arrives while it runs makes it due again.
      e->woken = false;
    }
  }
  for (Entry* e : due) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ || (scope == Scope::kLeader && !leader_)) break;
      if (heldLocked(*e)) {
        e->woken = true;  // held back, not forgotten: it runs when resumed
        continue;
      }
      e->status.running = true;
      e->status.last_run = clock_.wallNow();
      worker(scope).busy_since = clock_.monoNow();
    }
    const auto started = clock_.monoNow();
    auto result = reconcileCatching(*e->controller);
    const auto finished = clock_.monoNow();
    ControllerStatus after;
    {
      std::lock_guard lock(mu_);
      worker(scope).busy_since.reset();
      auto& s = e->status;
      s.running = false;
      s.last_duration = finished - started;
      ++s.runs;
      if (result) {
        s.last_result = result->summary;
        s.last_plan = result->plan;
        s.last_error.clear();
        s.consecutive_errors = 0;
        e->backoff_until.reset();
        e->next_due = std::nullopt;
        if (result->requeue_after) {
          e->next_due = finished + std::clamp(*result->requeue_after, options_.min_requeue,
                                              std::chrono::milliseconds(std::chrono::hours(24)));
        }
      } else {
        ++s.errors;
        ++s.consecutive_errors;
        s.last_error = result.error().message();
        e->backoff_until = finished + backoffLocked(s.consecutive_errors);
        e->next_due = e->backoff_until;
      }
      after = s;
    }
    if (options_.on_reconciled) options_.on_reconciled(after, static_cast<bool>(result));
  }
  std::lock_guard lock(mu_);
  std::optional<base::MonoTime> next;
  const auto now = clock_.monoNow();
  for (const auto& e : entries_) {
    if (e->scope != scope || (scope == Scope::kLeader && !leader_)) continue;
    if (heldLocked(*e)) continue;  // setPaused("") wakes the worker
    std::optional<base::MonoTime> when;
    if (e->woken) when = std::max(now, e->backoff_until.value_or(now));
    if (e->next_due) when = when ? std::min(*when, *e->next_due) : *e->next_due;
    if (when && (!next || *when < *next)) next = when;
  }
  return next;
}

void Manager::workerLoop(Scope scope) {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      worker(scope).last_loop = clock_.monoNow();
    }
    const auto next = runDue(scope);
    std::unique_lock lock(mu_);
    if (stopping_) return;
    const auto now = clock_.monoNow();
    auto wait = options_.heartbeat;
    if (next) {
      if (*next <= now) continue;
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(*next - now) +
                                std::chrono::milliseconds(1));
    }
    // Woken early by wake()/setLeader()/stop(); spurious wake-ups just loop.
    cv_.wait_for(lock, wait, [&] {
      if (stopping_) return true;
      const auto t = clock_.monoNow();
      for (const auto& e : entries_) {
        if (e->scope == scope && dueLocked(*e, t)) return true;
      }
      return false;
    });
  }
}

void Manager::run() {
  {
    std::lock_guard lock(mu_);
    if (started_ || stopping_) return;
    started_ = true;
  }
  std::thread leader_thread =
      base::startThread("leader-worker", [this] { workerLoop(Scope::kLeader); });
  workerLoop(Scope::kNode);
  leader_thread.join();
}

void Manager::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

std::vector<ControllerStatus> Manager::status() const {
  std::lock_guard lock(mu_);
  const auto mono = clock_.monoNow();
  const auto wall = clock_.wallNow();
  std::vector<ControllerStatus> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) {
    ControllerStatus s = e->status;
    s.active = e->scope == Scope::kNode || leader_;
    if (s.pausable && !paused_.empty()) {
      s.closing = e->controller->windowToClose();
      if (s.closing.empty()) s.paused = paused_;
    }
    std::optional<base::MonoTime> when;
    if (s.active && s.paused.empty()) {
      if (e->woken) when = std::max(mono, e->backoff_until.value_or(mono));
      if (e->next_due) when = when ? std::min(*when, *e->next_due) : *e->next_due;
    }
    if (when) {
      s.next_run = wall + std::chrono::duration_cast<base::WallTime::duration>(*when - mono);
    }
    out.push_back(std::move(s));
  }
  return out;
}

bool Manager::alive(std::chrono::milliseconds max_stall,
                    std::chrono::milliseconds max_reconcile) const {
  std::lock_guard lock(mu_);
  if (!started_ || stopping_) return false;
  const auto now = clock_.monoNow();
  for (const Worker* w : {&node_worker_, &leader_worker_}) {
    if (w->busy_since) {
      if (now - *w->busy_since > max_reconcile) return false;
    } else if (!w->last_loop || now - *w->last_loop > max_stall) {
      return false;
    }
  }
  return true;
}

}  // namespace ekco::agent
