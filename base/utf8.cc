#include "base/utf8.h"

namespace ekco::base {

namespace {

// The length of the valid UTF-8 character at the start of `s` (1-4), or 0 when it starts with an
// invalid sequence; `*invalid_len` is then the length of its maximal invalid subpart (>= 1).
std::size_t charLength(std::string_view s, std::size_t* invalid_len) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  *invalid_len = 1;
  if (b0 < 0x80) return 1;
  std::size_t need = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;  // no overlong forms
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;  // no overlong forms
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;  // 0x80-0xC1, 0xF5-0xFF: never a first byte
  }
  for (std::size_t i = 1; i <= need; ++i) {
    if (i >= s.size()) return 0;
    const unsigned char b = byte(i);
    // Only the second byte has a narrowed range.
    if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) return 0;
    *invalid_len = i + 1;
  }
  return need + 1;
}

}  // namespace

std::size_t validUtf8Prefix(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t invalid = 0;
    const std::size_t n = charLength(text.substr(pos), &invalid);
    if (n == 0) break;
    pos += n;
  }
  return pos;
}

bool isValidUtf8(std::string_view text) { return validUtf8Prefix(text) == text.size(); }

std::string toValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t valid = validUtf8Prefix(text.substr(pos));
    out.append(text.substr(pos, valid));
    pos += valid;
    if (pos >= text.size()) break;
    std::size_t invalid = 0;
    charLength(text.substr(pos), &invalid);
    out.append("\xEF\xBF\xBD");  // U+FFFD
    pos += invalid;
  }
  return out;
}

std::string_view utf8Prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t invalid = 0;
    std::size_t n = charLength(text.substr(pos), &invalid);
    if (n == 0) n = 1;  // an invalid byte is kept as it is, one byte
    if (pos + n > max_bytes) break;
    pos += n;
  }
  return text.substr(0, pos);
}

}  // namespace ekco::base
