// Small string helpers, written once. ASCII only, independent of the C locale: ekco's inputs
// here are config keys, names and protocol text.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ekco::base {

std::string asciiLower(std::string_view s);
std::string asciiUpper(std::string_view s);
// Without leading and trailing whitespace (space, \t, \n, \v, \f, \r).
std::string_view trimSpace(std::string_view s);

// Appends `value` with Go-style escapes and no quotes: \" \\ \n \r \t, other control characters
// (C0 and DEL) as \xNN; every other byte as it is. The one escaper of the log and of messages.
void appendEscaped(std::string& out, std::string_view value);

// `value` with appendEscaped's escapes and no quotes: for text a message shows as it is but that
// may hold any byte, such as a library's error text ("unknown escape character: \x00").
std::string escapeForMessage(std::string_view value);

// `value` in double quotes with Go-style escapes, for error messages, so a message stays one line
// and cannot carry terminal escapes whatever the value: "a\nb", "say \"hi\"", "\x01", "\x1b".
// Control characters (C0 and DEL) are escaped; other bytes are kept. At most `max_shown` bytes
// of the value are shown, never ending inside a UTF-8 character; a longer value ends in "...".
std::string quoteForMessage(std::string_view value, std::size_t max_shown = 80);

// A size for messages: "16 MiB", "64 KiB" when it is a whole number of them, else "1000 bytes".
std::string describeBytes(std::size_t bytes);

}  // namespace ekco::base
