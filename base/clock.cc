#include "base/clock.h"

namespace ekco::base {

WallTime SystemClock::wallNow() const { return std::chrono::system_clock::now(); }
MonoTime SystemClock::monoNow() const { return std::chrono::steady_clock::now(); }

}  // namespace ekco::base
