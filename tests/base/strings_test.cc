#include "base/strings.h"

#include <gtest/gtest.h>

namespace ekco::base {
namespace {

TEST(Strings, LowerAndUpperTouchAsciiLettersOnly) {
  EXPECT_EQ(asciiLower("Node-A_ÄB1"), "node-a_Äb1");
  EXPECT_EQ(asciiUpper("info warn"), "INFO WARN");
  EXPECT_EQ(asciiLower(""), "");
}

TEST(Strings, TrimSpaceRemovesEveryKindOfAsciiWhitespaceAtBothEnds) {
  EXPECT_EQ(trimSpace(" \t\r\n\v\fvalue with space\n"), "value with space");
  EXPECT_EQ(trimSpace("   "), "");
  EXPECT_EQ(trimSpace("x"), "x");
}

}  // namespace
}  // namespace ekco::base
