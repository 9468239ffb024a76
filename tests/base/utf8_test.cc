#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace ekco::base {
namespace {

TEST(Utf8, ValidTextIsKeptAndEveryInvalidFormIsFound) {
  EXPECT_TRUE(isValidUtf8(""));
  EXPECT_TRUE(isValidUtf8("plain ascii"));
  EXPECT_TRUE(isValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_FALSE(isValidUtf8("caf\xE9"));           // Latin-1 é: `printf 'caf\351'`
  EXPECT_FALSE(isValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xE0\x80\xAF"));      // overlong, three bytes
  EXPECT_FALSE(isValidUtf8("\xED\xA0\x80"));      // a surrogate (U+D800)
  EXPECT_FALSE(isValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xE2\x82"));          // cut inside a character
  EXPECT_FALSE(isValidUtf8("\x80"));              // a lone continuation byte
  EXPECT_FALSE(isValidUtf8("\xFF"));
  EXPECT_EQ(validUtf8Prefix("ab\xE2\x82"), 2u);
}

TEST(Utf8, InvalidSequencesBecomeOneReplacementCharacterEach) {
  EXPECT_EQ(toValidUtf8("caf\xE9"), "caf\xEF\xBF\xBD");
  EXPECT_EQ(toValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  // A truncated three-byte character is one maximal invalid subpart: one U+FFFD.
  EXPECT_EQ(toValidUtf8("a\xE2\x82z"), "a\xEF\xBF\xBDz");
  // Two stray bytes are two.
  EXPECT_EQ(toValidUtf8("\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(isValidUtf8(toValidUtf8("\xF0\x9F\x98")));
}

TEST(Utf8, APrefixNeverEndsInsideACharacter) {
  const std::string e_acute = "\xC3\xA9";
  std::string text;
  for (int i = 0; i < 10; ++i) text += e_acute;  // 20 bytes
  EXPECT_EQ(utf8Prefix(text, 20), text);
  EXPECT_EQ(utf8Prefix(text, 7).size(), 6u);  // not 7: that would split the fourth é
  EXPECT_TRUE(isValidUtf8(utf8Prefix(text, 7)));
  EXPECT_EQ(utf8Prefix(text, 1), "");
  EXPECT_EQ(utf8Prefix("abc", 2), "ab");
  // An invalid byte counts as one byte and is kept (toValidUtf8 replaces it later).
  EXPECT_EQ(utf8Prefix("a\xE9z", 2), "a\xE9");
}

}  // namespace
}  // namespace ekco::base
