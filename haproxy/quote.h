// Quoting of rejected values in error messages, so a message stays one line whatever the value.
#pragma once

#include <string>
#include <string_view>

#include <fmt/format.h>

namespace ekco::haproxy {

// `value` in double quotes with Go-style escapes: "a\nb", "say \"hi\"", "\x01". At most 80 bytes of
// it are shown; a longer value ends in "...".
inline std::string quoteValue(std::string_view value) {
  constexpr std::size_t kMaxShown = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < value.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  if (value.size() > kMaxShown) out += "...";
  out += '"';
  return out;
}

}  // namespace ekco::haproxy
