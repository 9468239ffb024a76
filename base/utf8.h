// UTF-8 for text that came from outside (a command's output, a path, an API object's string) on
// its way into JSON, Events and messages. JSON must be valid UTF-8: nlohmann's dump() throws on
// anything else, and an Event message cut at a byte limit may split a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ekco::base {

// The length of the longest prefix of `text` that is valid UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF).
std::size_t validUtf8Prefix(std::string_view text);

bool isValidUtf8(std::string_view text);

// `text` with every invalid byte sequence replaced by U+FFFD (one per maximal invalid subpart, as
// the Unicode standard recommends and nlohmann's error_handler_t::replace does).
std::string toValidUtf8(std::string_view text);

// At most `max_bytes` bytes of `text`, never ending inside a multi-byte character: a character
// the limit would split is left out whole. Invalid bytes count as one-byte characters.
std::string_view utf8Prefix(std::string_view text, std::size_t max_bytes);

}  // namespace ekco::base
