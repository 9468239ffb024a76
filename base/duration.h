// Durations in Go's syntax ("90s", "5m", "1h30m", "720h", "1.5s", "300ms"), because EKCO's
// config.yaml is read by Go's time.ParseDuration and operators' files use that syntax.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::base {

using Duration = std::chrono::nanoseconds;

// Parses exactly what Go's time.ParseDuration accepts: an optional sign, then one or more
// decimal numbers each with a unit (ns, us, µs, μs, ms, s, m, h); "0" alone is allowed.
// A bare number other than 0 is an error (Go rejects it too: "missing unit").
Result<Duration> parseDuration(std::string_view text);

// The shortest Go-syntax spelling that parses back to the same value: "5m", "1h30m", "720h",
// "1.5s", "250ms", "0s".
std::string formatDuration(Duration d);

}  // namespace ekco::base
