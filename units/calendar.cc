// Calendar events as systemd 252 parses, prints and schedules them (src/shared/calendarspec.c),
// plus the two pieces of glibc 2.36 that systemd's schedule depends on for a named zone:
// localtime_r() over a TZif file and mktime()'s way of resolving local times that do not exist
// or exist twice. Every rule below that looks arbitrary is there because systemd or glibc does
// it; tests/units/calendar_test.cc compares the result with systemd-analyze.
#include "units/calendar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

namespace ekco::units {
namespace {

constexpr int kUsecPerSec = 1'000'000;
constexpr int kMinYear = 1970;
constexpr int kMaxYear = 2199;
constexpr int kAllWeekdays = 127;
// systemd refuses a list of more than 241 elements (CALENDARSPEC_COMPONENTS_MAX, counted from 0).
constexpr int kMaxNesting = 240;
// systemd gives up on a spec after this many steps (MAX_CALENDAR_ITERATIONS).
constexpr int kMaxIterations = 1000;
// systemd refuses to compute elapses after 9999-12-30 23:59:59.999999 UTC.
constexpr int64_t kTimestampFormattableMaxUsec = 253402214399999999;
// The last second of 2199, the latest date systemd accepts.
constexpr int64_t kMaxEpochSeconds = 7258118399;

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

// struct tm, with the same conventions (year since 1900, month 0..11, fields may be out of range
// before normalisation), so the port of systemd's loop below reads like the original.
struct Tm {
  int sec = 0;
  int min = 0;
  int hour = 0;
  int mday = 1;
  int mon = 0;
  int year = 70;
  int wday = 4;
  int yday = 0;
  int isdst = -1;
};

// Seconds since the epoch of a year (since 1900), 0-based day of year and time of day, counted as
// if in UTC; the fields need not be in range (glibc's ydhms_diff against the epoch).
int64_t linearSeconds(int64_t year, int64_t yday, int64_t hour, int64_t min, int64_t sec) {
  const int64_t days = daysFromCivil(year + 1900, 1, 1) + yday;
  return ((days * 24 + hour) * 60 + min) * 60 + sec;
}

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

// ---------------------------------------------------------------------------------------------
// POSIX TZ strings, as glibc's __tzset_parse_tz reads the footer of a TZif file.

struct TzRule {
  enum class Type { kJ0, kJ1, kM };  // "n" (0-based day), "Jn" (1-based, no Feb 29), "Mm.w.d"
  Type type = Type::kJ0;
  int m = 0;
  int n = 0;
  int d = 0;
  int64_t secs = 0;    // local time of day of the change
  int64_t offset = 0;  // seconds east of UTC of this rule's zone (standard or DST)
};

struct PosixTz {
  std::array<TzRule, 2> rules;  // [0]: standard time (change = start of DST), [1]: DST
};

bool isAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isAsciiDigit(char c) { return c >= '0' && c <= '9'; }

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

class CalendarZone {
 public:
  // Parses TZif data; nullopt when glibc would not be able to use it either.
  static std::optional<CalendarZone> fromTzif(std::string_view data);

  // glibc's __tz_convert: localtime_r() when `local`, else gmtime_r() (which still applies the
  // file's leap seconds, as glibc does for the zone in TZ).
  bool convert(int64_t t, bool local, Tm& out) const;

 private:
  struct Type {
    int32_t utoff = 0;
    bool isdst = false;
  };
  struct Leap {
    int64_t at = 0;
    int64_t correction = 0;
  };

  std::vector<int64_t> transitions_;
  std::vector<uint8_t> transition_types_;
  std::vector<Type> types_;
  std::vector<Leap> leaps_;
  std::optional<PosixTz> footer_;
};

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

namespace {

// ---------------------------------------------------------------------------------------------
// localtime_r/gmtime_r and mktime/timegm over one zone. make() follows glibc 2.36's
// __mktime_internal step by step, including the guess it carries from one call to the next,
// because which of two candidate instants it returns for a skipped or repeated local time
// depends on it, and systemd's search calls mktime() dozens of times per elapse.
class TimeConverter {
 public:
  // zone == nullptr: UTC. utc: gmtime/timegm semantics even with a zone.
  TimeConverter(const CalendarZone* zone, bool utc) : zone_(zone), utc_(utc) {}

  bool breakDown(int64_t t, Tm& out) const {
    if (zone_ != nullptr) return zone_->convert(t, !utc_, out);
    if (!offtime(t, 0, out)) return false;
    out.isdst = 0;
    return true;
  }

  // Normalises tp and returns its time; nullopt (tp untouched) when glibc would fail.
  std::optional<int64_t> make(Tm& tp) {
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
          (tm.isdst < 0 ||
           (isdst < 0 ? dst2 <= (tm.isdst != 0) : (isdst != 0) != (tm.isdst != 0)))) {
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

 private:
  const CalendarZone* zone_;
  bool utc_;
  int64_t offset_ = 0;  // glibc's static localtime_offset/gmtime_offset, 0 in a fresh process
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing.

namespace {

constexpr int kMaxComponentValue = INT_MAX;

struct DayName {
  std::string_view name;
  int nr;
};
// Long names first: "Mon" is a prefix of "Monday".
constexpr std::array<DayName, 14> kDayNames = {{
    {"Monday", 0},
    {"Mon", 0},
    {"Tuesday", 1},
    {"Tue", 1},
    {"Wednesday", 2},
    {"Wed", 2},
    {"Thursday", 3},
    {"Thu", 3},
    {"Friday", 4},
    {"Fri", 4},
    {"Saturday", 5},
    {"Sat", 5},
    {"Sunday", 6},
    {"Sun", 6},
}};
constexpr std::array<std::string_view, 7> kDayAbbrevs = {"Mon", "Tue", "Wed", "Thu",
                                                         "Fri", "Sat", "Sun"};

char asciiLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (asciiLower(a[i]) != asciiLower(b[i])) return false;
  }
  return true;
}

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && equalsNoCase(s.substr(0, prefix.size()), prefix);
}

bool isCSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// Text in double quotes for an error message, control bytes escaped: the message ends up in a
// one-line log record.
std::string quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

// The input around a position, for error messages.
std::string near(std::string_view rest) {
  constexpr size_t kMax = 24;
  if (rest.empty()) return "end of input";
  if (rest.size() > kMax) return quote(rest.substr(0, kMax)) + "...";
  return quote(rest);
}

base::Error reason(std::string message) {
  return base::Error(std::move(message), base::ErrorCode::kInvalidArgument);
}

// systemd's timezone_is_valid(): a relative name of [A-Za-z0-9_+-] segments naming a regular
// file that starts with the TZif magic. On success returns the file's contents.
std::optional<std::string> readZoneFile(std::string_view name, const std::string& dir) {
  if (name.empty() || name.front() == '/' || name.back() == '/') return std::nullopt;
  bool slash = false;
  for (const char c : name) {
    if (!isAsciiAlpha(c) && !isAsciiDigit(c) && c != '-' && c != '_' && c != '+' && c != '/') {
      return std::nullopt;
    }
    if (c == '/' && slash) return std::nullopt;
    slash = c == '/';
  }
  if (name.size() >= PATH_MAX) return std::nullopt;

  const std::string path = dir + "/" + std::string(name);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    constexpr size_t kMaxZoneFile = 1 << 20;  // real ones are a few KiB
    char buf[4096];
    while (data.size() < kMaxZoneFile) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  if (data.size() < 4 || data.compare(0, 4, "TZif") != 0) return std::nullopt;
  return data;
}

}  // namespace

class CalendarParser {
 public:
  explicit CalendarParser(const CalendarOptions& options) : options_(options) {}

  base::Result<CalendarSpec> parse(std::string_view text) {
    if (text.find('\0') != std::string_view::npos) return reason("contains a NUL byte");
    CalendarSpec spec;
    std::string_view body = text;
    std::string_view unknown_zone;
    std::optional<std::string> zone_data;

    // (1) A trailing zone: " UTC" in any case, else the last space-separated word if it names
    // a zone file. (systemd would also strip the host's tzname[] abbreviations here; the host
    // zone is taken to be UTC, whose abbreviation " UTC" is already handled.)
    if (body.size() >= 4 && equalsNoCase(body.substr(body.size() - 4), " UTC")) {
      spec.utc_ = true;
      body.remove_suffix(4);
    } else if (const size_t space = body.rfind(' '); space != std::string_view::npos) {
      const std::string_view word = body.substr(space + 1);
      zone_data = readZoneFile(word, options_.zoneinfo_dir);
      if (zone_data) {
        spec.timezone_ = std::string(word);
        body = body.substr(0, space);
      } else {
        unknown_zone = word;
      }
    }

    auto parsed = parseBody(body, spec);
    if (!parsed) {
      // "Sat 17:30 Mars/Olympus": say that the zone is the problem, not the syntax.
      CalendarSpec probe;
      if (!unknown_zone.empty() && !looksLikeWeekday(unknown_zone) &&
          parseBody(body.substr(0, body.size() - unknown_zone.size() - 1), probe)) {
        return reason(fmt::format("unknown time zone {}", quote(unknown_zone)));
      }
      return std::move(parsed).error();
    }

    // (2) Normal form, then range checks on it (systemd validates after normalising).
    normalize(spec);
    EKCO_TRY(validate(spec));

    // (3) The zone's rules, for nextElapse(). A file with the TZif magic that glibc cannot read
    // leaves glibc in UTC (it then reads TZ as a POSIX string such as "Europe" without offset),
    // so such a zone computes in UTC here too.
    if (zone_data) {
      if (auto zone = CalendarZone::fromTzif(*zone_data)) {
        spec.zone_ = std::make_shared<const CalendarZone>(std::move(*zone));
      }
    }
    return spec;
  }

 private:
  using Chain = std::vector<CalendarComponent>;

  // A cursor over the text; '\0' past the end, like the C string systemd walks.
  struct Cursor {
    std::string_view s;
    size_t pos = 0;
    char peek(size_t k = 0) const { return pos + k < s.size() ? s[pos + k] : '\0'; }
    bool atEnd() const { return pos >= s.size(); }
    std::string_view rest() const { return s.substr(std::min(pos, s.size())); }
    void skipSpaces() {
      while (peek() == ' ') ++pos;
    }
  };

  // Reads a run of decimal digits into `value`; false when it does not fit in 64 bits (the digits
  // are consumed either way, as strtoull would).
  static bool readDigits(Cursor& cur, uint64_t& value) {
    bool fits = true;
    value = 0;
    while (isAsciiDigit(cur.peek())) {
      const auto digit = static_cast<uint64_t>(cur.peek() - '0');
      if (value > (UINT64_MAX - digit) / 10) fits = false;
      value = value * 10 + digit;
      ++cur.pos;
    }
    return fits;
  }

  static bool looksLikeWeekday(std::string_view word) {
    return std::any_of(kDayNames.begin(), kDayNames.end(),
                       [&](const DayName& d) { return startsWithNoCase(word, d.name); });
  }

  base::Status parseBody(std::string_view body, CalendarSpec& spec) {
    if (body.empty()) {
      return reason(spec.utc_ || !spec.timezone_.empty() ? "nothing before the time zone"
                                                         : "empty");
    }
    if (parseShorthand(body, spec)) return base::ok();

    Cursor cur{.s = body};
    EKCO_TRY(parseWeekdays(cur, spec));
    auto date = parseDate(cur, spec);
    EKCO_TRY(date);
    if (!*date) EKCO_TRY(parseTime(cur, spec));
    if (!cur.atEnd()) return reason(fmt::format("unexpected {}", near(cur.rest())));
    return base::ok();
  }

  static bool parseShorthand(std::string_view body, CalendarSpec& spec) {
    const Chain zero = {CalendarComponent{.start = 0}};
    const Chain one = {CalendarComponent{.start = 1}};
    auto midnight = [&] {
      spec.hour_ = zero;
      spec.minute_ = zero;
      spec.microsecond_ = zero;
    };
    if (equalsNoCase(body, "minutely")) {
      spec.microsecond_ = zero;
    } else if (equalsNoCase(body, "hourly")) {
      spec.minute_ = zero;
      spec.microsecond_ = zero;
    } else if (equalsNoCase(body, "daily")) {
      midnight();
    } else if (equalsNoCase(body, "monthly")) {
      spec.day_ = one;
      midnight();
    } else if (equalsNoCase(body, "annually") || equalsNoCase(body, "yearly") ||
               equalsNoCase(body, "anually")) {
      spec.month_ = one;
      spec.day_ = one;
      midnight();
    } else if (equalsNoCase(body, "weekly")) {
      spec.weekdays_bits_ = 1;
      midnight();
    } else if (equalsNoCase(body, "quarterly")) {
      spec.month_ = {{.start = 1}, {.start = 4}, {.start = 7}, {.start = 10}};
      spec.day_ = one;
      midnight();
    } else if (equalsNoCase(body, "biannually") || equalsNoCase(body, "bi-annually") ||
               equalsNoCase(body, "semiannually") || equalsNoCase(body, "semi-annually")) {
      spec.month_ = {{.start = 1}, {.start = 7}};
      spec.day_ = one;
      midnight();
    } else {
      return false;
    }
    return true;
  }

  // Weekdays: names (any case, long or short), "a..b" or the old "a-b" ranges, "," lists; a
  // trailing comma is allowed, an open range is not. No weekday at all is fine.
  static base::Status parseWeekdays(Cursor& cur, CalendarSpec& spec) {
    int bits = 0;
    int range_start = -1;
    bool first = true;
    for (;;) {
      const std::string_view rest = cur.rest();
      const auto day = std::find_if(kDayNames.begin(), kDayNames.end(), [&](const DayName& d) {
        return startsWithNoCase(rest, d.name);
      });
      if (day == kDayNames.end()) {
        if (first) return base::ok();
        return reason(fmt::format("expected a weekday at {}", near(rest)));
      }
      const char after = cur.peek(day->name.size());
      if (after != '\0' && after != '-' && after != '.' && after != ',' && after != ' ') {
        const size_t end = rest.find_first_of("-., ");
        return reason(fmt::format("unknown weekday {}", quote(rest.substr(0, end))));
      }
      bits |= 1 << day->nr;
      if (range_start >= 0) {
        if (range_start > day->nr) {
          return reason(fmt::format("weekday range {}..{} goes backwards",
                                    kDayAbbrevs[static_cast<size_t>(range_start)],
                                    kDayAbbrevs[static_cast<size_t>(day->nr)]));
        }
        for (int j = range_start + 1; j < day->nr; ++j) bits |= 1 << j;
      }
      cur.pos += day->name.size();
      spec.weekdays_bits_ = bits;

      if (cur.atEnd()) return base::ok();
      if (cur.peek() == ' ') {
        cur.skipSpaces();
        return base::ok();
      }
      if (cur.peek() == '.') {
        if (range_start >= 0) return reason("weekday range with more than two ends");
        if (cur.peek(1) != '.') return reason(fmt::format("unexpected {}", near(cur.rest())));
        range_start = day->nr;
        cur.pos += 2;
      } else if (cur.peek() == '-') {
        if (range_start >= 0) return reason("weekday range with more than two ends");
        range_start = day->nr;
        cur.pos += 1;
      } else if (cur.peek() == ',') {
        range_start = -1;
        cur.pos += 1;
      }
      if (cur.atEnd() || cur.peek() == ' ') {
        cur.skipSpaces();
        if (range_start >= 0) return reason("weekday range without an end");
        return base::ok();
      }
      first = false;
    }
  }

  // Date: "@seconds" (returns true: no time follows), or [year-]month-day with '~' instead of
  // the last '-' for days counted from the end of the month. Something followed by ':' is a
  // time, left for parseTime.
  base::Result<bool> parseDate(Cursor& cur, CalendarSpec& spec) {
    if (cur.atEnd()) return false;
    if (cur.peek() == '@') {
      ++cur.pos;
      EKCO_TRY(parseEpoch(cur, spec));
      return true;
    }

    Cursor t = cur;
    Chain first;
    Chain second;
    Chain third;
    EKCO_TRY(parseChain(t, false, first, "date or time"));
    if (t.atEnd() || t.peek() == ':') return false;

    bool end_of_month = false;
    if (t.peek() == '~') {
      end_of_month = true;
    } else if (t.peek() != '-') {
      return reason(fmt::format("expected '-', '~' or ':' at {}", near(t.rest())));
    }
    ++t.pos;
    EKCO_TRY(parseChain(t, false, second, "date"));
    if (t.atEnd() || t.peek() == ' ') {
      t.skipSpaces();
      spec.month_ = std::move(first);
      spec.day_ = std::move(second);
      spec.end_of_month_ = end_of_month;
      cur = t;
      return false;
    }
    if (end_of_month) return reason("'~' must separate month and day");
    if (t.peek() == '~') {
      end_of_month = true;
    } else if (t.peek() != '-') {
      return reason(fmt::format("expected '-' or '~' at {}", near(t.rest())));
    }
    ++t.pos;
    EKCO_TRY(parseChain(t, false, third, "day"));
    if (!t.atEnd() && t.peek() != ' ') {
      return reason(fmt::format("unexpected {} after the date", near(t.rest())));
    }
    t.skipSpaces();
    spec.year_ = std::move(first);
    spec.month_ = std::move(second);
    spec.day_ = std::move(third);
    spec.end_of_month_ = end_of_month;
    cur = t;
    return false;
  }

  // "@seconds", read like strtoul(): optional C whitespace and sign, digits; a negative number
  // wraps around as an unsigned long and is then read back as time_t.
  static base::Status parseEpoch(Cursor& cur, CalendarSpec& spec) {
    while (isCSpace(cur.peek())) ++cur.pos;
    bool negative = false;
    if (cur.peek() == '+' || cur.peek() == '-') {
      negative = cur.peek() == '-';
      ++cur.pos;
    }
    if (!isAsciiDigit(cur.peek())) return reason("expected seconds after '@'");
    uint64_t value = 0;
    const bool overflow = !readDigits(cur, value);
    if (overflow) return reason("timestamp too large");
    if (negative) value = ~value + 1;
    const auto time = static_cast<int64_t>(value);
    if (time < 0 || time > kMaxEpochSeconds) {
      return reason("timestamp outside 1970..2199");
    }
    Tm tm;
    offtime(time, 0, tm);
    spec.utc_ = true;
    spec.year_ = {{.start = tm.year + 1900}};
    spec.month_ = {{.start = tm.mon + 1}};
    spec.day_ = {{.start = tm.mday}};
    spec.hour_ = {{.start = tm.hour}};
    spec.minute_ = {{.start = tm.min}};
    spec.microsecond_ = {{.start = tm.sec * kUsecPerSec}};
    return base::ok();
  }

  // Time: hour:minute[:second]; no time at all means 00:00:00.
  base::Status parseTime(Cursor& cur, CalendarSpec& spec) {
    if (cur.atEnd()) {
      spec.hour_ = {{.start = 0}};
      spec.minute_ = {{.start = 0}};
      spec.microsecond_ = {{.start = 0}};
      return base::ok();
    }
    Chain hour;
    Chain minute;
    Chain second;
    EKCO_TRY(parseChain(cur, false, hour, "hour"));
    if (cur.peek() != ':') {
      return reason(fmt::format("expected ':' after the hour at {}", near(cur.rest())));
    }
    ++cur.pos;
    EKCO_TRY(parseChain(cur, false, minute, "minute"));
    if (cur.atEnd()) {
      second = {{.start = 0}};
    } else {
      if (cur.peek() != ':') {
        return reason(fmt::format("unexpected {} after the minute", near(cur.rest())));
      }
      ++cur.pos;
      EKCO_TRY(parseChain(cur, true, second, "second"));
      if (!cur.atEnd()) {
        return reason(fmt::format("unexpected {} after the second", near(cur.rest())));
      }
    }
    spec.hour_ = std::move(hour);
    spec.minute_ = std::move(minute);
    spec.microsecond_ = std::move(second);
    return base::ok();
  }

  // "*" or a ","-list of start[..stop][/repeat]. For seconds (usec) values are microseconds,
  // "*" is 0/1s and numbers may have a fraction.
  static base::Status parseChain(Cursor& cur, bool usec, Chain& out, std::string_view what) {
    out.clear();
    if (cur.peek() == '*') {
      if (usec) out.push_back({.start = 0, .repeat = kUsecPerSec});
      ++cur.pos;
      return base::ok();
    }
    for (int nesting = 0;; ++nesting) {
      if (nesting > kMaxNesting)
        return reason(fmt::format("more than {} list elements", kMaxNesting + 1));
      CalendarComponent c;
      EKCO_TRY(parseDecimal(cur, usec, c.start, what));
      if (cur.peek() == '.' && cur.peek(1) == '.') {
        cur.pos += 2;
        EKCO_TRY(parseDecimal(cur, usec, c.stop, what));
        c.repeat = usec ? kUsecPerSec : 1;
      }
      if (cur.peek() == '/') {
        ++cur.pos;
        EKCO_TRY(parseDecimal(cur, usec, c.repeat, what));
        if (c.repeat == 0) return reason("repetition /0");
      } else {
        if (c.start > kMaxComponentValue - c.repeat) return reason("number too large");
        // A seconds range needs room for its implied 1s step.
        if (usec && c.stop >= 0 && c.start + c.repeat > c.stop) {
          return reason("seconds range shorter than one second");
        }
      }
      const char next = cur.peek();
      if (next != '\0' && next != ' ' && next != ',' && next != '-' && next != '~' && next != ':') {
        return reason(fmt::format("unexpected {} in {}", near(cur.rest()), what));
      }
      out.push_back(c);
      if (next != ',') return base::ok();
      ++cur.pos;
    }
  }

  // A decimal number like strtoul() after an isdigit() check; seconds may carry a fraction of up
  // to 6 digits (more are rounded on the 7th, as systemd does), "1..2" being a range, not 1.0.
  static base::Status parseDecimal(Cursor& cur, bool usec, int& out, std::string_view what) {
    if (!isAsciiDigit(cur.peek())) {
      if (cur.pos == 0 && isAsciiAlpha(cur.peek())) {
        const std::string_view rest = cur.rest();
        return reason(fmt::format("unknown weekday or keyword {}",
                                  quote(rest.substr(0, rest.find_first_of(" ,.-")))));
      }
      return reason(fmt::format("expected a number or '*' in {} at {}", what, near(cur.rest())));
    }
    uint64_t value = 0;
    const bool overflow = !readDigits(cur, value);
    if (overflow) return reason("number too large");
    if (usec) {
      if (value > UINT64_MAX / kUsecPerSec) return reason("number too large");
      value *= kUsecPerSec;
      if (cur.peek() == '.' && cur.peek(1) != '.') {
        ++cur.pos;
        if (!isAsciiDigit(cur.peek())) return reason("expected digits after '.'");
        uint64_t fraction = 0;
        int digits = 0;
        for (; digits < 6 && isAsciiDigit(cur.peek()); ++digits, ++cur.pos) {
          fraction = fraction * 10 + static_cast<uint64_t>(cur.peek() - '0');
        }
        for (int i = digits; i < 6; ++i) fraction *= 10;
        if (digits == 6 && cur.peek() >= '5' && cur.peek() <= '9') ++fraction;
        while (isAsciiDigit(cur.peek())) ++cur.pos;
        if (value + fraction < value) return reason("number too large");
        value += fraction;
      }
    }
    if (value > static_cast<uint64_t>(kMaxComponentValue)) return reason("number too large");
    out = static_cast<int>(value);
    return base::ok();
  }

  // systemd's calendar_spec_normalize().
  static void normalize(CalendarSpec& spec) {
    if (spec.weekdays_bits_ <= 0 || spec.weekdays_bits_ >= kAllWeekdays) spec.weekdays_bits_ = -1;
    if (spec.end_of_month_ && spec.day_.empty()) spec.end_of_month_ = false;
    for (CalendarComponent& c : spec.year_) {
      // Two-digit years: 0..69 → 2000..2069, 70..99 → 1970..1999.
      for (int* v : {&c.start, &c.stop}) {
        if (*v >= 0 && *v < 70) {
          *v += 2000;
        } else if (*v >= 70 && *v < 100) {
          *v += 1900;
        }
      }
    }
    for (Chain* chain :
         {&spec.year_, &spec.month_, &spec.day_, &spec.hour_, &spec.minute_, &spec.microsecond_}) {
      normalizeChain(*chain);
    }
  }

  static void normalizeChain(Chain& chain) {
    for (CalendarComponent& c : chain) {
      // A range ends on its last repetition; a repetition that cannot fire twice, or a range of
      // one value, is a plain value.
      if (c.stop > c.start && c.repeat > 0) c.stop -= (c.stop - c.start) % c.repeat;
      if ((c.stop > c.start && c.repeat > 0 && c.start + c.repeat > c.stop) || c.start == c.stop) {
        c.repeat = 0;
        c.stop = -1;
      }
    }
    std::sort(chain.begin(), chain.end());
    chain.erase(std::unique(chain.begin(), chain.end()), chain.end());
  }

  // systemd's calendar_spec_valid(), with a reason.
  static base::Status validate(const CalendarSpec& spec) {
    EKCO_TRY(validateChain(spec.year_, "year", kMinYear, kMaxYear, false, false));
    EKCO_TRY(validateChain(spec.month_, "month", 1, 12, false, false));
    EKCO_TRY(validateChain(spec.day_, "day", 1, 31, spec.end_of_month_, false));
    EKCO_TRY(validateChain(spec.hour_, "hour", 0, 23, false, false));
    EKCO_TRY(validateChain(spec.minute_, "minute", 0, 59, false, false));
    EKCO_TRY(validateChain(spec.microsecond_, "second", 0, 60 * kUsecPerSec - 1, false, true));
    return base::ok();
  }

  static std::string show(int v, bool usec) {
    if (!usec) return std::to_string(v);
    if (v % kUsecPerSec == 0) return std::to_string(v / kUsecPerSec);
    return fmt::format("{}.{:06}", v / kUsecPerSec, v % kUsecPerSec);
  }

  static base::Status validateChain(const Chain& chain, std::string_view field, int from, int to,
                                    bool end_of_month, bool usec) {
    const std::string_view what = end_of_month ? "day from the end of the month" : field;
    for (const CalendarComponent& c : chain) {
      // "~" counts at most 28 days back, so that every month has them. systemd lowers that
      // bound by 3 again for every further element of the (sorted) list, so "*~1,26" is
      // refused while "*~26" and "*~1,25" are not; that is copied, not fixed.
      if (end_of_month) to -= 3;
      const std::string range = fmt::format("{}..{}", show(from, usec),
                                            usec ? std::string("59.999999") : show(to, false));
      if (c.start < from || c.start > to) {
        return reason(fmt::format("{} {} out of range {}", what, show(c.start, usec), range));
      }
      if (c.repeat > to - from) {
        return reason(fmt::format("{} repetition /{} too large", field, show(c.repeat, usec)));
      }
      if (c.stop >= 0) {
        if (c.stop < from || c.stop > to) {
          return reason(fmt::format("{} {} out of range {}", what, show(c.stop, usec), range));
        }
        if (c.start + c.repeat > c.stop) {
          return reason(fmt::format("{} range {}..{} is empty", field, show(c.start, usec),
                                    show(c.stop, usec)));
        }
      } else if (end_of_month ? c.start - c.repeat < from : c.start + c.repeat > to) {
        return reason(fmt::format("{} {}/{} never repeats", field, show(c.start, usec),
                                  show(c.repeat, usec)));
      }
    }
    return base::ok();
  }

  const CalendarOptions& options_;
};

base::Result<CalendarSpec> parseCalendar(std::string_view text, const CalendarOptions& options) {
  auto spec = CalendarParser(options).parse(text);
  if (!spec) return std::move(spec).error().wrap("invalid calendar event " + quote(text));
  return spec;
}

// ---------------------------------------------------------------------------------------------
// The normal form (systemd's calendar_spec_to_string).

namespace {

void formatWeekdays(std::string& out, int bits) {
  // Runs of three or more days are written as ranges, shorter ones as lists.
  bool need_comma = false;
  for (int x = 0; x < 7;) {
    if ((bits & (1 << x)) == 0) {
      ++x;
      continue;
    }
    int y = x;
    while (y + 1 < 7 && (bits & (1 << (y + 1))) != 0) ++y;
    if (need_comma) out += ',';
    need_comma = true;
    out += kDayAbbrevs[static_cast<size_t>(x)];
    if (y > x) {
      out += y > x + 1 ? ".." : ",";
      out += kDayAbbrevs[static_cast<size_t>(y)];
    }
    x = y + 1;
  }
}

void formatChain(std::string& out, int width, const std::vector<CalendarComponent>& chain,
                 bool usec) {
  const int d = usec ? kUsecPerSec : 1;
  // All values: no chain, or (for seconds) any element that is 0/1s.
  const bool star =
      chain.empty() || (usec && std::any_of(chain.begin(), chain.end(), [](auto& c) {
                          return c.start == 0 && c.stop < 0 && c.repeat == kUsecPerSec;
                        }));
  if (star) {
    out += '*';
    return;
  }
  bool first = true;
  for (const CalendarComponent& c : chain) {
    if (!first) out += ',';
    first = false;
    out += fmt::format("{:0{}}", c.start / d, width);
    if (c.start % d > 0) out += fmt::format(".{:06}", c.start % d);
    if (c.stop > 0) out += fmt::format("..{:0{}}", c.stop / d, width);
    if (c.stop % d > 0) out += fmt::format(".{:06}", c.stop % d);
    if (c.repeat > 0 && !(c.stop > 0 && c.repeat == d)) out += fmt::format("/{}", c.repeat / d);
    if (c.repeat % d > 0) out += fmt::format(".{:06}", c.repeat % d);
  }
}

}  // namespace

std::string CalendarSpec::normalized() const {
  std::string out;
  if (weekdays_bits_ > 0 && weekdays_bits_ <= kAllWeekdays) {
    formatWeekdays(out, weekdays_bits_);
    out += ' ';
  }
  formatChain(out, 4, year_, false);
  out += '-';
  formatChain(out, 2, month_, false);
  out += end_of_month_ ? '~' : '-';
  formatChain(out, 2, day_, false);
  out += ' ';
  formatChain(out, 2, hour_, false);
  out += ':';
  formatChain(out, 2, minute_, false);
  out += ':';
  formatChain(out, 2, microsecond_, true);
  if (utc_) {
    out += " UTC";
  } else if (!timezone_.empty()) {
    out += ' ';
    out += timezone_;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The next elapse: a port of systemd's find_next(), which walks year, month, day, weekday,
// hour, minute, second, letting mktime() normalise after every step and starting over when it
// moved something (a day 31 in a 30-day month, an hour skipped by DST).

class ElapseSearch {
 public:
  ElapseSearch(const CalendarSpec& spec, TimeConverter& conv) : spec_(spec), conv_(conv) {}

  // Returns false when the event never elapses again (or systemd would give up).
  bool findNext(Tm& tm, int& usec) {
    Tm c = tm;
    int tm_usec = usec;
    auto reset_below_day = [&] { c.hour = c.min = c.sec = tm_usec = 0; };

    for (int iteration = 0; iteration < kMaxIterations; ++iteration) {
      (void)conv_.make(c);
      c.isdst = -1;

      c.year += 1900;
      int r = findMatching(spec_.year_, false, c, c.year);
      c.year -= 1900;
      if (r > 0) {
        c.mon = 0;
        c.mday = 1;
        reset_below_day();
      }
      if (r < 0) return false;
      if (withinBounds(c) <= 0) return false;

      c.mon += 1;
      r = findMatching(spec_.month_, false, c, c.mon);
      c.mon -= 1;
      if (r > 0) {
        c.mday = 1;
        reset_below_day();
      }
      if (r < 0 || (r = withinBounds(c)) < 0) {
        c.year++;
        c.mon = 0;
        c.mday = 1;
        reset_below_day();
        continue;
      }
      if (r == 0) continue;

      r = findMatching(spec_.day_, spec_.end_of_month_, c, c.mday);
      if (r > 0) reset_below_day();
      if (r < 0 || (r = withinBounds(c)) < 0) {
        c.mon++;
        c.mday = 1;
        reset_below_day();
        continue;
      }
      if (r == 0) continue;

      if (!matchesWeekday(c)) {
        c.mday++;
        reset_below_day();
        continue;
      }

      r = findMatching(spec_.hour_, false, c, c.hour);
      if (r > 0) c.min = c.sec = tm_usec = 0;
      if (r < 0 || (r = withinBounds(c)) < 0) {
        c.mday++;
        reset_below_day();
        continue;
      }
      if (r == 0) continue;  // the hour may not exist on a DST change: retry from normal time

      r = findMatching(spec_.minute_, false, c, c.min);
      if (r > 0) c.sec = tm_usec = 0;
      if (r < 0 || (r = withinBounds(c)) < 0) {
        c.hour++;
        c.min = c.sec = tm_usec = 0;
        continue;
      }
      if (r == 0) continue;

      c.sec = c.sec * kUsecPerSec + tm_usec;
      r = findMatching(spec_.microsecond_, false, c, c.sec);
      tm_usec = c.sec % kUsecPerSec;
      c.sec /= kUsecPerSec;
      if (r < 0 || (r = withinBounds(c)) < 0) {
        c.min++;
        c.sec = tm_usec = 0;
        continue;
      }
      if (r == 0) continue;

      tm = c;
      usec = tm_usec;
      return true;
    }
    return false;
  }

 private:
  // The day `day` days before the end of tm's month (1 = the last day), or -1.
  int endOfMonth(const Tm& tm, int day) {
    Tm t = tm;
    t.mon++;
    t.mday = 1 - day;
    const auto r = conv_.make(t);
    if (!r || *r < 0 || t.mon != tm.mon) return -1;
    return t.mday;
  }

  // The earliest value >= val that the chain allows: -1 if none, 0 if val already matches,
  // 1 if val was moved.
  int findMatching(const std::vector<CalendarComponent>& chain, bool end_of_month, const Tm& tm,
                   int& val) {
    if (chain.empty()) return 0;
    int64_t d = -1;
    bool d_set = false;
    for (const CalendarComponent& c : chain) {
      int64_t start = c.start;
      int64_t stop = c.stop;
      if (end_of_month) {
        start = endOfMonth(tm, c.start);
        stop = endOfMonth(tm, c.stop);
        if (stop > 0) std::swap(start, stop);
      }
      if (start >= val) {
        if (!d_set || start < d) {
          d = start;
          d_set = true;
        }
      } else if (c.repeat > 0) {
        const int64_t span = val - start;
        const int64_t k = start + c.repeat * (span / c.repeat + (span % c.repeat != 0 ? 1 : 0));
        if ((!d_set || k < d) && (stop < 0 || k <= stop)) {
          d = k;
          d_set = true;
        }
      }
    }
    if (!d_set) return -1;
    const int changed = val != d ? 1 : 0;
    val = static_cast<int>(d);
    return changed;
  }

  // 1: tm is a real time; 0: mktime() moved it forward (tm updated, smaller units reset);
  // negative: past 2199, unconvertible, or moved backwards.
  int withinBounds(Tm& tm) {
    if (int64_t{tm.year} + 1900 > kMaxYear) return -1;
    Tm t = tm;
    const auto r = conv_.make(t);
    if (!r || *r < 0) return -1;
    int cmp = 0;
    auto compare = [](int a, int b) { return (a > b) - (a < b); };
    if ((cmp = compare(t.year, tm.year)) != 0) {
      t.mon = 0;
    } else if ((cmp = compare(t.mon, tm.mon)) != 0) {
      t.mday = 1;
    } else if ((cmp = compare(t.mday, tm.mday)) != 0) {
      t.hour = 0;
    } else if ((cmp = compare(t.hour, tm.hour)) != 0) {
      t.min = 0;
    } else if ((cmp = compare(t.min, tm.min)) != 0) {
      t.sec = 0;
    } else {
      cmp = compare(t.sec, tm.sec);
    }
    if (cmp < 0) return -2;
    if (cmp > 0) tm = t;
    return cmp == 0 ? 1 : 0;
  }

  bool matchesWeekday(const Tm& tm) {
    if (spec_.weekdays_bits_ < 0 || spec_.weekdays_bits_ >= kAllWeekdays) return true;
    Tm t = tm;
    const auto r = conv_.make(t);
    if (!r || *r < 0) return false;
    const int k = t.wday == 0 ? 6 : t.wday - 1;
    return (spec_.weekdays_bits_ & (1 << k)) != 0;
  }

  const CalendarSpec& spec_;
  TimeConverter& conv_;
};

std::optional<std::chrono::system_clock::time_point> CalendarSpec::nextElapse(
    std::chrono::system_clock::time_point after) const {
  using std::chrono::microseconds;
  int64_t usec = std::chrono::floor<microseconds>(after.time_since_epoch()).count();
  // systemd counts in unsigned microseconds since the epoch; earlier instants start at 0.
  usec = std::max<int64_t>(usec, -1);
  if (usec > kTimestampFormattableMaxUsec) return std::nullopt;
  ++usec;

  // A named zone computes in that zone; none (or one glibc could not read) in UTC. "@seconds"
  // with a zone stays in UTC, as in systemd.
  TimeConverter conv(zone_.get(), utc_);
  Tm tm;
  if (!conv.breakDown(usec / kUsecPerSec, tm)) return std::nullopt;
  int tm_usec = static_cast<int>(usec % kUsecPerSec);

  ElapseSearch search(*this, conv);
  if (!search.findNext(tm, tm_usec)) return std::nullopt;
  const auto t = conv.make(tm);
  if (!t || *t < 0) return std::nullopt;
  return std::chrono::system_clock::time_point(microseconds(*t * kUsecPerSec + tm_usec));
}

}  // namespace ekco::units
