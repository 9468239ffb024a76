#include "base/duration.h"

#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::base {
namespace {

constexpr int64_t kNs = 1;
constexpr int64_t kUs = 1000 * kNs;
constexpr int64_t kMs = 1000 * kUs;
constexpr int64_t kSec = 1000 * kMs;
constexpr int64_t kMin = 60 * kSec;
constexpr int64_t kHour = 60 * kMin;

// The text is quoted and escaped: it may hold any byte, and the message must stay one line.
Error bad(std::string_view text, std::string_view why) {
  return Error(fmt::format("invalid duration {}: {}", quoteForMessage(text), why),
               ErrorCode::kInvalidArgument);
}

// Longest unit names first so "ms" is not read as "m".
struct Unit {
  std::string_view name;
  int64_t ns;
};
constexpr Unit kUnits[] = {
    {"ns", kNs}, {"us", kUs}, {"\xC2\xB5s", kUs}, {"\xCE\xBCs", kUs},
    {"ms", kMs}, {"s", kSec}, {"m", kMin},        {"h", kHour},
};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

Result<Duration> parseDuration(std::string_view text) {
  std::string_view s = text;
  bool negative = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s == "0") return Duration(0);
  if (s.empty()) return bad(text, "empty");

  // Accumulate in unsigned 64-bit nanoseconds; Go's limit is about 2562047h.
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t total = 0;
  while (!s.empty()) {
    // (1) integer part, (2) optional fraction, (3) unit.
    uint64_t whole = 0;
    size_t i = 0;
    bool overflow = false;
    while (i < s.size() && isDigit(s[i])) {
      if (whole > (kMax - 9) / 10) overflow = true;
      whole = whole * 10 + static_cast<uint64_t>(s[i] - '0');
      ++i;
    }
    bool had_whole = i > 0;
    uint64_t frac = 0;
    uint64_t frac_scale = 1;
    bool had_frac = false;
    if (i < s.size() && s[i] == '.') {
      ++i;
      while (i < s.size() && isDigit(s[i])) {
        had_frac = true;
        if (frac_scale < 1'000'000'000'000'000ULL) {  // ignore digits beyond ns precision
          frac = frac * 10 + static_cast<uint64_t>(s[i] - '0');
          frac_scale *= 10;
        }
        ++i;
      }
    }
    if (!had_whole && !had_frac) return bad(text, "expected a number");
    if (overflow) return bad(text, "out of range");
    s.remove_prefix(i);

    const Unit* unit = nullptr;
    size_t best = 0;
    for (const Unit& u : kUnits) {
      if (s.substr(0, u.name.size()) == u.name && u.name.size() > best) {
        unit = &u;
        best = u.name.size();
      }
    }
    if (unit == nullptr) {
      if (s.empty()) return bad(text, "missing unit (use ns, us, ms, s, m or h)");
      return bad(text,
                 "unknown unit " + quoteForMessage(s.substr(0, s.find_first_of("0123456789."))));
    }
    s.remove_prefix(unit->name.size());

    const uint64_t per = static_cast<uint64_t>(unit->ns);
    if (whole > kMax / per) return bad(text, "out of range");
    uint64_t v = whole * per;
    if (frac > 0) {
      // frac/frac_scale of a unit, in ns; long double keeps 1.5h and 0.1s exact enough.
      v += static_cast<uint64_t>(static_cast<long double>(frac) * static_cast<long double>(per) /
                                 static_cast<long double>(frac_scale));
    }
    if (v > kMax - total) return bad(text, "out of range");
    total += v;
  }
  int64_t ns = static_cast<int64_t>(total);
  return Duration(negative ? -ns : ns);
}

std::string formatDuration(Duration d) {
  int64_t ns = d.count();
  if (ns == 0) return "0s";
  std::string sign;
  uint64_t u;
  if (ns < 0) {
    sign = "-";
    u = static_cast<uint64_t>(-(ns + 1)) + 1;  // safe for INT64_MIN
  } else {
    u = static_cast<uint64_t>(ns);
  }
  auto fraction = [](uint64_t value, uint64_t scale) {
    // value/scale as a decimal without trailing zeros: 1500/1000 → "1.5".
    std::string out = std::to_string(value / scale);
    uint64_t rest = value % scale;
    if (rest != 0) {
      std::string digits = std::to_string(rest);
      std::string frac(std::to_string(scale).size() - 1 - digits.size(), '0');
      frac += digits;
      while (!frac.empty() && frac.back() == '0') frac.pop_back();
      out += "." + frac;
    }
    return out;
  };
  if (u < static_cast<uint64_t>(kUs)) return sign + std::to_string(u) + "ns";
  if (u < static_cast<uint64_t>(kMs)) return sign + fraction(u, kUs) + "us";
  if (u < static_cast<uint64_t>(kSec)) return sign + fraction(u, kMs) + "ms";
  std::string out = sign;
  uint64_t hours = u / kHour;
  uint64_t minutes = (u % kHour) / kMin;
  uint64_t rest = u % kMin;  // seconds and below, in ns
  if (hours > 0) out += std::to_string(hours) + "h";
  if (minutes > 0) out += std::to_string(minutes) + "m";
  if (rest > 0) out += fraction(rest, kSec) + "s";
  return out;
}

}  // namespace ekco::base
