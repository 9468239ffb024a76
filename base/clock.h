// Time behind an interface so tests control it. This file's .cc is the only place in the
// project that reads the real clocks (grep for `::now(` finds nothing else).
#pragma once

#include <chrono>
#include <mutex>
#include <type_traits>

namespace ekco::base {

using WallTime = std::chrono::system_clock::time_point;
using MonoTime = std::chrono::steady_clock::time_point;

static_assert(std::is_same_v<WallTime::duration, std::chrono::nanoseconds>,
              "WallTime counts int64 nanoseconds (saturatingAdd relies on it)");

// The window every calendar time ekco reads from outside (the API, a certificate) is held in.
// RFC 3339 allows years 0000-9999, but a WallTime counts int64 nanoseconds, which reach only
// 1677-2262, and ekco subtracts such times from now and adds configured durations to them. A
// time outside the window is represented by its edge: after kLatestTime means "not yet" (it
// never wraps into a past), before kEarliestTime "long ago". Inside it, now minus any such time
// stays within int64 nanoseconds (±292 years) for as long as now is before 2190.
inline constexpr WallTime kEarliestTime{
    std::chrono::sys_days(std::chrono::year(1900) / 1 / 1).time_since_epoch()};
inline constexpr WallTime kLatestTime{
    std::chrono::sys_days(std::chrono::year(2200) / 1 / 1).time_since_epoch()};

// Seconds since the epoch (exact for any year) plus a fraction of a second, held into
// [kEarliestTime, kLatestTime]; the fraction is kept inside the window.
constexpr WallTime clampToWindow(std::chrono::seconds since_epoch,
                                 std::chrono::nanoseconds fraction = {}) {
  if (since_epoch < std::chrono::floor<std::chrono::seconds>(kEarliestTime.time_since_epoch())) {
    return kEarliestTime;
  }
  if (since_epoch >= std::chrono::floor<std::chrono::seconds>(kLatestTime.time_since_epoch())) {
    return kLatestTime;
  }
  return WallTime(since_epoch) + fraction;
}

// t + d, held at WallTime::min()/max() instead of overflowing: a configured duration may be as
// long as Go allows (2562047h), and a time plus it must stay "later", never wrap into the past.
constexpr WallTime saturatingAdd(WallTime t, std::chrono::nanoseconds d) {
  if (d.count() > 0 && t > WallTime::max() - d) return WallTime::max();
  if (d.count() < 0 && t < WallTime::min() - d) return WallTime::min();
  return t + d;
}

class Clock {
 public:
  virtual ~Clock() = default;
  // Calendar time: for timestamps written to the API and compared with the API's timestamps.
  virtual WallTime wallNow() const = 0;
  // Monotonic time: for intervals measured locally (lease expiry, timeouts, backoff), which must
  // not jump when NTP steps the wall clock.
  virtual MonoTime monoNow() const = 0;
};

class SystemClock final : public Clock {
 public:
  WallTime wallNow() const override;
  MonoTime monoNow() const override;
};

// A clock that moves only when told. advance() moves both clocks; setWall() moves only the wall
// clock (to simulate an NTP step). Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(WallTime wall = WallTime(std::chrono::seconds(1'700'000'000)),
                       MonoTime mono = MonoTime(std::chrono::hours(1)))
      : wall_(wall), mono_(mono) {}

  WallTime wallNow() const override {
    std::lock_guard lock(mu_);
    return wall_;
  }
  MonoTime monoNow() const override {
    std::lock_guard lock(mu_);
    return mono_;
  }
  void advance(std::chrono::nanoseconds d) {
    std::lock_guard lock(mu_);
    wall_ += std::chrono::duration_cast<WallTime::duration>(d);
    mono_ += std::chrono::duration_cast<MonoTime::duration>(d);
  }
  void setWall(WallTime t) {
    std::lock_guard lock(mu_);
    wall_ = t;
  }

 private:
  mutable std::mutex mu_;
  WallTime wall_;
  MonoTime mono_;
};

}  // namespace ekco::base
