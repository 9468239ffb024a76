// Calendar events as systemd 252 parses, prints and schedules them (src/shared/calendarspec.c),
// plus the two pieces of glibc 2.36 that systemd's schedule depends on for a named zone:
// localtime_r() over a TZif file and mktime()'s way of resolving local times that do not exist
// or exist twice. Every rule below that looks arbitrary is there because systemd or glibc does
// it; tests/units/calendar_test.cc compares the result with systemd-analyze.
//
// This file: the normal form and the next elapse. The parser is calendar_parse.cc, civil time
// and zones calendar_zone.{h,cc}.
#include "units/calendar.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "units/calendar_zone.h"

namespace ekco::units {

using namespace detail;  // NOLINT(google-build-using-namespace): units/ internals

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
  // A step-for-step port of systemd's find_next(); kept whole to compare with the original.
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
