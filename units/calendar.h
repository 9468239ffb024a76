// systemd calendar events (systemd.time(7), "CALENDAR EVENTS"), validated and normalised the way
// systemd 252 does it, natively: the agent may run in a container without systemd, and the
// config key `auto_upgrade_schedule` becomes `OnCalendar=` of ekco-upgrade.timer, so a schedule
// systemd would refuse must be refused here first, with a reason.
//
// The grammar, the normal form and the elapse computation follow src/shared/calendarspec.c of
// systemd 252; tests/units/calendar_test.cc checks them against the real `systemd-analyze
// calendar`. Two facts of the host cannot be known from here and are fixed instead:
//  - The host's local time zone is taken to be UTC. systemd also accepts the abbreviations of
//    the host's own zone as a suffix ("Sat 17:30 CET" on a Berlin host, with tzname[] meaning);
//    here only " UTC" and zone names under the zoneinfo directory are accepted. A spec without a
//    zone is computed in UTC by nextElapse(), where systemd would use the host's local time.
//  - Zone names are looked up under CalendarOptions::zoneinfo_dir, like systemd's fixed
//    /usr/share/zoneinfo (point it at the host's copy when running in a container).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::units {

// One element of a component list: `start`, `start..stop` or either with `/repeat`. Seconds are
// held in microseconds. stop is -1 without a range and repeat 0 without a repetition.
struct CalendarComponent {
  int start = 0;
  int stop = -1;
  int repeat = 0;

  auto operator<=>(const CalendarComponent&) const = default;
};

// Time-zone rules read from a TZif file; defined in calendar.cc.
class CalendarZone;

// A parsed calendar event. Values are immutable and cheap to copy (the zone rules are shared).
class CalendarSpec {
 public:
  // The spec as systemd prints it ("Normalized form:" of systemd-analyze calendar), e.g.
  // "Sat 17:30" → "Sat *-*-* 17:30:00". Writing this form into a unit file is equivalent to
  // writing the original text, and it never contains control characters. Except, as in systemd
  // (checked with systemd-analyze 252; tests/fuzz/calendar_fuzz.cc found them): "@seconds ZONE"
  // drops the zone, which moves the elapse in a leap-second zone ("right/UTC": 27 s); and seconds
  // holding 0/1 print as "*", dropping a fraction of a second beside it ("*:*:0/1,1.5").
  std::string normalized() const;

  // The first time strictly after `after` at which the event elapses, or nullopt when it never
  // will again (a date in the past, "*-02-30", a year beyond 2199) or when systemd would give up
  // ("Infinite loop in calendar calculation", after which its timer stops). Computed in the
  // spec's zone when it names one, else in UTC (see the file comment). Microsecond precision.
  std::optional<std::chrono::system_clock::time_point> nextElapse(
      std::chrono::system_clock::time_point after) const;

  // The zone named by the spec ("Europe/Berlin"), empty for none and for UTC.
  const std::string& timezone() const { return timezone_; }
  // True when the spec ends in " UTC" or is an "@seconds" timestamp.
  bool utc() const { return utc_; }

 private:
  friend class CalendarParser;
  friend class ElapseSearch;

  int weekdays_bits_ = -1;  // bit 0 = Monday; -1 = any day
  bool end_of_month_ = false;
  bool utc_ = false;
  std::string timezone_;
  std::shared_ptr<const CalendarZone> zone_;  // set when timezone_ is
  std::vector<CalendarComponent> year_;
  std::vector<CalendarComponent> month_;
  std::vector<CalendarComponent> day_;
  std::vector<CalendarComponent> hour_;
  std::vector<CalendarComponent> minute_;
  std::vector<CalendarComponent> microsecond_;
};

struct CalendarOptions {
  // Where zone names are looked up; systemd 252 always uses /usr/share/zoneinfo.
  std::string zoneinfo_dir = "/usr/share/zoneinfo";
};

// Parses a calendar event as systemd 252 would (`systemd-analyze calendar` semantics): weekday
// lists and ranges, dates and times with `*`, `a..b`, `/repeat`, `,` lists and `~` (days counted
// from the end of the month), 2-digit years, fractional seconds, the shorthands (minutely,
// hourly, daily, weekly, monthly, yearly, annually, quarterly, semiannually, ...), `@seconds`,
// and a trailing " UTC" or zone name. As in systemd, parts are separated by spaces only, and
// leading or trailing whitespace is an error. Fails with kInvalidArgument and a short reason
// (control characters of the text escaped), e.g.
//   invalid calendar event "Sat 25:00": hour 25 out of range 0..23
// The caller adds which key the text came from.
[[nodiscard]] base::Result<CalendarSpec> parseCalendar(std::string_view text,
                                                       const CalendarOptions& options = {});

}  // namespace ekco::units
