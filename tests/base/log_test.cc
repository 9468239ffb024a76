#include "base/log/log.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/clock.h"

namespace ekco::base {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { configure(LogLevel::kInfo, false); }
  void TearDown() override { configureLogging(LogOptions{}); }
  void configure(LogLevel level, bool journal) {
    configureLogging(LogOptions{.level = level,
                                .journal = journal,
                                .sink = [this](std::string_view l) { lines.emplace_back(l); },
                                .clock = &clock});
  }
  ManualClock clock{WallTime(std::chrono::milliseconds(1'795'000'000'123))};
  std::vector<std::string> lines;
};

TEST_F(LogTest, WritesOneKeyValueLinePerEventWithTimestamp) {
  logInfo("config loaded", {{"file", "/etc/ekco/config.yaml"}, {"keys", 12}, {"dry_run", false}});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "time=2026-11-18T11:06:40.123Z level=info msg=\"config loaded\" "
            "file=/etc/ekco/config.yaml keys=12 dry_run=false\n");
}

TEST_F(LogTest, JournalStyleHasPriorityPrefixAndNoTimestamp) {
  configure(LogLevel::kDebug, true);
  logError("purge failed", {{"node", "node-c"}});
  logWarn("w");
  logInfo("i");
  logDebug("d");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "<3>level=error msg=\"purge failed\" node=node-c\n");
  EXPECT_EQ(lines[1].substr(0, 3), "<4>");
  EXPECT_EQ(lines[2].substr(0, 3), "<6>");
  EXPECT_EQ(lines[3].substr(0, 3), "<7>");
}

TEST_F(LogTest, DropsEventsBelowTheLevel) {
  configure(LogLevel::kWarn, false);
  logDebug("d");
  logInfo("i");
  logWarn("w");
  EXPECT_EQ(lines.size(), 1u);
  EXPECT_EQ(currentLogLevel(), LogLevel::kWarn);
}

TEST(FormatLogLine, QuotesValuesThatWouldBreakTheLine) {
  EXPECT_EQ(formatLogLine(LogLevel::kInfo, "m",
                          {{"a", ""},
                           {"b", "x=y"},
                           {"c", "two\nlines"},
                           {"d", "say \"hi\""},
                           {"e", std::chrono::minutes(5)}}),
            "level=info msg=m a=\"\" b=\"x=y\" c=\"two\\nlines\" d=\"say \\\"hi\\\"\" e=5m");
  EXPECT_EQ(formatLogLine(LogLevel::kWarn, "m", {{"err", Error("boom: x")}}),
            "level=warn msg=m err=\"boom: x\"");
}

TEST(ParseLogLevel, AcceptsEkcoSpellings) {
  EXPECT_EQ(*parseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(*parseLogLevel("INFO"), LogLevel::kInfo);
  EXPECT_EQ(*parseLogLevel("warning"), LogLevel::kWarn);
  EXPECT_EQ(*parseLogLevel("error"), LogLevel::kError);
  auto bad = parseLogLevel("verbose");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("verbose"), std::string::npos);
}

// Found by tests/fuzz/config_fuzz.cc: the text was copied raw into the message.
TEST(ParseLogLevel, ARejectedLevelIsQuotedAndEscapedInItsOneLineMessage) {
  auto bad = parseLogLevel(
      "\x16"
      "debug\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            R"(invalid log level "\x16debug\n" (want debug, info, warn or error))");
}

}  // namespace
}  // namespace ekco::base
