// The agent's watches (agent/controller/watch.h), built from what the enabled controllers' specs
// declare and shared by key: the runtime's side of the contract. It knows no watch by name.
//
// Node-scope watches run from start() to stop(); leader-scope ones only while this agent leads:
// setLeading(true) starts them, setLeading(false) stops and drops their stores. supervise() is
// the agent loop's tick for the watches that follow another.
//
// Thread-safety: require() only before start(), from one thread (later it builds nothing and
// the require fails); the rest from any thread: start(), stop() and setLeading() are serialised
// whole, so two of them never interleave (the readers do not wait for them).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "agent/controller/watch.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent {

class WatchRegistry final : public Watches {
 public:
  // A failed list or watch of the watch `spec`: which informer (its log label) and the error.
  using ErrorFn =
      std::function<void(const WatchSpec& spec, std::string_view what, const base::Error& error)>;

  WatchRegistry(kube::KubeClient& client, const base::Clock& clock, const Config& config,
                std::string node_name, ErrorFn on_error = {});
  ~WatchRegistry() override;
  WatchRegistry(const WatchRegistry&) = delete;
  WatchRegistry& operator=(const WatchRegistry&) = delete;

  // A declaration without a typed reader (the runtime, for a spec's watches).
  void declare(const WatchSpec& spec, std::function<void()> on_change) {
    requireWatch(spec, std::move(on_change));
  }

  void start();  // the node-scope watches (and the leader-scope ones if already leading)
  void stop();   // every watch, the last required first; idempotent
  void setLeading(bool leading);
  void supervise();

  // Each running informer's label and statistics, in the order the watches were required.
  void forEachStats(const WatchStatsFn& f) const;
  // The same, for the watches whose spec says `reachability`.
  void forEachReachabilityStats(const WatchStatsFn& f) const;
  // The keys of the declared watches, in order (tests, /status).
  std::vector<std::string> keys() const;

 protected:
  std::shared_ptr<Watch> requireWatch(const WatchSpec& spec,
                                      std::function<void()> on_change) override;

 private:
  struct Entry {
    WatchSpec spec;
    std::shared_ptr<Watch> watch{};
    std::vector<std::function<void()>> wakes{};
  };

  kube::KubeClient& client_;
  const base::Clock& clock_;
  const Config& config_;
  const std::string node_name_;
  ErrorFn on_error_;
  std::vector<std::unique_ptr<Entry>> entries_;  // a watch after the watches it follows

  std::mutex transition_mu_;  // held through the whole of start(), stop() and setLeading()
  mutable std::mutex mu_;     // started_, leading_
  bool started_ = false;
  bool leading_ = false;
};

}  // namespace ekco::agent
