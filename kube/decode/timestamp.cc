#include "kube/decode/timestamp.h"

#include <chrono>
#include <cstdio>

#include "base/strings.h"

namespace ekco::kube {

namespace {

using namespace std::chrono;

// Reads exactly `n` digits at text[pos]; -1 when they are not all digits.
int digits(std::string_view text, std::size_t pos, std::size_t n) {
  if (pos + n > text.size()) return -1;
  int value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (text[i] < '0' || text[i] > '9') return -1;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

// The text is quoted and escaped: it comes from the API and may hold any byte, and the message
// must stay one line.
base::Error bad(std::string_view text, std::string_view why) {
  return base::Error("timestamp " + base::quoteForMessage(text, 64) + ": " + std::string(why),
                     base::ErrorCode::kParse);
}

std::string format(base::WallTime time, bool micro) {
  const auto secs = floor<seconds>(time);
  const auto day = floor<days>(secs);
  const year_month_day ymd(day);
  const hh_mm_ss hms(secs - day);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  std::string out = buf;
  if (micro) {
    const auto us = duration_cast<microseconds>(time - secs).count();
    std::snprintf(buf, sizeof(buf), ".%06lld", static_cast<long long>(us));
    out += buf;
  }
  return out + "Z";
}

}  // namespace

base::Result<base::WallTime> parseRfc3339(std::string_view text) {
  // (1) Date and time: fixed positions.
  if (text.size() < 20) return bad(text, "too short for RFC 3339");
  const int y = digits(text, 0, 4), mo = digits(text, 5, 2), d = digits(text, 8, 2);
  const int h = digits(text, 11, 2), mi = digits(text, 14, 2), s = digits(text, 17, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || s < 0 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return bad(text, "not YYYY-MM-DDTHH:MM:SS");
  }
  const year_month_day ymd{year(y), month(static_cast<unsigned>(mo)),
                           day(static_cast<unsigned>(d))};
  if (!ymd.ok()) return bad(text, "no such date");
  // Go's time.Parse rejects a leap second (:60), and so do we.
  if (h > 23 || mi > 59 || s > 59) return bad(text, "time out of range");
  // (2) Fraction.
  std::size_t pos = 19;
  nanoseconds frac{0};
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    const std::size_t start = pos;
    long long ns = 0;
    int kept = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (kept < 9) {
        ns = ns * 10 + (text[pos] - '0');
        ++kept;
      }
      ++pos;
    }
    if (pos == start) return bad(text, "empty fraction");
    while (kept++ < 9) ns *= 10;
    frac = nanoseconds(ns);
  }
  // (3) Zone.
  minutes offset{0};
  if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
    ++pos;
  } else if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) {
    const int oh = digits(text, pos + 1, 2), om = digits(text, pos + 4, 2);
    if (oh < 0 || om < 0 || pos + 3 >= text.size() || text[pos + 3] != ':' || oh > 23 || om > 59) {
      return bad(text, "bad zone offset");
    }
    offset = hours(oh) + minutes(om);
    if (text[pos] == '-') offset = -offset;
    pos += 6;
  } else {
    return bad(text, "missing zone (Z or +HH:MM)");
  }
  if (pos != text.size()) return bad(text, "trailing text");
  // (4) Seconds since the epoch, exact for every year 0000-9999 (about ±2.6e11 s), then clamped
  // into the window before anything is counted in nanoseconds (which would overflow).
  const seconds utc =
      sys_days(ymd).time_since_epoch() + hours(h) + minutes(mi) + seconds(s) - offset;
  return base::clampToWindow(utc, frac);
}

std::string formatRfc3339(base::WallTime time) { return format(time, false); }
std::string formatRfc3339Micro(base::WallTime time) { return format(time, true); }

std::string formatCompactUtc(base::WallTime time) {
  std::string out;
  for (char c : format(time, false)) {
    if (c != '-' && c != ':') out.push_back(c);
  }
  return out;
}

nlohmann::json rfc3339OrNull(const std::optional<base::WallTime>& time) {
  return time ? nlohmann::json(format(*time, false)) : nlohmann::json(nullptr);
}

}  // namespace ekco::kube
