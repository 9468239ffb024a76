// Calendar events as systemd 252 parses, prints and schedules them (src/shared/calendarspec.c),
// plus the two pieces of glibc 2.36 that systemd's schedule depends on for a named zone:
// localtime_r() over a TZif file and mktime()'s way of resolving local times that do not exist
// or exist twice. Every rule below that looks arbitrary is there because systemd or glibc does
// it; tests/units/calendar_test.cc compares the result with systemd-analyze.
#include "units/calendar_zone.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <utility>

namespace ekco::units {

using namespace detail;  // NOLINT(google-build-using-namespace): this file defines them

namespace {

// ---------------------------------------------------------------------------------------------
// Proleptic Gregorian arithmetic.

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t floorMod(int64_t a, int64_t b) { return a - floorDiv(a, b) * b; }

bool isLeapYear(int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

// Days before each month, as glibc's __mon_yday.
constexpr std::array<std::array<int, 13>, 2> kMonYday = {{
    {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365},
    {0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335, 366},
}};

// Days since 1970-01-01 of year-month-day (month 1..12), H. Hinnant's days_from_civil.
int64_t daysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = floorDiv(y, 400);
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

struct CivilDate {
  int64_t year;
  int month;  // 1..12
  int day;
};

CivilDate civilFromDays(int64_t z) {
  z += 719468;
  const int64_t era = floorDiv(z, 146097);
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  const int m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  return {.year = yoe + era * 400 + (m <= 2), .month = m, .day = d};
}

// Seconds since the epoch of a year (since 1900), 0-based day of year and time of day, counted as
// if in UTC; the fields need not be in range (glibc's ydhms_diff against the epoch).
int64_t linearSeconds(int64_t year, int64_t yday, int64_t hour, int64_t min, int64_t sec) {
  const int64_t days = daysFromCivil(year + 1900, 1, 1) + yday;
  return ((days * 24 + hour) * 60 + min) * 60 + sec;
}

// ---------------------------------------------------------------------------------------------
// POSIX TZ strings, as glibc's __tzset_parse_tz reads the footer of a TZif file.

class TzStringReader {
 public:
  explicit TzStringReader(std::string_view s) : s_(s) {}
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  void advance(size_t k = 1) { pos_ = std::min(s_.size(), pos_ + k); }
  bool atEnd() const { return pos_ >= s_.size(); }

  // Up to three ':'-separated unsigned numbers, like sscanf("%hu%n:%hu%n:%hu%n").
  int numbers(std::array<int64_t, 3>& out) {
    int got = 0;
    size_t consumed = pos_;
    size_t p = pos_;
    for (int i = 0; i < 3; ++i) {
      if (i > 0) {
        if (p >= s_.size() || s_[p] != ':') break;
        ++p;
      }
      if (p >= s_.size() || !isAsciiDigit(s_[p])) break;
      int64_t v = 0;
      while (p < s_.size() && isAsciiDigit(s_[p])) {
        v = std::min<int64_t>(v * 10 + (s_[p] - '0'), 65535);
        ++p;
      }
      out[i] = v;
      consumed = p;
      ++got;
    }
    pos_ = consumed;
    return got;
  }

  bool name() {
    size_t p = pos_;
    while (p < s_.size() && isAsciiAlpha(s_[p])) ++p;
    if (p - pos_ >= 3) {
      pos_ = p;
      return true;
    }
    if (peek() != '<') return false;
    p = pos_ + 1;
    const size_t start = p;
    while (p < s_.size() &&
           (isAsciiAlpha(s_[p]) || isAsciiDigit(s_[p]) || s_[p] == '+' || s_[p] == '-')) {
      ++p;
    }
    if (p >= s_.size() || s_[p] != '>' || p - start < 3) return false;
    pos_ = p + 1;
    return true;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

bool parseTzOffset(TzStringReader& r, bool dst, PosixTz& tz) {
  const char c = r.peek();
  if (!dst && (r.atEnd() || (c != '+' && c != '-' && !isAsciiDigit(c)))) return false;
  int64_t sign = -1;  // POSIX offsets count west
  if (c == '-' || c == '+') {
    sign = c == '-' ? 1 : -1;
    r.advance();
  }
  std::array<int64_t, 3> v = {0, 0, 0};
  if (r.numbers(v) > 0) {
    const int64_t hh = std::min<int64_t>(v[0], 24);
    const int64_t mm = std::min<int64_t>(v[1], 59);
    const int64_t ss = std::min<int64_t>(v[2], 59);
    tz.rules[dst ? 1 : 0].offset = sign * (ss + mm * 60 + hh * 3600);
  } else if (!dst) {
    tz.rules[0].offset = 0;
    return false;
  } else {
    tz.rules[1].offset = tz.rules[0].offset + 3600;
  }
  return true;
}

bool parseTzRule(TzStringReader& r, TzRule& rule, bool first) {
  if (r.peek() == ',') r.advance();
  const char c = r.peek();
  if (c == 'J' || isAsciiDigit(c)) {
    rule.type = c == 'J' ? TzRule::Type::kJ1 : TzRule::Type::kJ0;
    if (c == 'J') {
      r.advance();
      if (!isAsciiDigit(r.peek())) return false;
    }
    int64_t d = 0;
    while (isAsciiDigit(r.peek())) {
      d = std::min<int64_t>(d * 10 + (r.peek() - '0'), 100000);
      r.advance();
    }
    if (d > 365 || (rule.type == TzRule::Type::kJ1 && d == 0)) return false;
    rule.d = static_cast<int>(d);
  } else if (c == 'M') {
    r.advance();
    std::array<int, 3> v = {0, 0, 0};
    for (int i = 0; i < 3; ++i) {
      if (i > 0) {
        if (r.peek() != '.') return false;
        r.advance();
      }
      if (!isAsciiDigit(r.peek())) return false;
      int64_t x = 0;
      while (isAsciiDigit(r.peek())) {
        x = std::min<int64_t>(x * 10 + (r.peek() - '0'), 65535);
        r.advance();
      }
      v[i] = static_cast<int>(x);
    }
    rule.type = TzRule::Type::kM;
    rule.m = v[0];
    rule.n = v[1];
    rule.d = v[2];
    if (rule.m < 1 || rule.m > 12 || rule.n < 1 || rule.n > 5 || rule.d > 6) return false;
  } else if (r.atEnd()) {
    // No rule: glibc's US default, M3.2.0,M11.1.0.
    rule.type = TzRule::Type::kM;
    rule.m = first ? 3 : 11;
    rule.n = first ? 2 : 1;
    rule.d = 0;
  } else {
    return false;
  }
  if (!r.atEnd() && r.peek() != '/' && r.peek() != ',') return false;
  if (r.peek() == '/') {
    r.advance();
    if (r.atEnd()) return false;
    const bool negative = r.peek() == '-';
    if (negative) r.advance();
    std::array<int64_t, 3> v = {2, 0, 0};
    r.numbers(v);
    rule.secs = (negative ? -1 : 1) * (v[0] * 3600 + v[1] * 60 + v[2]);
  } else {
    rule.secs = 2 * 3600;
  }
  return true;
}

PosixTz parsePosixTz(std::string_view s) {
  PosixTz tz;
  TzStringReader r(s);
  if (r.name() && parseTzOffset(r, false, tz)) {
    if (!r.atEnd()) {
      if (r.name()) parseTzOffset(r, true, tz);
      if (parseTzRule(r, tz.rules[0], true)) parseTzRule(r, tz.rules[1], false);
    } else {
      tz.rules[1].offset = tz.rules[0].offset;
    }
  }
  return tz;
}

// glibc's compute_change: when in `year` (as the UTC year of the instant asked about) the rule's
// change happens. Years up to 1970 count from the epoch, as in glibc.
int64_t tzChange(const TzRule& rule, int64_t year) {
  int64_t t = 0;
  if (year > 1970) t = daysFromCivil(year, 1, 1) * 86400;
  const int leap = isLeapYear(year) ? 1 : 0;
  switch (rule.type) {
    case TzRule::Type::kJ1:
      t += int64_t{rule.d - 1} * 86400;
      if (rule.d >= 60 && leap) t += 86400;
      break;
    case TzRule::Type::kJ0:
      t += int64_t{rule.d} * 86400;
      break;
    case TzRule::Type::kM: {
      t += int64_t{kMonYday[leap][rule.m - 1]} * 86400;
      const int64_t first = daysFromCivil(year, rule.m, 1);
      const int dow = static_cast<int>(floorMod(4 + first, 7));
      int d = rule.d - dow;
      if (d < 0) d += 7;
      const int month_days = kMonYday[leap][rule.m] - kMonYday[leap][rule.m - 1];
      for (int i = 1; i < rule.n; ++i) {
        if (d + 7 >= month_days) break;
        d += 7;
      }
      t += int64_t{d} * 86400;
      break;
    }
  }
  return t - rule.offset + rule.secs;
}

// ---------------------------------------------------------------------------------------------
// TZif files (RFC 8536), read as glibc's __tzfile_read does.

uint32_t readBe32(std::string_view d, size_t at) {
  return (uint32_t{static_cast<uint8_t>(d[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(d[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(d[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(d[at + 3])};
}

int64_t readBe64(std::string_view d, size_t at) {
  const uint64_t hi = readBe32(d, at);
  const uint64_t lo = readBe32(d, at + 4);
  return static_cast<int64_t>((hi << 32) | lo);
}

}  // namespace

namespace detail {

// glibc's __offtime: breaks t + offset down as UTC. Fails when the year does not fit an int.
bool offtime(int64_t t, int64_t offset, Tm& out) {
  const int64_t s = t + offset;
  const int64_t days = floorDiv(s, 86400);
  const int64_t rem = floorMod(s, 86400);
  const CivilDate date = civilFromDays(days);
  if (date.year - 1900 > INT_MAX || date.year - 1900 < INT_MIN) return false;
  out.hour = static_cast<int>(rem / 3600);
  out.min = static_cast<int>(rem % 3600 / 60);
  out.sec = static_cast<int>(rem % 60);
  out.wday = static_cast<int>(floorMod(4 + days, 7));  // 1970-01-01 was a Thursday
  out.year = static_cast<int>(date.year - 1900);
  out.mon = date.month - 1;
  out.mday = date.day;
  out.yday = static_cast<int>(days - daysFromCivil(date.year, 1, 1));
  return true;
}

}  // namespace detail

std::optional<CalendarZone> CalendarZone::fromTzif(std::string_view data) {
  constexpr size_t kHeader = 44;
  auto counts = [&](size_t at, std::array<uint32_t, 6>& c) {
    if (data.size() < at + kHeader || data.substr(at, 4) != "TZif") return false;
    for (size_t i = 0; i < 6; ++i) c[i] = readBe32(data, at + 20 + 4 * i);
    return true;
  };
  std::array<uint32_t, 6> c{};  // isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt
  if (!counts(0, c)) return std::nullopt;
  const char version = data[4];
  size_t at = 0;
  size_t time_size = 4;
  auto block_size = [&](size_t ts) {
    return uint64_t{c[3]} * ts + c[3] + uint64_t{c[4]} * 6 + c[5] + uint64_t{c[2]} * (ts + 4) +
           c[1] + c[0];
  };
  if (version >= '2') {
    at = kHeader + block_size(4);
    if (!counts(at, c)) return std::nullopt;
    time_size = 8;
  }
  at += kHeader;
  if (data.size() < at + block_size(time_size) || c[4] == 0) return std::nullopt;

  CalendarZone zone;
  auto read_time = [&](size_t p) {
    return time_size == 8 ? readBe64(data, p) : int64_t{static_cast<int32_t>(readBe32(data, p))};
  };
  for (uint32_t i = 0; i < c[3]; ++i) zone.transitions_.push_back(read_time(at + i * time_size));
  at += size_t{c[3]} * time_size;
  for (uint32_t i = 0; i < c[3]; ++i) {
    const auto idx = static_cast<uint8_t>(data[at + i]);
    if (idx >= c[4]) return std::nullopt;
    zone.transition_types_.push_back(idx);
  }
  at += c[3];
  for (uint32_t i = 0; i < c[4]; ++i) {
    const size_t p = at + size_t{i} * 6;
    const auto isdst = static_cast<uint8_t>(data[p + 4]);
    if (isdst > 1) return std::nullopt;
    zone.types_.push_back({.utoff = static_cast<int32_t>(readBe32(data, p)), .isdst = isdst == 1});
  }
  at += size_t{c[4]} * 6 + c[5];
  for (uint32_t i = 0; i < c[2]; ++i) {
    const size_t p = at + size_t{i} * (time_size + 4);
    zone.leaps_.push_back(
        {.at = read_time(p), .correction = static_cast<int32_t>(readBe32(data, p + time_size))});
  }
  at += size_t{c[2]} * (time_size + 4) + c[1] + c[0];
  if (version >= '2' && at < data.size() && data[at] == '\n' && data.size() - at >= 2) {
    // Everything after the newline but the last byte, as glibc reads it.
    const std::string_view footer = data.substr(at + 1, data.size() - at - 2);
    if (!footer.empty()) zone.footer_ = parsePosixTz(footer);
  }
  return zone;
}

bool CalendarZone::convert(int64_t t, bool local, Tm& out) const {
  int64_t offset = 0;
  bool isdst = false;
  if (local) {
    if (transitions_.empty() || t < transitions_.front()) {
      // Before any transition: the first standard-time type, else the first type.
      size_t i = 0;
      while (i < types_.size() && types_[i].isdst) ++i;
      if (i == types_.size()) i = 0;
      offset = types_[i].utoff;
      isdst = types_[i].isdst;
    } else if (t >= transitions_.back()) {
      Tm utc;
      if (footer_ && offtime(t, 0, utc)) {
        const int64_t year = int64_t{utc.year} + 1900;
        const int64_t start = tzChange(footer_->rules[0], year);
        const int64_t end = tzChange(footer_->rules[1], year);
        // Southern hemisphere: DST spans the turn of the year.
        isdst = start > end ? (t < end || t >= start) : (t >= start && t < end);
        offset = footer_->rules[isdst ? 1 : 0].offset;
      } else {
        const Type& type = types_[transition_types_.back()];
        offset = type.utoff;
        isdst = type.isdst;
      }
    } else {
      const auto it = std::upper_bound(transitions_.begin(), transitions_.end(), t);
      const Type& type =
          types_[transition_types_[static_cast<size_t>(it - transitions_.begin()) - 1]];
      offset = type.utoff;
      isdst = type.isdst;
    }
  }

  int64_t leap_correction = 0;
  int leap_hit = 0;
  size_t i = leaps_.size();
  while (i > 0 && t < leaps_[i - 1].at) --i;
  if (i > 0) {
    --i;
    leap_correction = leaps_[i].correction;
    if (t == leaps_[i].at && ((i == 0 && leaps_[i].correction > 0) ||
                              (i > 0 && leaps_[i].correction > leaps_[i - 1].correction))) {
      leap_hit = 1;
      while (i > 0 && leaps_[i].at == leaps_[i - 1].at + 1 &&
             leaps_[i].correction == leaps_[i - 1].correction + 1) {
        ++leap_hit;
        --i;
      }
    }
  }
  if (!offtime(t, offset - leap_correction, out)) return false;
  out.sec += leap_hit;
  out.isdst = isdst ? 1 : 0;
  return true;
}

namespace detail {

bool TimeConverter::breakDown(int64_t t, Tm& out) const {
  if (zone_ != nullptr) return zone_->convert(t, !utc_, out);
  if (!offtime(t, 0, out)) return false;
  out.isdst = 0;
  return true;
}

// Follows glibc's mktime() step by step (DST gaps, isdst probing); kept whole to compare with
// it.
std::optional<int64_t> TimeConverter::make(Tm& tp) {
  const int64_t hour = tp.hour;
  const int64_t min = tp.min;
  int64_t sec = tp.sec;
  const int isdst = tp.isdst;

  const int mon_remainder = tp.mon % 12;
  const int negative_mon_remainder = mon_remainder < 0 ? 1 : 0;
  const int mon_years = tp.mon / 12 - negative_mon_remainder;
  const int64_t year = int64_t{tp.year} + mon_years;
  const int64_t mon_yday =
      kMonYday[isLeapYear(year + 1900) ? 1 : 0][mon_remainder + 12 * negative_mon_remainder] - 1;
  const int64_t yday = mon_yday + tp.mday;

  const int64_t off = offset_;
  const int64_t sec_requested = sec;
  sec = std::clamp<int64_t>(sec, 0, 59);  // leap seconds are possible

  const int64_t wanted = linearSeconds(year, yday, hour, min, sec);
  const int64_t t0 = wanted + off;
  int64_t t = t0;
  int64_t t1 = t0;
  int64_t t2 = t0;
  bool dst2 = false;
  int remaining_probes = 6;
  Tm tm;
  auto diff = [&](const Tm& x) {
    return wanted - linearSeconds(x.year, x.yday, x.hour, x.min, x.sec);
  };

  bool found = false;
  for (;;) {
    if (!breakDown(t, tm)) return std::nullopt;
    const int64_t dt = diff(tm);
    if (dt == 0) break;
    if (t == t1 && t != t2 &&
        (tm.isdst < 0 || (isdst < 0 ? dst2 <= (tm.isdst != 0) : (isdst != 0) != (tm.isdst != 0)))) {
      // Oscillating around a spring-forward gap: take the time dt away.
      found = true;
      break;
    }
    if (--remaining_probes == 0) return std::nullopt;
    t1 = t2;
    t2 = t;
    t += dt;
    dst2 = tm.isdst != 0;
  }

  auto isdst_differ = [](int a, int b) { return (!a != !b) && a >= 0 && b >= 0; };
  if (!found && isdst_differ(isdst, tm.isdst)) {
    // The requested tm_isdst is not in force then: use the offset of a nearby instant where
    // it is (glibc probes in steps of a week, up to about 8.5 years each way).
    constexpr int64_t kStride = 601200;
    constexpr int64_t kDurationMax = 536454000;
    constexpr int64_t kDeltaBound = kDurationMax / 2 + kStride;
    bool matched = false;
    for (int64_t delta = kStride; !matched && delta < kDeltaBound; delta += kStride) {
      for (int direction = -1; !matched && direction <= 1; direction += 2) {
        const int64_t ot = t + delta * direction;
        Tm otm;
        if (!breakDown(ot, otm)) return std::nullopt;
        if (!isdst_differ(isdst, otm.isdst)) {
          const int64_t gt = ot + diff(otm);
          Tm gtm;
          if (breakDown(gt, gtm)) {
            t = gt;
            tm = gtm;
            matched = true;
          }
        }
      }
    }
    if (!matched) return std::nullopt;
  }

  offset_ = t - t0 + off;
  if (sec_requested != tm.sec) {
    int64_t adjustment = (sec == 0 && tm.sec == 60) ? 1 : 0;
    adjustment -= sec;
    adjustment += sec_requested;
    t += adjustment;
    if (!breakDown(t, tm)) return std::nullopt;
  }
  tp = tm;
  return t;
}

}  // namespace detail
}  // namespace ekco::units
