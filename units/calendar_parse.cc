// Calendar events as systemd 252 parses them (src/shared/calendarspec.c): the grammar, the
// checks and the error messages; see units/calendar.cc for the rest.
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

#include "units/calendar_zone.h"

namespace ekco::units {

using namespace detail;  // NOLINT(google-build-using-namespace): units/ internals

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

}  // namespace ekco::units
