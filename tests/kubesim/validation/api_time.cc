#include "tests/kubesim/validation/api_time.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

namespace ekco::kubesim {

std::optional<base::WallTime> parseApiTime(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  std::chrono::nanoseconds frac{0};
  if (*rest == '.') {
    ++rest;
    long long digits = 0;
    int n = 0;
    if (*rest < '0' || *rest > '9') return std::nullopt;
    while (*rest >= '0' && *rest <= '9') {
      if (n < 9) {
        digits = digits * 10 + (*rest - '0');
        ++n;
      }
      ++rest;
    }
    while (n++ < 9) digits *= 10;
    frac = std::chrono::nanoseconds(digits);
  }
  std::chrono::seconds offset{0};
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    int hours = 0;
    int minutes = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &hours, &minutes) != 2 || rest[3] != ':' || hours > 23 ||
        minutes > 59) {
      return std::nullopt;
    }
    offset = std::chrono::hours(hours) + std::chrono::minutes(minutes);
    if (*rest == '-') offset = -offset;
    rest += 6;
  } else {
    return std::nullopt;
  }
  if (*rest != '\0') return std::nullopt;
  const std::time_t t = timegm(&tm);
  return base::WallTime(std::chrono::duration_cast<base::WallTime::duration>(
      std::chrono::seconds(t) - offset + frac));
}

std::string formatApiTime(base::WallTime time, bool micro) {
  const auto us = std::chrono::floor<std::chrono::microseconds>(time.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(
      std::chrono::floor<std::chrono::seconds>(std::chrono::microseconds(us)).count());
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  if (micro) {
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%06lld",
                  static_cast<long long>(us - static_cast<long long>(secs) * 1000000));
    out += frac;
  }
  return out + "Z";
}

}  // namespace ekco::kubesim
