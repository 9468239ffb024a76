// logind, as the agent needs it for its shutdown inhibitor: a "delay" inhibitor lock on
// "shutdown" (what kubelet's graceful node shutdown takes), logind's InhibitDelayMaxUSec, and the
// PrepareForShutdown signal. The interface lets the agent's inhibitor be tested with a fake;
// SdBusLogind talks to org.freedesktop.login1 over sd-bus (tests: python3-dbusmock's logind
// template on a private bus, tests/units/logind_test.cc).
//
// How logind uses the lock (org.freedesktop.login1(5)): when a shutdown is requested it emits
// PrepareForShutdown(true) and waits until every delay lock is released, or InhibitDelayMaxUSec
// passed (default 5 s), before it starts the shutdown job; a cancelled shutdown is
// PrepareForShutdown(false).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"
#include "base/os/unique_fd.h"
#include "base/result.h"

namespace ekco::units {

class Logind {
 public:
  virtual ~Logind() = default;

  // Manager.Inhibit("shutdown", who, why, "delay"): the lock, held while the descriptor is open.
  [[nodiscard]] virtual base::Result<base::UniqueFd> inhibitShutdownDelay(
      const std::string& who, const std::string& why) = 0;
  // Manager.InhibitDelayMaxUSec: how long logind waits for delay locks.
  [[nodiscard]] virtual base::Result<std::chrono::microseconds> inhibitDelayMax() = 0;
  // The next Manager.PrepareForShutdown(b) signal, waiting at most `timeout`: b, or nullopt when
  // none came. Signals are queued from the connection on, so none is lost between calls.
  [[nodiscard]] virtual base::Result<std::optional<bool>> waitPrepareForShutdown(
      std::chrono::milliseconds timeout) = 0;
};

// Connects to logind over sd-bus at `bus_address` (units::systemBusAddress(host_root)) and
// subscribes to PrepareForShutdown before returning. Errors name the address ("connect to logind
// at unix:path=...: No such file or directory", kUnavailable for a missing or refusing socket).
// Not thread-safe: one thread uses it. It does not reconnect; after an error the caller
// connects again. waitPrepareForShutdown's deadline is on `clock`, which must outlive it.
[[nodiscard]] base::Result<std::unique_ptr<Logind>> connectLogind(const std::string& bus_address,
                                                                  const base::Clock& clock);

}  // namespace ekco::units
