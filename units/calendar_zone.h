// Internal to units/ (not part of units/calendar.h's interface): civil time and one zone's rules
// as glibc 2.36 computes them for systemd's calendar events: struct tm, __offtime, the POSIX TZ
// footer of a TZif file, a TZif zone and localtime/mktime over it (units/calendar_zone.cc). The
// parser (calendar_parse.cc) and the elapse search (calendar.cc) share them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ekco::units {
namespace detail {

inline constexpr int kUsecPerSec = 1'000'000;
inline constexpr int kMinYear = 1970;
inline constexpr int kMaxYear = 2199;
inline constexpr int kAllWeekdays = 127;
// systemd refuses a list of more than 241 elements (CALENDARSPEC_COMPONENTS_MAX, counted from 0).
inline constexpr int kMaxNesting = 240;
// systemd gives up on a spec after this many steps (MAX_CALENDAR_ITERATIONS).
inline constexpr int kMaxIterations = 1000;
// systemd refuses to compute elapses after 9999-12-30 23:59:59.999999 UTC.
inline constexpr int64_t kTimestampFormattableMaxUsec = 253402214399999999;
// The last second of 2199, the latest date systemd accepts.
inline constexpr int64_t kMaxEpochSeconds = 7258118399;

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

// glibc's __offtime: breaks t + offset down as UTC. Fails when the year does not fit an int.
bool offtime(int64_t t, int64_t offset, Tm& out);

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

// Weekdays as systemd prints them, Monday first (bit 0 of a weekday set).
inline constexpr std::array<std::string_view, 7> kDayAbbrevs = {"Mon", "Tue", "Wed", "Thu",
                                                                "Fri", "Sat", "Sun"};

inline bool isAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool isAsciiDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace detail

class CalendarZone {
 public:
  // Parses TZif data; nullopt when glibc would not be able to use it either.
  static std::optional<CalendarZone> fromTzif(std::string_view data);

  // glibc's __tz_convert: localtime_r() when `local`, else gmtime_r() (which still applies the
  // file's leap seconds, as glibc does for the zone in TZ).
  bool convert(int64_t t, bool local, detail::Tm& out) const;

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
  std::optional<detail::PosixTz> footer_;
};

namespace detail {

// ---------------------------------------------------------------------------------------------
// localtime_r/gmtime_r and mktime/timegm over one zone. make() follows glibc 2.36's
// __mktime_internal step by step, including the guess it carries from one call to the next,
// because which of two candidate instants it returns for a skipped or repeated local time
// depends on it, and systemd's search calls mktime() dozens of times per elapse.
class TimeConverter {
 public:
  // zone == nullptr: UTC. utc: gmtime/timegm semantics even with a zone.
  TimeConverter(const CalendarZone* zone, bool utc) : zone_(zone), utc_(utc) {}

  bool breakDown(int64_t t, Tm& out) const;
  // Normalises tp and returns its time; nullopt (tp untouched) when glibc would fail.
  std::optional<int64_t> make(Tm& tp);

 private:
  const CalendarZone* zone_;
  bool utc_;
  int64_t offset_ = 0;  // glibc's static localtime_offset/gmtime_offset, 0 in a fresh process
};

}  // namespace detail
}  // namespace ekco::units
