// What every fuzz target (tests/fuzz/*_fuzz.cc) shares: the input as text, and checks that
// abort on violation, so libFuzzer records the input as a crash (build-fuzz/artifacts/) just as
// it does for a sanitizer report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/strings.h"

namespace ekco::fuzz {

inline std::string_view asText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Stops the run: the invariant `what` does not hold. `detail` is printed escaped (it may hold
// anything the input put there).
[[noreturn]] inline void fail(std::string_view what, std::string_view detail = {}) {
  std::string line = "INVARIANT VIOLATED: " + std::string(what);
  if (!detail.empty()) line += ": " + base::quoteForMessage(detail, 2000);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::abort();
}

inline void check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) fail(what, detail);
}

// A message for people about bad input is one line that cannot carry terminal escapes: no C0
// control character and no DEL, whatever the input held (values are quoted with
// base::quoteForMessage).
inline void checkOneLine(std::string_view message, std::string_view what) {
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f)
      fail(std::string(what) + ": a control character in a message", message);
  }
}

// Splits `text` at its first '\n': the line before and the rest after (the whole text and ""
// when there is no newline).
inline std::pair<std::string_view, std::string_view> firstLine(std::string_view text) {
  const std::size_t nl = text.find('\n');
  if (nl == std::string_view::npos) return {text, {}};
  return {text.substr(0, nl), text.substr(nl + 1)};
}

}  // namespace ekco::fuzz
