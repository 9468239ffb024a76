// RFC 3339 timestamps as the API writes them ("2026-11-22T04:08:28Z", and for MicroTime fields
// "2026-11-22T04:08:28.123456Z"), to and from system_clock time points.
#pragma once

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::kube {

// Accepts "YYYY-MM-DDTHH:MM:SS" with optional fractional seconds (any number of digits, kept to
// nanoseconds) and a zone "Z"/"z" or "+HH:MM"/"-HH:MM"; 't' is accepted for 'T' as RFC 3339
// allows. Anything else (missing zone, out-of-range fields, trailing text) is kParse.
base::Result<base::WallTime> parseRfc3339(std::string_view text);

// "2026-11-22T04:08:28Z" (whole seconds, UTC), the form of metav1.Time.
std::string formatRfc3339(base::WallTime time);
// "2026-11-22T04:08:28.123456Z" (microseconds, UTC), the form of metav1.MicroTime.
std::string formatRfc3339Micro(base::WallTime time);

}  // namespace ekco::kube
