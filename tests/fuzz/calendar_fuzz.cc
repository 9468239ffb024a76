// systemd calendar specs (units/calendar.h): `auto_upgrade_schedule` is checked with
// parseCalendar and written as OnCalendar= of ekco-upgrade.timer in its normalized form.
//
// Checks: an error is one line and quotes the spec ("invalid calendar event ..."); an accepted
// spec's normalized form has no control character, parses again to itself (a fixed point),
// and elapses at the same times as the original (writing it instead of the original changes
// nothing) except in the two corners where systemd's own normal form does not either (below);
// each next elapse is strictly after the time asked about.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"
#include "units/calendar.h"

namespace {

// The seconds of a normal form ("Sat *-*-* 17:30:00" → "00"): after the last ':' of the one
// word that has two.
std::string_view secondsOf(std::string_view normalized) {
  std::size_t start = 0;
  while (start < normalized.size()) {
    std::size_t end = normalized.find(' ', start);
    if (end == std::string_view::npos) end = normalized.size();
    const std::string_view word = normalized.substr(start, end - start);
    if (std::count(word.begin(), word.end(), ':') == 2) return word.substr(word.rfind(':') + 1);
    start = end + 1;
  }
  return {};
}

bool hasFraction(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] == '.' && text[i + 1] >= '0' && text[i + 1] <= '9') return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  using std::chrono::system_clock;
  const std::string_view text = ekco::fuzz::asText(data, size);
  auto spec = ekco::units::parseCalendar(text);
  if (!spec) {
    ekco::fuzz::checkOneLine(spec.error().message(), "parseCalendar error");
    check(spec.error().message().starts_with("invalid calendar event \""),
          "parseCalendar error does not quote the spec", spec.error().message());
    return 0;
  }
  const std::string normalized = spec->normalized();
  ekco::fuzz::checkOneLine(normalized, "normalized calendar spec");
  auto again = ekco::units::parseCalendar(normalized);
  check(again.has_value(), "the normalized form does not parse",
        normalized + " from " + std::string(text));
  check(again->normalized() == normalized, "the normalized form is not a fixed point",
        normalized + " -> " + again->normalized());

  // Two corners where systemd 252's normal form (which ekco reproduces, calendar_test.cc's
  // differential test) elapses differently from the original, checked with systemd-analyze:
  //  - "@seconds ZONE" normalizes to "... UTC", dropping the zone, yet the original is computed
  //    in it: in a leap-second zone (right/...) "@2966457600 right/UTC" elapses 27 s later;
  //  - seconds holding "0/1" (every second) print as "*", dropping any other element, so a
  //    fraction of a second beside it ("*:*:0/1,1.5") no longer elapses.
  const bool differs_in_systemd = (spec->utc() && spec->timezone().starts_with("right/")) ||
                                  (secondsOf(normalized) == "*" && hasFraction(text));

  // Tue 2023-11-14 22:13:20 UTC, as tests/testdata/calendar/corpus.txt's default base time.
  system_clock::time_point after{std::chrono::seconds(1'700'000'000)};
  for (int i = 0; i < 3; ++i) {
    const auto next = spec->nextElapse(after);
    const auto next_normalized = again->nextElapse(after);
    check(differs_in_systemd || next == next_normalized,
          "the normalized form elapses at other times", normalized + " from " + std::string(text));
    if (!next) break;
    check(*next > after, "nextElapse is not after the time asked about", normalized);
    after = *next;
  }
  return 0;
}
