#include "units/calendar.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace ekco::units {
namespace {

using std::chrono::system_clock;
using TimePoint = system_clock::time_point;

TimePoint at(int64_t unix_seconds) { return TimePoint(std::chrono::seconds(unix_seconds)); }

// "YYYY-MM-DD HH:MM:SS" in UTC, whole seconds (as systemd-analyze prints).
std::string utcString(TimePoint t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto days = std::chrono::floor<std::chrono::days>(secs);
  const std::chrono::year_month_day ymd(days);
  const std::chrono::hh_mm_ss hms(secs - days);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u %02d:%02d:%02d", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                static_cast<int>(hms.seconds().count()));
  return buf;
}

std::vector<std::string> elapses(const CalendarSpec& spec, TimePoint base, int n) {
  std::vector<std::string> out;
  TimePoint t = base;
  for (int i = 0; i < n; ++i) {
    const auto next = spec.nextElapse(t);
    if (!next) break;
    out.push_back(utcString(*next));
    t = *next;
  }
  return out;
}

bool haveZone(const char* name) {
  struct stat st {};
  return ::stat((std::string("/usr/share/zoneinfo/") + name).c_str(), &st) == 0;
}

// ---------------------------------------------------------------------------------------------
// Table-driven, no systemd needed. Base time: Tue 2023-11-14 22:13:20 UTC.

constexpr int64_t kBase = 1'700'000'000;

struct Case {
  std::string_view spec;
  std::string_view normalized;
  std::vector<std::string> next;  // UTC
};

TEST(ParseCalendar, NormalisesAndSchedulesLikeSystemd) {
  // Expected values from systemd-analyze 252: calendar --base-time=@1700000000 --iterations=3.
  const std::vector<Case> cases = {
      {"Sat 17:30",
       "Sat *-*-* 17:30:00",
       {"2023-11-18 17:30:00", "2023-11-25 17:30:00", "2023-12-02 17:30:00"}},
      {"Mon..Fri 22:00",
       "Mon..Fri *-*-* 22:00:00",
       {"2023-11-15 22:00:00", "2023-11-16 22:00:00", "2023-11-17 22:00:00"}},
      {"*-*-* 00/6:00",
       "*-*-* 00/6:00:00",
       {"2023-11-15 00:00:00", "2023-11-15 06:00:00", "2023-11-15 12:00:00"}},
      {"*-02~1",
       "*-02~01 00:00:00",
       {"2024-02-29 00:00:00", "2025-02-28 00:00:00", "2026-02-28 00:00:00"}},
      {"2026-11-22 12:00 UTC", "2026-11-22 12:00:00 UTC", {"2026-11-22 12:00:00"}},
      {"Sun *-*-1..7 03:00",
       "Sun *-*-01..07 03:00:00",
       {"2023-12-03 03:00:00", "2024-01-07 03:00:00", "2024-02-04 03:00:00"}},
      {"quarterly",
       "*-01,04,07,10-01 00:00:00",
       {"2024-01-01 00:00:00", "2024-04-01 00:00:00", "2024-07-01 00:00:00"}},
      {"hourly",
       "*-*-* *:00:00",
       {"2023-11-14 23:00:00", "2023-11-15 00:00:00", "2023-11-15 01:00:00"}},
      {"Sat,Sun 8:00",
       "Sat,Sun *-*-* 08:00:00",
       {"2023-11-18 08:00:00", "2023-11-19 08:00:00", "2023-11-25 08:00:00"}},
      {"*:0/15",
       "*-*-* *:00/15:00",
       {"2023-11-14 22:15:00", "2023-11-14 22:30:00", "2023-11-14 22:45:00"}},
      {"weekly",
       "Mon *-*-* 00:00:00",
       {"2023-11-20 00:00:00", "2023-11-27 00:00:00", "2023-12-04 00:00:00"}},
      {"semiannually",
       "*-01,07-01 00:00:00",
       {"2024-01-01 00:00:00", "2024-07-01 00:00:00", "2025-01-01 00:00:00"}},
      {"Mon,Tue,Wed,Fri",
       "Mon..Wed,Fri *-*-* 00:00:00",
       {"2023-11-15 00:00:00", "2023-11-17 00:00:00", "2023-11-20 00:00:00"}},
      {"05:40:23.4200004",
       "*-*-* 05:40:23.420000",
       {"2023-11-15 05:40:23", "2023-11-16 05:40:23", "2023-11-17 05:40:23"}},
      {"20..25-01-01", "2020..2025-01-01 00:00:00", {"2024-01-01 00:00:00", "2025-01-01 00:00:00"}},
      {"*-02-30", "*-02-30 00:00:00", {}},
      {"@1700000000", "2023-11-14 22:13:20 UTC", {}},
      {"@1800000000", "2027-01-15 08:00:00 UTC", {"2027-01-15 08:00:00"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    auto spec = parseCalendar(c.spec);
    ASSERT_TRUE(spec) << spec.error().message();
    EXPECT_EQ(spec->normalized(), c.normalized);
    EXPECT_EQ(elapses(*spec, at(kBase), 3), c.next);
  }
}

TEST(ParseCalendar, RejectsWhatSystemdRejectsWithAReason) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"Sat 25:00", "hour 25 out of range 0..23"},
      {"Foo 17:30", "unknown weekday or keyword \"Foo\""},
      {"*-13-01", "month 13 out of range 1..12"},
      {"17:61", "minute 61 out of range 0..59"},
      {"", "empty"},
      {"   ", "expected a number"},
      {"Sat 17:30 Mars/Olympus", "unknown time zone \"Mars/Olympus\""},
      {"1..5", "expected ':' after the hour"},
      {"*-02-~1", "expected a number or '*'"},
      {"Fri..Mon", "weekday range Fri..Mon goes backwards"},
      {"*:0/0", "repetition /0"},
      {"*:0/60", "minute repetition /60 too large"},
      {"2200-01-01", "year 2200 out of range 1970..2199"},
      {"*-02~29", "day from the end of the month 29 out of range 1..28"},
      {"Sat 17:30 ", "unexpected"},
      {" Sat 17:30", "expected a number"},
      {"@7258118400", "timestamp outside 1970..2199"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    auto spec = parseCalendar(text);
    ASSERT_FALSE(spec) << spec->normalized();
    EXPECT_EQ(spec.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_NE(spec.error().message().find(why), std::string::npos) << spec.error().message();
    EXPECT_EQ(spec.error().message().rfind("invalid calendar event \"", 0), 0u)
        << spec.error().message();
  }
}

TEST(ParseCalendar, EscapesControlCharactersInErrors) {
  auto spec = parseCalendar("Sat\n17:30");
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().message().rfind("invalid calendar event \"Sat\\n17:30\": ", 0), 0u)
      << spec.error().message();
  EXPECT_EQ(spec.error().message().find('\n'), std::string::npos);
}

TEST(ParseCalendar, NextElapseIsStrictlyAfterAndMicrosecondPrecise) {
  auto spec = parseCalendar("*:*:0/0.5");
  ASSERT_TRUE(spec);
  const auto next = spec->nextElapse(at(kBase));
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, at(kBase) + std::chrono::milliseconds(500));
  EXPECT_EQ(spec->nextElapse(*next), at(kBase + 1));
}

TEST(ParseCalendar, HonoursANamedZoneAcrossDaylightSaving) {
  if (!haveZone("Europe/Berlin")) GTEST_SKIP() << "no /usr/share/zoneinfo/Europe/Berlin (tzdata)";
  auto spec = parseCalendar("Sat 17:30 Europe/Berlin");
  ASSERT_TRUE(spec) << spec.error().message();
  EXPECT_EQ(spec->normalized(), "Sat *-*-* 17:30:00 Europe/Berlin");
  EXPECT_EQ(spec->timezone(), "Europe/Berlin");
  // CEST (UTC+2) until 2024-10-27, CET (UTC+1) after.
  EXPECT_EQ(elapses(*spec, at(1'729'500'000), 2),
            (std::vector<std::string>{"2024-10-26 15:30:00", "2024-11-02 16:30:00"}));
  // 02:30 does not exist on 2024-03-31: systemd skips that day.
  auto gap = parseCalendar("*-*-* 02:30 Europe/Berlin");
  ASSERT_TRUE(gap);
  EXPECT_EQ(elapses(*gap, at(1'711'800'000), 2),
            (std::vector<std::string>{"2024-04-01 00:30:00", "2024-04-02 00:30:00"}));
}

TEST(ParseCalendar, LooksZonesUpInTheConfiguredDirectory) {
  std::string empty_dir = ::testing::TempDir() + "calendar_zoneinfo_XXXXXX";
  ASSERT_NE(::mkdtemp(empty_dir.data()), nullptr);
  auto spec = parseCalendar("Sat 17:30 Europe/Berlin", {.zoneinfo_dir = empty_dir});
  ASSERT_FALSE(spec);
  EXPECT_NE(spec.error().message().find("unknown time zone"), std::string::npos);
  // " UTC" needs no zone file.
  EXPECT_TRUE(parseCalendar("Sat 17:30 UTC", {.zoneinfo_dir = empty_dir}));
  ::rmdir(empty_dir.c_str());
}

// ---------------------------------------------------------------------------------------------
// Differential: every spec of tests/testdata/calendar/corpus.txt against systemd-analyze.

struct CorpusEntry {
  std::string spec;
  int64_t base = kBase;
  int line = 0;
};

std::vector<CorpusEntry> readCorpus(const std::string& path) {
  std::ifstream in(path);
  std::vector<CorpusEntry> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    EXPECT_EQ(line[0], '"') << path << ":" << n;
    CorpusEntry e;
    e.line = n;
    size_t i = 1;
    for (; i < line.size() && line[i] != '"'; ++i) {
      if (line[i] == '\\' && i + 1 < line.size()) {
        const char c = line[++i];
        e.spec += c == 't' ? '\t' : c == 'n' ? '\n' : c;
      } else {
        e.spec += line[i];
      }
    }
    const size_t base = line.find(" @", i);
    if (base != std::string::npos) e.base = std::stoll(line.substr(base + 2));
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<std::string> findOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

// A child with its stdout and stderr on pipes; no shell involved.
struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

struct ChildResult {
  int status = -1;
  std::string out;
  std::string err;
};

Child spawn(const std::string& exe, const std::vector<std::string>& args) {
  int out[2];
  int err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The host zone is UTC for systemd as it is for parseCalendar (see units/calendar.h).
  const char* envp[] = {"TZ=UTC", "LC_ALL=C", "SYSTEMD_COLORS=0", "SYSTEMD_PAGER=cat", nullptr};
  Child child;
  if (posix_spawn(&child.pid, exe.c_str(), &actions, nullptr, argv.data(),
                  const_cast<char* const*>(envp)) != 0) {
    child.pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  child.out = out[0];
  child.err = err[0];
  return child;
}

ChildResult finish(Child& child) {
  ChildResult r;
  pollfd fds[2] = {{.fd = child.out, .events = POLLIN, .revents = 0},
                   {.fd = child.err, .events = POLLIN, .revents = 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds, 2, 10'000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const pollfd& p : fds) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (child.pid > 0) ::waitpid(child.pid, &r.status, 0);
  return r;
}

// What systemd said about one spec.
struct Verdict {
  bool valid = false;
  std::string normalized;
  std::vector<std::string> next;  // UTC, "YYYY-MM-DD HH:MM:SS"
};

bool gaveUp(const ChildResult& r) {
  return r.err.find("Failed to determine next elapse") != std::string::npos;
}

// Reads lines like "Normalized form: Sat *-*-* 17:30:00", "    Next elapse: Sat 2024-01-06
// 17:30:00 UTC" and "       Iter. #2: ..." (TZ=UTC, so these are already in UTC).
Verdict readVerdict(const ChildResult& r) {
  Verdict v;
  if (r.err.find("Failed to parse calendar specification") != std::string::npos) return v;
  v.valid = true;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string label = line.substr(line.find_first_not_of(' '));
    const std::string value = line.substr(colon + 2);
    if (label.rfind("Normalized form:", 0) == 0) {
      v.normalized = value;
    } else if ((label.rfind("Next elapse:", 0) == 0 || label.rfind("Iter. #", 0) == 0) &&
               value != "never" && value.size() >= 23) {
      v.next.push_back(value.substr(4, 19));  // drop the weekday and " UTC"
    }
  }
  return v;
}

constexpr int kIterations = 5;

Child askSystemd(const std::string& analyze, const CorpusEntry& e, int iterations) {
  return spawn(analyze, {"calendar", "--no-pager", "--iterations=" + std::to_string(iterations),
                         "--base-time=@" + std::to_string(e.base), "--", e.spec});
}

TEST(CalendarDifferential, MatchesSystemdAnalyzeOnTheCorpus) {
  const auto analyze = findOnPath("systemd-analyze");
  if (!analyze) GTEST_SKIP() << "systemd-analyze not found on PATH: cannot compare with systemd";

  const auto corpus = readCorpus(std::string(EKCO_TESTDATA_DIR) + "/calendar/corpus.txt");
  ASSERT_GE(corpus.size(), 150u);

  // systemd-analyze takes ~20 ms a call; run a few at a time.
  constexpr size_t kParallel = 8;
  std::vector<ChildResult> results(corpus.size());
  for (size_t first = 0; first < corpus.size(); first += kParallel) {
    std::vector<Child> batch;
    for (size_t i = first; i < std::min(corpus.size(), first + kParallel); ++i) {
      batch.push_back(askSystemd(*analyze, corpus[i], kIterations));
    }
    for (size_t j = 0; j < batch.size(); ++j) results[first + j] = finish(batch[j]);
  }

  int valid = 0;
  int gave_up = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const CorpusEntry& e = corpus[i];
    // When systemd gives up on an elapse ("Infinite loop in calendar calculation") it prints
    // nothing for the spec; ask for fewer until it answers (0 = the normal form only). Its
    // timer would stop there, and nextElapse() must return nullopt at the same point.
    ChildResult& r = results[i];
    int asked = kIterations;
    if (gaveUp(r)) ++gave_up;
    while (gaveUp(r) && asked > 0) {
      Child retry = askSystemd(*analyze, e, --asked);
      r = finish(retry);
    }
    SCOPED_TRACE(::testing::Message() << "corpus.txt:" << e.line << " [" << e.spec << "] base @"
                                      << e.base << " iterations=" << asked << "\nsystemd stdout:\n"
                                      << r.out << "systemd stderr:\n"
                                      << r.err);
    ASSERT_GE(r.status, 0) << "could not run " << *analyze;
    ASSERT_FALSE(gaveUp(r));
    const Verdict want = readVerdict(r);
    auto got = parseCalendar(e.spec);
    ASSERT_EQ(got.has_value(), want.valid) << (got ? got->normalized() : got.error().message());
    if (!want.valid) continue;
    ++valid;
    EXPECT_EQ(got->normalized(), want.normalized);
    EXPECT_EQ(elapses(*got, at(e.base), kIterations), want.next);
  }
  // All three kinds are exercised.
  EXPECT_GT(valid, 100);
  EXPECT_GT(static_cast<int>(corpus.size()) - valid, 50);
  EXPECT_GT(gave_up, 0);
}

}  // namespace
}  // namespace ekco::units
