#include "base/duration.h"

#include <gtest/gtest.h>

namespace ekco::base {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

Duration parsed(std::string_view s) {
  auto r = parseDuration(s);
  EXPECT_TRUE(r) << s << ": " << (r ? "" : r.error().message());
  return r ? *r : Duration(-1);
}

TEST(ParseDuration, AcceptsGoSyntax) {
  EXPECT_EQ(parsed("90s"), seconds(90));
  EXPECT_EQ(parsed("5m"), minutes(5));
  EXPECT_EQ(parsed("1h30m"), minutes(90));
  EXPECT_EQ(parsed("720h"), hours(720));
  EXPECT_EQ(parsed("1.5h"), minutes(90));
  EXPECT_EQ(parsed("300ms"), milliseconds(300));
  EXPECT_EQ(parsed("2h45m30.5s"), hours(2) + minutes(45) + milliseconds(30500));
  EXPECT_EQ(parsed("10us"), nanoseconds(10'000));
  EXPECT_EQ(parsed("10\xC2\xB5s"), nanoseconds(10'000));
  EXPECT_EQ(parsed("7ns"), nanoseconds(7));
  EXPECT_EQ(parsed(".5s"), milliseconds(500));
  EXPECT_EQ(parsed("5.m"), minutes(5));
  EXPECT_EQ(parsed("0"), Duration(0));
  EXPECT_EQ(parsed("-1m"), -minutes(1));
  EXPECT_EQ(parsed("+1m"), minutes(1));
  EXPECT_EQ(parsed("1m1m"), minutes(2));  // Go sums repeated units
}

TEST(ParseDuration, RejectsWhatGoRejects) {
  for (std::string_view bad : {"", "5", "60", "m", "1x", "1 m", " 1m", "1m ", "1.s.", "--1s", "1d",
                               "1hour", ".s", "-", "9999999999h"}) {
    auto r = parseDuration(bad);
    EXPECT_FALSE(r) << "accepted \"" << bad << "\"";
    if (!r) {
      EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(r.error().message().find("invalid duration"), std::string::npos);
    }
  }
  EXPECT_NE(parseDuration("60").error().message().find("missing unit"), std::string::npos);
}

// Found by tests/fuzz/config_fuzz.cc: the text was copied raw into the message, so a config
// value could break `ekco config check`'s output over lines or carry terminal escapes.
TEST(ParseDuration, ARejectedDurationIsQuotedAndEscapedInItsOneLineMessage) {
  auto r = parseDuration("5m\a\n\x1b[2J");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), R"(invalid duration "5m\x07\n\x1b[2J": expected a number)");
  r = parseDuration("5x\r\x01");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), R"(invalid duration "5x\r\x01": unknown unit "x\r\x01")");
}

TEST(FormatDuration, IsShortAndRoundTrips) {
  EXPECT_EQ(formatDuration(minutes(5)), "5m");
  EXPECT_EQ(formatDuration(minutes(90)), "1h30m");
  EXPECT_EQ(formatDuration(hours(720)), "720h");
  EXPECT_EQ(formatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(formatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(formatDuration(Duration(0)), "0s");
  EXPECT_EQ(formatDuration(-seconds(30)), "-30s");
  EXPECT_EQ(formatDuration(hours(1) + seconds(1)), "1h1s");
  EXPECT_EQ(formatDuration(nanoseconds(1'000'001)), "1.000001ms");
  for (Duration d : {Duration(1), Duration(999), Duration(123'456'789), Duration(3'600'000'000'001),
                     Duration(std::numeric_limits<int64_t>::max())}) {
    EXPECT_EQ(parsed(formatDuration(d)), d) << formatDuration(d);
  }
}

}  // namespace
}  // namespace ekco::base
