// Captures the process's log lines (base/log/log.h) while a test runs.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

#include "base/log/log.h"

namespace ekco::agent::testing {

// Collects log lines for the duration of a test.
class LogCapture {
 public:
  LogCapture() {
    base::LogOptions options;
    options.level = base::LogLevel::kInfo;
    options.sink = [this](std::string_view line) {
      std::lock_guard lock(mu_);
      text_ += line;
    };
    base::configureLogging(options);
  }
  ~LogCapture() { base::configureLogging({}); }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }
  std::size_t count(std::string_view needle) const {
    const std::string t = text();
    std::size_t n = 0;
    for (std::size_t at = t.find(needle); at != std::string::npos; at = t.find(needle, at + 1)) {
      ++n;
    }
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

}  // namespace ekco::agent::testing
