// RFC 3339 timestamps as the API writes them ("2026-11-22T04:08:28Z", and for MicroTime fields
// "2026-11-22T04:08:28.123456Z"), to and from system_clock time points.
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::kube {

// The window API times are held in. RFC 3339 (and Go, whose API server writes these fields)
// allows years 0000-9999, but a WallTime counts int64 nanoseconds, which reach only 1677-2262,
// and ekco subtracts API times from now and adds configured durations to them. A time outside
// the window is represented by the window's edge: a time after kLatestApiTime means "not yet"
// (it never wraps into a past), one before kEarliestApiTime "long ago". Inside the window, `now`
// minus any such time and any sum with a duration stays within int64 nanoseconds (±292 years)
// for as long as now is before 2190.
inline constexpr base::WallTime kEarliestApiTime{
    std::chrono::sys_days(std::chrono::year(1900) / 1 / 1).time_since_epoch()};
inline constexpr base::WallTime kLatestApiTime{
    std::chrono::sys_days(std::chrono::year(2200) / 1 / 1).time_since_epoch()};

// Accepts "YYYY-MM-DDTHH:MM:SS" with optional fractional seconds (any number of digits, kept to
// nanoseconds) and a zone "Z"/"z" or "+HH:MM"/"-HH:MM"; 't' is accepted for 'T' as RFC 3339
// allows; years 0000-9999, clamped into [kEarliestApiTime, kLatestApiTime] (above). Anything
// else (missing zone, out-of-range fields, trailing text) is kParse.
base::Result<base::WallTime> parseRfc3339(std::string_view text);

// "2026-11-22T04:08:28Z" (whole seconds, UTC), the form of metav1.Time.
std::string formatRfc3339(base::WallTime time);
// "2026-11-22T04:08:28.123456Z" (microseconds, UTC), the form of metav1.MicroTime.
std::string formatRfc3339Micro(base::WallTime time);

}  // namespace ekco::kube
