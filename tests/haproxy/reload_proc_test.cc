// Finding HAProxy masters and their workers in a fake process table (/proc): stat parsing,
// vanished entries, config paths relative to the working directory and through symlinks, file
// identity, SIGUSR2 handling. (reload_test.cc runs a real haproxy.)
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "haproxy/reload.h"
#include "tests/haproxy/reload_support.h"

namespace ekco::haproxy {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::masterPids;
using testing::replaceFile;
using ::testing::SizeIs;
using namespace std::chrono_literals;
using testing::TempDir;
using testing::writeFile;

// --- A fake process table ------------------------------------------------------------------------

struct FakeProcess {
  int pid = 0;
  std::string comm{};
  std::vector<std::string> argv{};
  int ppid = 1;
  std::uint64_t start_time = 1000;
  char state = 'S';
  fs::path root = "/";
  fs::path cwd = "/";
};

// <dir>/<pid>/{comm,cmdline,stat,root,cwd} as the kernel lays them out.
void addFakeProcess(const fs::path& proc, const FakeProcess& p) {
  fs::path dir = proc / std::to_string(p.pid);
  fs::create_directories(dir);
  writeFile(dir / "comm", p.comm + "\n");
  std::string cmdline;
  for (const std::string& arg : p.argv) cmdline += arg + '\0';
  writeFile(dir / "cmdline", cmdline);
  // Fields 5..21 are zeros here; field 22 is the start time.
  std::string stat =
      std::to_string(p.pid) + " (" + p.comm + ") " + p.state + " " + std::to_string(p.ppid);
  for (int field = 5; field <= 21; ++field) stat += " 0";
  stat += " " + std::to_string(p.start_time) + " 12345 67 0 0\n";
  writeFile(dir / "stat", stat);
  // SIGUSR2 not caught (yet): reloadHaproxy never signals a fake process, whose pid may be real.
  writeFile(dir / "status", "Name:\t" + p.comm +
                                "\nSigBlk:\t0000000000000000\n"
                                "SigIgn:\t0000000000001802\nSigCgt:\t0000000100702205\n");
  fs::create_directory_symlink(p.root, dir / "root");
  fs::create_directory_symlink(p.cwd, dir / "cwd");
}

class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    proc_ = tmp_.path() / "proc";
    fs::create_directories(proc_);
    config_ = tmp_.path() / "etc" / "haproxy" / "haproxy.cfg";
    other_ = tmp_.path() / "etc" / "haproxy" / "other.cfg";
    writeFile(config_, "global\n");
    writeFile(other_, "global\n");
    options_.proc_root = proc_.string();
  }

  void add(const FakeProcess& p) { addFakeProcess(proc_, p); }

  std::vector<HaproxyProcess> find() {
    auto found = findHaproxyMasters(config_.string(), options_);
    EXPECT_TRUE(found) << found.error().message();
    return found ? *found : std::vector<HaproxyProcess>{};
  }

  TempDir tmp_;
  fs::path proc_;
  fs::path config_;
  fs::path other_;
  ReloadOptions options_;
};

TEST_F(FakeProcTest, FindsTheMasterAndItsWorkers) {
  const std::string cfg = config_.string();
  add({.pid = 100,
       .comm = "haproxy",
       .argv = {"haproxy", "-W", "-db", "-f", cfg},
       .ppid = 90,
       .start_time = 500});
  add({.pid = 101,
       .comm = "haproxy",
       .argv = {"haproxy", "-W", "-db", "-f", cfg},
       .ppid = 100,
       .start_time = 510});
  // A worker after a reload: HAProxy 2.6 puts "-sf OLD -x sockpair@N" in front.
  add({.pid = 107,
       .comm = "haproxy",
       .argv = {"haproxy", "-sf", "101", "-x", "sockpair@3", "-W", "-db", "-f", cfg},
       .ppid = 100,
       .start_time = 620});
  // A HAProxy with another config, and its worker.
  add({.pid = 200, .comm = "haproxy", .argv = {"haproxy", "-W", "-f", other_.string()}});
  add({.pid = 201,
       .comm = "haproxy",
       .argv = {"haproxy", "-W", "-f", other_.string()},
       .ppid = 200});
  // Not a HAProxy, though it names the file.
  add({.pid = 300, .comm = "vi", .argv = {"vi", "-f", cfg}});
  // Another master re-executing for a reload (its command line empty for a moment): its worker
  // is not a master. (Here it never finishes: the scan retries for confirm_timeout.)
  options_.confirm_timeout = 100ms;
  add({.pid = 250, .comm = "haproxy", .argv = {}});
  add({.pid = 251, .comm = "haproxy", .argv = {"haproxy", "-W", "-f", cfg}, .ppid = 250});
  // Non-numeric entries are ignored.
  fs::create_directories(proc_ / "self");
  fs::create_directories(proc_ / "sys");

  std::vector<HaproxyProcess> masters = find();
  ASSERT_THAT(masters, SizeIs(1));
  EXPECT_EQ(masters[0].pid, 100);
  EXPECT_EQ(masters[0].start_time, 500u);
  EXPECT_THAT(masters[0].workers, ElementsAre(ProcessIdentity{.pid = 101, .start_time = 510},
                                              ProcessIdentity{.pid = 107, .start_time = 620}));
}

TEST_F(FakeProcTest, ParsesStatFromTheLastParenthesis) {
  // comm may contain ") (" and spaces; argv[0]'s basename identifies the HAProxy.
  const std::string cfg = config_.string();
  add({.pid = 400,
       .comm = "ha) (x 7 8",
       .argv = {"/usr/sbin/haproxy", "-f", cfg},
       .ppid = 3,
       .start_time = 4242});
  add({.pid = 401,
       .comm = "w) 400 (",
       .argv = {"/usr/sbin/haproxy", "-f", cfg},
       .ppid = 400,
       .start_time = 4343});

  std::vector<HaproxyProcess> masters = find();
  ASSERT_THAT(masters, SizeIs(1));
  EXPECT_EQ(masters[0].pid, 400);
  EXPECT_EQ(masters[0].start_time, 4242u);
  EXPECT_THAT(masters[0].workers, ElementsAre(ProcessIdentity{.pid = 401, .start_time = 4343}));
}

TEST_F(FakeProcTest, SkipsVanishedAndHalfReadableEntries) {
  const std::string cfg = config_.string();
  add({.pid = 100, .comm = "haproxy", .argv = {"haproxy", "-f", cfg}});
  // Exited between readdir and reading: an empty directory, one without cmdline, one without stat.
  fs::create_directories(proc_ / "500");
  fs::create_directories(proc_ / "501");
  writeFile(proc_ / "501" / "comm", "haproxy\n");
  add({.pid = 502, .comm = "haproxy", .argv = {"haproxy", "-f", cfg}, .ppid = 100});
  fs::remove(proc_ / "502" / "stat");
  // A zombie: comm but an empty cmdline, and a root that leads nowhere.
  add({.pid = 503, .comm = "haproxy", .argv = {}, .ppid = 100, .state = 'Z'});
  add({.pid = 504,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", cfg},
       .ppid = 100,
       .root = tmp_.path() / "gone"});
  // A stat file the parser cannot read.
  add({.pid = 505, .comm = "haproxy", .argv = {"haproxy", "-f", cfg}, .ppid = 100});
  writeFile(proc_ / "505" / "stat", "505 (haproxy S 100\n");

  std::vector<HaproxyProcess> masters = find();
  ASSERT_THAT(masters, SizeIs(1));
  EXPECT_EQ(masters[0].pid, 100);
  EXPECT_THAT(masters[0].workers, IsEmpty());
}

TEST_F(FakeProcTest, ResolvesRelativeConfigPathsAgainstTheWorkingDirectory) {
  add({.pid = 100,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", "etc/haproxy/haproxy.cfg"},
       .cwd = tmp_.path()});
  // -C DIR: relative files are read from DIR.
  add({.pid = 200,
       .comm = "haproxy",
       .argv = {"haproxy", "-C", "etc", "-f", "haproxy/haproxy.cfg"},
       .cwd = tmp_.path()});
  // Several -f, and files after "--".
  add({.pid = 300,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", other_.string(), "-f", config_.string()}});
  add({.pid = 400,
       .comm = "haproxy",
       .argv = {"haproxy", "-W", "--", other_.string(), "haproxy.cfg"},
       .cwd = config_.parent_path()});
  // The same relative name from another directory is another file.
  add({.pid = 500,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", "haproxy.cfg"},
       .cwd = tmp_.path()});

  EXPECT_THAT(masterPids(find()), ElementsAre(100, 200, 300, 400));
}

TEST_F(FakeProcTest, ResolvesAbsoluteSymlinksInsideTheProcessRoot) {
  // The container's /usr/local/etc/haproxy/haproxy.cfg is an absolute symlink: it must be
  // followed inside the container's root, not the agent's.
  fs::path rootfs = tmp_.path() / "rootfs";
  fs::path real = rootfs / "usr/local/etc/haproxy/real.cfg";
  writeFile(real, "global\n");
  fs::create_symlink("/usr/local/etc/haproxy/real.cfg",
                     rootfs / "usr/local/etc/haproxy/haproxy.cfg");
  add({.pid = 100,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"},
       .root = rootfs});

  auto found = findHaproxyMasters(real.string(), options_);
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_THAT(masterPids(*found), ElementsAre(100));
}

TEST_F(FakeProcTest, MatchesByFileIdentityNotByName) {
  // The same path string, but the file was replaced after the process started: still a match
  // (it is the file the process will read on reload). A hard link under another name matches too.
  const std::string cfg = config_.string();
  add({.pid = 100, .comm = "haproxy", .argv = {"haproxy", "-f", cfg}});
  replaceFile(config_, "global\n    maxconn 10\n");
  fs::path link = tmp_.path() / "link.cfg";
  fs::create_hard_link(config_, link);
  add({.pid = 200, .comm = "haproxy", .argv = {"haproxy", "-f", link.string()}});

  EXPECT_THAT(masterPids(find()), ElementsAre(100, 200));
}

TEST_F(FakeProcTest, NothingServesTheFileIsNotAnError) {
  add({.pid = 200, .comm = "haproxy", .argv = {"haproxy", "-f", other_.string()}});

  EXPECT_THAT(find(), IsEmpty());
  base::SystemClock clock;
  auto result = reloadHaproxy(config_.string(), clock, options_);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_THAT(result->masters, IsEmpty());
  EXPECT_FALSE(result->confirmed);
  EXPECT_EQ(result->detail, "no HAProxy process serves " + config_.string());
}

TEST_F(FakeProcTest, AMasterThatDoesNotCatchSigusr2IsNotSignalled) {
  // Pids near the kernel's maximum, in case the check failed and kill(2) ran anyway.
  add({.pid = 4194001,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", config_.string()},
       .start_time = 77});
  add({.pid = 4194002,
       .comm = "haproxy",
       .argv = {"haproxy", "-f", config_.string()},
       .ppid = 4194001,
       .start_time = 78});
  options_.confirm_timeout = 100ms;
  base::SystemClock clock;
  auto result = reloadHaproxy(config_.string(), clock, options_);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_THAT(result->masters, IsEmpty());
  EXPECT_THAT(result->not_ready, ElementsAre(4194001));
  EXPECT_FALSE(result->confirmed);
  EXPECT_EQ(result->detail,
            "master 4194001 was not ready for a reload within 100ms (starting, or re-executing "
            "for another reload): not signalled");

  // A master whose status is gone has exited: nothing to do.
  fs::remove(proc_ / "4194001" / "status");
  result = reloadHaproxy(config_.string(), clock, options_);
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_THAT(result->masters, IsEmpty());
  EXPECT_THAT(result->not_ready, IsEmpty());
  EXPECT_FALSE(result->confirmed);
  EXPECT_EQ(result->detail,
            "no HAProxy process serves " + config_.string() + " (its master exited)");
}

TEST_F(FakeProcTest, MissingConfigOrProcRootIsAnError) {
  fs::path missing = tmp_.path() / "nope.cfg";
  auto found = findHaproxyMasters(missing.string(), options_);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().code(), base::ErrorCode::kNotFound);
  EXPECT_EQ(found.error().message(),
            "HAProxy config " + missing.string() + ": No such file or directory");

  ReloadOptions bad = options_;
  bad.proc_root = (tmp_.path() / "noproc").string();
  found = findHaproxyMasters(config_.string(), bad);
  ASSERT_FALSE(found);
  EXPECT_THAT(found.error().message(), HasSubstr(bad.proc_root));
  EXPECT_EQ(found.error().message().find('\n'), std::string::npos);

  base::SystemClock clock;
  auto reloaded = reloadHaproxy(missing.string(), clock, options_);
  ASSERT_FALSE(reloaded);
  EXPECT_THAT(reloaded.error().message(), HasSubstr(missing.string()));
}

}  // namespace
}  // namespace ekco::haproxy
