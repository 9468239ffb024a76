// RFC 3339 timestamps (kube/decode/timestamp.h): every time the API sends (taints' timeAdded,
// deletionTimestamp, a Lease's renewTime) goes through parseRfc3339.
//
// Checks: an accepted time lies in [kEarliestApiTime, kLatestApiTime]; it survives a
// formatRfc3339Micro → parse round trip to the microsecond and a formatRfc3339 → parse round
// trip to the second; a UTC ("Z") text inside the window formats back to its own date and time,
// with the fraction it gave (to the nanosecond), and one outside it becomes the window's edge
// (a far-future time stays "not yet", never a past one); a rejected text gets a one-line message.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kube/decode/timestamp.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace std::chrono;
using ekco::fuzz::check;
using ekco::kube::kEarliestApiTime;
using ekco::kube::kLatestApiTime;

// The fraction's digits after "YYYY-MM-DDTHH:MM:SS.", as nanoseconds (digits past the ninth are
// dropped, as parseRfc3339 documents).
nanoseconds fractionOf(std::string_view text) {
  if (text.size() <= 19 || text[19] != '.') return nanoseconds(0);
  long long ns = 0;
  int kept = 0;
  for (std::size_t i = 20; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (kept < 9) {
      ns = ns * 10 + (text[i] - '0');
      ++kept;
    }
  }
  while (kept++ < 9) ns *= 10;
  return nanoseconds(ns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = ekco::fuzz::asText(data, size);
  auto parsed = ekco::kube::parseRfc3339(text);
  if (!parsed) {
    ekco::fuzz::checkOneLine(parsed.error().message(), "parseRfc3339 error");
    check(parsed.error().message().starts_with("timestamp \""),
          "parseRfc3339 error does not name the timestamp", parsed.error().message());
    return 0;
  }
  const ekco::base::WallTime t = *parsed;
  check(t >= kEarliestApiTime && t <= kLatestApiTime, "parsed time outside the window", text);

  const std::string micro = ekco::kube::formatRfc3339Micro(t);
  auto again = ekco::kube::parseRfc3339(micro);
  check(again.has_value(), "formatRfc3339Micro output does not parse", micro);
  check(*again == floor<microseconds>(t), "formatRfc3339Micro round trip changed the time", micro);

  const std::string whole = ekco::kube::formatRfc3339(t);
  auto whole_again = ekco::kube::parseRfc3339(whole);
  check(whole_again.has_value(), "formatRfc3339 output does not parse", whole);
  check(*whole_again == floor<seconds>(t), "formatRfc3339 round trip changed the time", whole);

  // A UTC text, checked against its own digits.
  const char zone = text.back();
  if (zone == 'Z' || zone == 'z') {
    const int year = std::stoi(std::string(text.substr(0, 4)));
    if (year < 1900) {
      check(t == kEarliestApiTime, "a UTC time before 1900 is not the window's start", text);
    } else if (year >= 2200) {
      check(t == kLatestApiTime, "a UTC time from 2200 on is not the window's end", text);
    } else {
      std::string expected(text.substr(0, 19));
      expected[10] = 'T';
      check(whole == expected + "Z", "a UTC time does not format back to its digits",
            whole + " from " + std::string(text));
      check(t - floor<seconds>(t) == fractionOf(text), "a UTC time lost its fraction", text);
    }
  }
  return 0;
}
