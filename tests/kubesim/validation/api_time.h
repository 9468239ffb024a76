// metav1.Time and metav1.MicroTime as kube-apiserver decodes and writes them: any RFC 3339 time
// in (an offset, any fraction), UTC out: "2026-11-29T03:44:53Z" (Time: whole seconds) or
// "2026-11-29T03:44:53.354993Z" (MicroTime: microseconds).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace ekco::kubesim {

// "YYYY-MM-DDTHH:MM:SS" with an optional fraction and a zone ("Z" or "+HH:MM"/"-HH:MM");
// nullopt for anything else.
std::optional<base::WallTime> parseApiTime(std::string_view text);

// UTC, whole seconds (metav1.Time) or microseconds (metav1.MicroTime).
std::string formatApiTime(base::WallTime time, bool micro);

}  // namespace ekco::kubesim
