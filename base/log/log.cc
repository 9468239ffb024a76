#include "base/log/log.h"

#include <charconv>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "base/clock.h"
#include "base/duration.h"
#include "base/strings.h"

namespace ekco::base {
namespace {

struct LoggerState {
  std::mutex mu;
  LogOptions options;
};

LoggerState& state() {
  static LoggerState* s = [] {
    auto* st = new LoggerState();  // never destroyed: logging may happen during exit
    st->options.journal = stderrIsJournal();
    return st;
  }();
  return *s;
}

const Clock& systemClock() {
  static const SystemClock clock;
  return clock;
}

bool needsQuoting(std::string_view v) {
  if (v.empty()) return true;
  return std::any_of(v.begin(), v.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= ' ' || c == '"' || c == '=' || c == '\\' || u == 0x7f;
  });
}

void appendValue(std::string& out, std::string_view v) {
  if (!needsQuoting(v)) {
    out += v;
    return;
  }
  out += '"';
  appendEscaped(out, v);
  out += '"';
}

int syslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 7;
    case LogLevel::kInfo:
      return 6;
    case LogLevel::kWarn:
      return 4;
    case LogLevel::kError:
      return 3;
  }
  return 6;
}

std::string timestamp(WallTime t) {
  auto secs = std::chrono::time_point_cast<std::chrono::seconds>(t);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
  std::time_t tt = std::chrono::system_clock::to_time_t(secs);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

void writeStderr(std::string_view line) {
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report a failing stderr
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

LogField::LogField(std::string_view k, std::chrono::nanoseconds v)
    : key(k), value(formatDuration(v)) {}

Result<LogLevel> parseLogLevel(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warn" || lower == "warning") return LogLevel::kWarn;
  if (lower == "error") return LogLevel::kError;
  return Error(
      fmt::format("invalid log level {} (want debug, info, warn or error)", quoteForMessage(text)),
      ErrorCode::kInvalidArgument);
}

std::string_view logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string formatLogLine(LogLevel level, std::string_view message,
                          std::initializer_list<LogField> fields) {
  std::string out;
  out.reserve(64 + message.size() + fields.size() * 24);
  out += "level=";
  out += logLevelName(level);
  out += " msg=";
  appendValue(out, message);
  for (const LogField& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    appendValue(out, f.value);
  }
  return out;
}

bool stderrIsJournal() {
  // systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected stdout/stderr to.
  const char* js = std::getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  unsigned long long dev = 0;
  unsigned long long ino = 0;
  const std::string_view text(js);
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const auto parsed_dev = std::from_chars(text.data(), text.data() + colon, dev);
  const auto parsed_ino = std::from_chars(text.data() + colon + 1, text.data() + text.size(), ino);
  if (parsed_dev.ec != std::errc() || parsed_dev.ptr != text.data() + colon ||
      parsed_ino.ec != std::errc() || parsed_ino.ptr != text.data() + text.size()) {
    return false;
  }
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return static_cast<unsigned long long>(st.st_dev) == dev &&
         static_cast<unsigned long long>(st.st_ino) == ino;
}

void configureLogging(LogOptions options) {
  LoggerState& s = state();
  std::lock_guard lock(s.mu);
  s.options = std::move(options);
}

LogOptions currentLogOptions() {
  LoggerState& s = state();
  std::lock_guard lock(s.mu);
  return s.options;
}

LogLevel currentLogLevel() {
  LoggerState& s = state();
  std::lock_guard lock(s.mu);
  return s.options.level;
}

void log(LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  LoggerState& s = state();
  std::unique_lock lock(s.mu);
  if (level < s.options.level) return;
  std::string line;
  if (s.options.journal) {
    line = fmt::format("<{}>", syslogPriority(level));
  } else {
    const Clock& clock = s.options.clock != nullptr ? *s.options.clock : systemClock();
    line = "time=" + timestamp(clock.wallNow()) + " ";
  }
  line += formatLogLine(level, message, fields);
  line += '\n';
  if (s.options.sink) {
    s.options.sink(line);
  } else {
    writeStderr(line);
  }
}

}  // namespace ekco::base
