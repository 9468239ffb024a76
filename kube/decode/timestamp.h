// RFC 3339 timestamps as the API writes them ("2026-11-22T04:08:28Z", and for MicroTime fields
// "2026-11-22T04:08:28.123456Z"), to and from system_clock time points.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::kube {

// The window API times are held in: base/clock.h's (1900-01-01 .. 2200-01-01), since RFC 3339
// (and Go, whose API server writes these fields) allows years 0000-9999 and int64 nanoseconds
// do not.
inline constexpr base::WallTime kEarliestApiTime = base::kEarliestTime;
inline constexpr base::WallTime kLatestApiTime = base::kLatestTime;

// Accepts "YYYY-MM-DDTHH:MM:SS" with optional fractional seconds (any number of digits, kept to
// nanoseconds) and a zone "Z"/"z" or "+HH:MM"/"-HH:MM"; 't' is accepted for 'T' as RFC 3339
// allows; years 0000-9999, clamped into [kEarliestApiTime, kLatestApiTime] (above). Anything
// else (missing zone, out-of-range fields, trailing text) is kParse.
base::Result<base::WallTime> parseRfc3339(std::string_view text);

// "2026-11-22T04:08:28Z" (whole seconds, UTC), the form of metav1.Time.
std::string formatRfc3339(base::WallTime time);
// "2026-11-22T04:08:28.123456Z" (microseconds, UTC), the form of metav1.MicroTime.
std::string formatRfc3339Micro(base::WallTime time);
// "20261122T040828Z" (whole seconds, UTC, ISO 8601's basic format): a file or directory name
// that sorts by time and has no colon (ekco's backup directories).
std::string formatCompactUtc(base::WallTime time);

// formatRfc3339 as a JSON string, or JSON null without a time (the /status documents).
nlohmann::json rfc3339OrNull(const std::optional<base::WallTime>& time);

}  // namespace ekco::kube
