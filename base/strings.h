// Small string helpers, written once. ASCII only, independent of the C locale: ekco's inputs
// here are config keys, names and protocol text.
#pragma once

#include <string>
#include <string_view>

namespace ekco::base {

std::string asciiLower(std::string_view s);
std::string asciiUpper(std::string_view s);
// Without leading and trailing whitespace (space, \t, \n, \v, \f, \r).
std::string_view trimSpace(std::string_view s);

}  // namespace ekco::base
