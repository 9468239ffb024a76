#include "agent/runtime/watches.h"

#include <utility>

namespace ekco::agent {

WatchRegistry::WatchRegistry(kube::KubeClient& client, const base::Clock& clock,
                             const Config& config, std::string node_name, ErrorFn on_error)
    : client_(client),
      clock_(clock),
      config_(config),
      node_name_(std::move(node_name)),
      on_error_(std::move(on_error)) {}

WatchRegistry::~WatchRegistry() { stop(); }

std::shared_ptr<Watch> WatchRegistry::requireWatch(const WatchSpec& spec,
                                                   std::function<void()> on_change) {
  {
    std::lock_guard lock(mu_);
    if (started_) return nullptr;  // entries_ is read without a lock once started
  }
  for (const auto& entry : entries_) {
    if (entry->spec.key != spec.key) continue;
    if (on_change) entry->wakes.push_back(std::move(on_change));
    return entry->watch;
  }
  auto entry = std::make_unique<Entry>(Entry{.spec = spec});
  if (on_change) entry->wakes.push_back(std::move(on_change));
  const Entry* e = entry.get();
  const WatchContext context{.client = client_,
                             .clock = clock_,
                             .config = config_,
                             .node_name = node_name_,
                             .watches = *this,
                             .changed =
                                 [e] {
                                   for (const auto& wake : e->wakes) wake();
                                 },
                             .failed =
                                 [this, e](std::string_view what, const base::Error& error) {
                                   if (on_error_) on_error_(e->spec, what, error);
                                 }};
  // Built before it is listed: the watches it follows (required by its build) come first, so
  // they start before it and stop after it.
  entry->watch = spec.build ? spec.build(context) : nullptr;
  if (!entry->watch) return nullptr;
  entries_.push_back(std::move(entry));
  return entries_.back()->watch;
}

void WatchRegistry::start() {
  std::lock_guard transition(transition_mu_);
  bool leading = false;
  {
    std::lock_guard lock(mu_);
    if (started_) return;
    started_ = true;
    leading = leading_;
  }
  for (const auto& entry : entries_) {
    if (entry->spec.scope == Scope::kNode || leading) entry->watch->start();
  }
}

void WatchRegistry::stop() {
  std::lock_guard transition(transition_mu_);
  {
    std::lock_guard lock(mu_);
    started_ = false;
  }
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) (*it)->watch->stop();
}

void WatchRegistry::setLeading(bool leading) {
  std::lock_guard transition(transition_mu_);
  {
    std::lock_guard lock(mu_);
    leading_ = leading;
    if (!started_) return;
  }
  if (leading) {
    for (const auto& entry : entries_) {
      if (entry->spec.scope == Scope::kLeader) entry->watch->start();
    }
  } else {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
      if ((*it)->spec.scope == Scope::kLeader) (*it)->watch->stop();
    }
  }
}

void WatchRegistry::supervise() {
  for (const auto& entry : entries_) entry->watch->supervise();
}

void WatchRegistry::forEachStats(const WatchStatsFn& f) const {
  for (const auto& entry : entries_) entry->watch->forEachStats(f);
}

void WatchRegistry::forEachReachabilityStats(const WatchStatsFn& f) const {
  for (const auto& entry : entries_) {
    if (entry->spec.reachability) entry->watch->forEachStats(f);
  }
}

std::vector<std::string> WatchRegistry::keys() const {
  std::vector<std::string> keys;
  for (const auto& entry : entries_) keys.emplace_back(entry->spec.key);
  return keys;
}

}  // namespace ekco::agent
