// Structured logging: one line per event, `key=value` fields, to stderr. Under systemd (stderr
// connected to the journal, $JOURNAL_STREAM) each line starts with a syslog priority prefix
// (<3> error, <4> warning, <6> info, <7> debug) and carries no timestamp, because journald adds
// its own; elsewhere (a terminal, `kubectl logs`) lines start with an RFC 3339 UTC timestamp.
//
// Libraries return errors; only agent/ logs (style.md).
#pragma once

#include <chrono>
#include <concepts>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::base {

class Clock;

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// "debug", "info", "warn"/"warning", "error" (any case). Anything else is an error.
Result<LogLevel> parseLogLevel(std::string_view text);
std::string_view logLevelName(LogLevel level);

// One key=value pair. Values are converted to text here so call sites stay short:
//   log(LogLevel::kInfo, "config loaded", {{"file", path}, {"keys", 12}, {"dry_run", true}});
struct LogField {
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  LogField(std::string_view k, bool v) : key(k), value(v ? "true" : "false") {}
  template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>) LogField(std::string_view k, T v)
      : key(k), value(std::to_string(v)) {}
  LogField(std::string_view k, std::chrono::nanoseconds v);
  LogField(std::string_view k, const Error& e) : key(k), value(e.message()) {}

  std::string_view key;
  std::string value;
};

// Formats one line without prefix or newline: `level=info msg="config loaded" file=/x keys=12`.
// Values with spaces, quotes, '=' or control characters are quoted with Go-style escapes.
std::string formatLogLine(LogLevel level, std::string_view message,
                          std::initializer_list<LogField> fields);

struct LogOptions {
  LogLevel level = LogLevel::kInfo;
  // Journal style (priority prefix, no timestamp). Default: detected from $JOURNAL_STREAM.
  bool journal = false;
  // Where finished lines go (with trailing newline). Default: stderr, one write(2) per line so
  // lines from several threads never interleave.
  std::function<void(std::string_view line)> sink;
  // Source of timestamps when not in journal style. Default: the system clock.
  const Clock* clock = nullptr;
};

// Process-wide logger configuration. Call once at start-up (agent/main.cc); thread-safe after.
void configureLogging(LogOptions options);
// True when stderr is the journal stream systemd set up for this service.
bool stderrIsJournal();
LogLevel currentLogLevel();
// The configuration in force (to change one field and keep the others, e.g. a test's sink).
LogOptions currentLogOptions();

void log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields = {});
inline void logDebug(std::string_view m, std::initializer_list<LogField> f = {}) {
  log(LogLevel::kDebug, m, f);
}
inline void logInfo(std::string_view m, std::initializer_list<LogField> f = {}) {
  log(LogLevel::kInfo, m, f);
}
inline void logWarn(std::string_view m, std::initializer_list<LogField> f = {}) {
  log(LogLevel::kWarn, m, f);
}
inline void logError(std::string_view m, std::initializer_list<LogField> f = {}) {
  log(LogLevel::kError, m, f);
}

}  // namespace ekco::base
