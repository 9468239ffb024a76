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

TEST(Strings, QuoteForMessageKeepsAMessageOnOneLineAndFreeOfTerminalEscapes) {
  EXPECT_EQ(quoteForMessage("plain"), "\"plain\"");
  EXPECT_EQ(quoteForMessage("a\nb: ok"), "\"a\\nb: ok\"");  // cannot forge a second line
  EXPECT_EQ(quoteForMessage("\x1b[2J\r\t\x7f"), "\"\\x1b[2J\\r\\t\\x7f\"");
  EXPECT_EQ(quoteForMessage("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
  EXPECT_EQ(quoteForMessage("Äpfel"), "\"Äpfel\"");  // other bytes are kept
  EXPECT_EQ(quoteForMessage("abcdef", 3), "\"abc...\"");
}

TEST(Strings, EscapeForMessageEscapesLikeQuoteForMessageWithoutTheQuotes) {
  EXPECT_EQ(escapeForMessage("unknown escape character: \x01"), "unknown escape character: \\x01");
  EXPECT_EQ(escapeForMessage("a\nb \"c\""), "a\\nb \\\"c\\\"");
  EXPECT_EQ(escapeForMessage(""), "");
}

}  // namespace
}  // namespace ekco::base
