#include "kube/decode/timestamp.h"

#include <gtest/gtest.h>

namespace ekco::kube {
namespace {

using namespace std::chrono;

base::WallTime at(sys_days day, nanoseconds since_midnight = {}) {
  return base::WallTime(
      duration_cast<base::WallTime::duration>(day.time_since_epoch() + since_midnight));
}

TEST(Rfc3339, ParsesUtcSeconds) {
  auto t = parseRfc3339("2026-11-22T04:08:28Z");
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(*t, at(2026y / November / 22, hours(4) + minutes(8) + seconds(28)));
}

TEST(Rfc3339, ParsesFractionalSecondsToNanoseconds) {
  EXPECT_EQ(*parseRfc3339("2026-11-22T04:08:28.5Z"),
            at(2026y / November / 22, hours(4) + minutes(8) + milliseconds(28500)));
  EXPECT_EQ(*parseRfc3339("2026-11-22T04:08:28.123456Z"),
            at(2026y / November / 22, hours(4) + minutes(8) + seconds(28) + microseconds(123456)));
  // Digits beyond nanoseconds are dropped, as Go does.
  EXPECT_EQ(*parseRfc3339("1970-01-01T00:00:00.0000000019Z"),
            at(1970y / January / 1, nanoseconds(1)));
}

TEST(Rfc3339, AppliesZoneOffsets) {
  EXPECT_EQ(*parseRfc3339("2026-11-22T06:08:28+02:00"), *parseRfc3339("2026-11-22T04:08:28Z"));
  EXPECT_EQ(*parseRfc3339("2026-11-21T23:38:28.25-04:30"),
            *parseRfc3339("2026-11-22T04:08:28.25Z"));
  EXPECT_EQ(*parseRfc3339("2026-11-22t04:08:28z"), *parseRfc3339("2026-11-22T04:08:28Z"));
}

TEST(Rfc3339, RejectsMalformedTimestampsAsParseErrors) {
  for (const char* bad :
       {"", "2026-11-22", "2026-11-22T04:08:28", "2026-11-22 04:08:28Z", "2026-13-22T04:08:28Z",
        "2026-02-30T04:08:28Z", "2026-11-22T24:00:00Z", "2026-11-22T04:08:60Z",
        "2026-11-22T04:08:28.Z", "2026-11-22T04:08:28+0200", "2026-11-22T04:08:28Zjunk",
        "yesterday at noon please"}) {
    auto t = parseRfc3339(bad);
    ASSERT_FALSE(t) << bad;
    EXPECT_EQ(t.error().code(), base::ErrorCode::kParse) << bad;
  }
}

// Found by tests/fuzz/timestamp_fuzz.cc: the text was copied raw into the message, so a
// timestamp from the API could break it over lines or carry terminal escapes.
TEST(Rfc3339, ARejectedTimestampIsQuotedAndEscapedInItsOneLineMessage) {
  auto t = parseRfc3339(std::string_view("2200-01-01T\0\n\x1b[2J00:00Z", 23));
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message(),
            R"(timestamp "2200-01-01T\x00\n\x1b[2J00:00Z": not YYYY-MM-DDTHH:MM:SS)");
  auto long_one = parseRfc3339(std::string(100, '9'));
  ASSERT_FALSE(long_one);
  EXPECT_EQ(long_one.error().message(),
            "timestamp \"" + std::string(64, '9') + "...\": not YYYY-MM-DDTHH:MM:SS");
}

TEST(Rfc3339, AcceptsEveryYearGoDoesAndClampsIntoTheWindowWithoutWrapping) {
  // Years 0000-9999 are valid RFC 3339 and Go writes them; int64 nanoseconds reach only
  // 1677-2262, and an overflow used to turn year 9999 into 1816 ("dead since 1816").
  EXPECT_EQ(*parseRfc3339("9999-12-31T23:59:59.999999999Z"), kLatestApiTime);
  EXPECT_EQ(*parseRfc3339("2262-04-12T00:00:00Z"), kLatestApiTime);  // just past int64 ns
  EXPECT_EQ(*parseRfc3339("2200-01-01T00:00:00Z"), kLatestApiTime);
  EXPECT_EQ(*parseRfc3339("2199-12-31T23:59:59Z"),
            at(2199y / December / 31, hours(23) + minutes(59) + seconds(59)));
  EXPECT_EQ(*parseRfc3339("0000-01-01T00:00:00Z"), kEarliestApiTime);
  EXPECT_EQ(*parseRfc3339("1677-09-21T00:12:43Z"), kEarliestApiTime);
  EXPECT_EQ(*parseRfc3339("1900-01-01T00:00:00Z"), kEarliestApiTime);
  EXPECT_EQ(*parseRfc3339("1900-01-01T00:00:01Z"), kEarliestApiTime + seconds(1));
  // A zone offset that carries a time across the edge is applied before clamping.
  EXPECT_EQ(*parseRfc3339("2199-12-31T23:30:00-01:00"), kLatestApiTime);
  // Far future stays in the future: later than any now ekco will see, and ordered.
  const auto now = at(2026y / November / 23);
  for (const char* future : {"9999-12-31T23:59:59Z", "3000-01-01T00:00:00Z", "2262-04-11T23:47:17Z",
                             "2500-06-01T12:00:00+14:00"}) {
    auto t = parseRfc3339(future);
    ASSERT_TRUE(t) << future;
    EXPECT_GT(*t, now) << future;
    // now - t is representable (the consumers subtract).
    EXPECT_LT(std::chrono::duration_cast<std::chrono::hours>(now - *t).count(), 0) << future;
  }
  for (const char* past :
       {"0000-01-01T00:00:00Z", "0001-01-01T00:00:00Z", "1000-03-01T00:00:00Z"}) {
    auto t = parseRfc3339(past);
    ASSERT_TRUE(t) << past;
    EXPECT_LT(*t, now) << past;
  }
  EXPECT_EQ(formatRfc3339(kLatestApiTime), "2200-01-01T00:00:00Z");
}

TEST(SaturatingAdd, HoldsAtTheEdgesInsteadOfWrapping) {
  const auto huge = std::chrono::hours(2562047);  // Go's largest duration
  EXPECT_EQ(base::saturatingAdd(kLatestApiTime, huge), base::WallTime::max());
  EXPECT_GT(base::saturatingAdd(at(2026y / November / 23), huge), kLatestApiTime);
  EXPECT_EQ(base::saturatingAdd(kEarliestApiTime, -huge), base::WallTime::min());
  EXPECT_EQ(base::saturatingAdd(kLatestApiTime, seconds(1)), kLatestApiTime + seconds(1));
}

TEST(Rfc3339, FormatsWholeSecondsAndMicrosecondsInUtc) {
  const auto t =
      at(2026y / November / 22, hours(4) + minutes(8) + seconds(28) + microseconds(123456));
  EXPECT_EQ(formatRfc3339(t), "2026-11-22T04:08:28Z");
  EXPECT_EQ(formatRfc3339Micro(t), "2026-11-22T04:08:28.123456Z");
  EXPECT_EQ(*parseRfc3339(formatRfc3339Micro(t)), t);
  EXPECT_EQ(formatCompactUtc(t), "20261122T040828Z");
  EXPECT_EQ(formatRfc3339(at(1969y / December / 31, hours(23) + minutes(59) + seconds(59))),
            "1969-12-31T23:59:59Z");
}

}  // namespace
}  // namespace ekco::kube
