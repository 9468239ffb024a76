// What the leader election tests share: a recorder of the elector's callbacks and a builder.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "agent/runtime/leader_election.h"
#include "base/clock.h"
#include "kube/client.h"

namespace ekco::agent::testing {

// What the callbacks saw, as strings: "started", "stopped", "leader node-a".
struct Recorder {
  std::mutex mu;
  std::vector<std::string> events;

  LeaderElector::Callbacks callbacks() {
    return {.on_started_leading = [this] { add("started"); },
            .on_stopped_leading = [this] { add("stopped"); },
            .on_new_leader = [this](const std::string& h) { add("leader " + h); }};
  }
  void add(std::string e) {
    std::lock_guard lock(mu);
    events.push_back(std::move(e));
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu);
    return std::exchange(events, {});
  }
  int count(const std::string& e) {
    std::lock_guard lock(mu);
    return static_cast<int>(std::count(events.begin(), events.end(), e));
  }
};

using Events = std::vector<std::string>;

inline std::unique_ptr<LeaderElector> elector(kube::KubeClient& client, const base::Clock& clock,
                                              const std::string& identity,
                                              Recorder* recorder = nullptr,
                                              LeaderElectionConfig cfg = {}) {
  cfg.identity = identity;
  auto created = LeaderElector::create(
      client, clock, cfg, recorder != nullptr ? recorder->callbacks() : LeaderElector::Callbacks{});
  EXPECT_TRUE(created) << created.error().message();
  return std::move(*created);
}

}  // namespace ekco::agent::testing
