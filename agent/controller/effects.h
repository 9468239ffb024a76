// What every controller that changes something is given once, instead of copying four option
// fields (issue 36): whether it only plans (dry run), the fencing check it asks right before each
// irreversible call, the Event recorder and the action counter. ControllerDeps::effects() builds
// it from the runtime's services; a controller's options hold it as `effects`.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <string_view>

#include "base/result.h"
#include "kube/client.h"

namespace ekco::agent {

struct Effects {
  // Plan only: the plan goes to /status and the log, nothing is written.
  bool dry_run = false;
  // This agent holds the Lease and renewed it within renew_deadline (and, for a controller that
  // pauses, maintenance mode is off). Unset means never: a controller built without fencing
  // writes nothing irreversible.
  std::function<bool()> is_leader_fresh{};
  // An Event (never worth failing a reconcile for: the recorder reports its own failures).
  std::function<void(const kube::EventSpec& event)> record_event{};
  // ekco_actions_total{kind}.
  std::function<void(std::string_view kind)> count_action{};

  bool leaderFresh() const { return is_leader_fresh && is_leader_fresh(); }
  // kUnavailable "<what>: not done: this agent's leadership is not fresh" unless leaderFresh():
  // asked right before each irreversible call.
  base::Status fenced(std::string_view what) const {
    if (leaderFresh()) return base::ok();
    return base::Error(fmt::format("{}: not done: this agent's leadership is not fresh", what),
                       base::ErrorCode::kUnavailable);
  }
  void event(const kube::EventSpec& event) const {
    if (record_event) record_event(event);
  }
  void count(std::string_view kind) const {
    if (count_action) count_action(kind);
  }
};

}  // namespace ekco::agent
