#include "haproxy/reload.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/unique_fd.h"
#include "haproxy/render.h"

extern char** environ;

namespace ekco::haproxy {

void PrintTo(const ProcessIdentity& p, std::ostream* os) {
  *os << "{pid " << p.pid << ", start " << p.start_time << "}";
}

namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using namespace std::chrono_literals;

constexpr const char* kHaproxyBinary = "/usr/sbin/haproxy";
// Generous: the tests run on loaded 2-core machines.
constexpr auto kWait = 10s;

#define SKIP_WITHOUT_HAPROXY()                                               \
  do {                                                                       \
    if (!fs::exists(kHaproxyBinary)) {                                       \
      GTEST_SKIP() << kHaproxyBinary << " is not installed (scripts/setup)"; \
    }                                                                        \
  } while (false)

// A fresh directory under the test temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::path(::testing::TempDir()) /
            ("ekco-reload-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void writeFile(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  ASSERT_TRUE(out.good()) << path;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// As the agent writes: a temp file renamed over the target, so the inode changes.
void replaceFile(const fs::path& path, const std::string& content) {
  fs::path tmp = path;
  tmp += ".tmp";
  writeFile(tmp, content);
  fs::rename(tmp, path);
}

ino_t inodeOf(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

std::vector<int> masterPids(const std::vector<HaproxyProcess>& masters) {
  std::vector<int> out;
  for (const HaproxyProcess& m : masters) out.push_back(m.pid);
  return out;
}

std::vector<int> workerPids(const HaproxyProcess& master) {
  std::vector<int> out;
  for (const ProcessIdentity& w : master.workers) out.push_back(w.pid);
  return out;
}

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

// --- Real HAProxy --------------------------------------------------------------------------------

base::UniqueFd tcpSocket() {
  return base::UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
}

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

std::uint16_t portOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  return ntohs(addr.sin_port);
}

// A port nothing listens on right now (for HAProxy's frontend).
std::uint16_t freePort() {
  base::UniqueFd fd = tcpSocket();
  sockaddr_in addr = loopback(0);
  EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return portOf(fd.get());
}

// A plain TCP listener on 127.0.0.1 standing in for a kube-apiserver.
struct Listener {
  base::UniqueFd fd{};
  std::uint16_t port = 0;
};

Listener listenLoopback() {
  Listener l{.fd = tcpSocket()};
  sockaddr_in addr = loopback(0);
  EXPECT_EQ(::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(l.fd.get(), 64), 0);
  l.port = portOf(l.fd.get());
  return l;
}

bool waitReadable(int fd, std::chrono::milliseconds timeout) {
  pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1;
}

// The next connection HAProxy makes to the listener, or an invalid fd after `timeout`.
base::UniqueFd acceptWithin(const Listener& l, std::chrono::milliseconds timeout = kWait) {
  if (!waitReadable(l.fd.get(), timeout)) return {};
  return base::UniqueFd(::accept4(l.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
}

base::UniqueFd connectTo(std::uint16_t port) {
  base::UniqueFd fd = tcpSocket();
  sockaddr_in addr = loopback(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return {};
  return fd;
}

bool sendAll(int fd, const std::string& data) {
  return ::send(fd, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
}

// Reads exactly `n` bytes, or what arrived before EOF, an error or the timeout.
std::string readExactly(int fd, std::size_t n, std::chrono::milliseconds timeout = kWait) {
  std::string out;
  base::SystemClock clock;
  const auto deadline = clock.monoNow() + timeout;
  while (out.size() < n) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock.monoNow());
    if (left <= 0ms || !waitReadable(fd, left)) break;
    char buf[256];
    ssize_t got = ::recv(fd, buf, std::min(sizeof buf, n - out.size()), 0);
    if (got <= 0) break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  return out;
}

// The rendered config, minus the servers' health checks: the test's backends are plain TCP
// listeners, so `check-ssl` checks would fail and `on-marked-down shutdown-sessions` would then cut
// the very connection the test keeps open (and a down server takes no new ones). Checks are not
// what these tests are about.
std::string testConfig(std::uint16_t bind_port, const std::vector<std::uint16_t>& backend_ports) {
  HaproxyConfigOptions options;
  options.bind = "127.0.0.1:" + std::to_string(bind_port);
  for (std::uint16_t port : backend_ports) options.endpoints.push_back({"127.0.0.1", port});
  auto rendered = renderHaproxyConfig(options);
  EXPECT_TRUE(rendered) << rendered.error().message();
  if (!rendered) return {};
  std::istringstream in(*rendered);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("    server ")) line = line.substr(0, line.find(" check"));
    out += line + "\n";
  }
  return out;
}

// `haproxy -W -db -f CONFIG` as a child in its own process group, output to a log file. The
// destructor kills the whole group (master and workers, old ones included) and reaps the master,
// whatever happened in the test.
class HaproxyChild {
 public:
  HaproxyChild(const std::string& config_arg, const fs::path& log, const fs::path& cwd = {}) {
    log_ = log;
    // Workers outlive a killed master for a moment; as a subreaper this process inherits and
    // reaps them instead of leaving them to init.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    std::vector<std::string> args = {kHaproxyBinary, "-W", "-db", "-f", config_arg};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
    int rc = ::posix_spawn(&pid_, kHaproxyBinary, &actions, &attr, argv.data(), environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = 0;
    EXPECT_EQ(rc, 0) << "posix_spawn " << kHaproxyBinary;
  }
  ~HaproxyChild() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);  // the group: the master and every worker
    // Reap them all: the master, and the workers that this process (a subreaper) inherits.
    for (int i = 0; i < 500; ++i) {
      int status = 0;
      pid_t reaped = ::waitpid(-pid_, &status, WNOHANG);
      if (reaped < 0) break;  // ECHILD: nothing of the group is left
      if (reaped == 0) std::this_thread::sleep_for(10ms);
    }
  }
  HaproxyChild(const HaproxyChild&) = delete;
  HaproxyChild& operator=(const HaproxyChild&) = delete;

  int pid() const { return pid_; }
  std::string log() const { return readFile(log_); }
  // Whether the master is still running (not exited, not a zombie).
  bool alive() const {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

 private:
  pid_t pid_ = 0;
  fs::path log_;
};

ReloadOptions testOptions() {
  ReloadOptions options;
  options.confirm_timeout = 5s;
  options.poll_interval = 20ms;
  return options;
}

// Waits until findHaproxyMasters finds `master` with at least `min_workers` workers.
std::optional<HaproxyProcess> waitForMaster(const fs::path& config, int master,
                                            std::size_t min_workers = 1) {
  base::SystemClock clock;
  const auto deadline = clock.monoNow() + kWait;
  while (clock.monoNow() < deadline) {
    auto found = findHaproxyMasters(config.string(), testOptions());
    if (!found) {
      ADD_FAILURE() << found.error().message();
      return std::nullopt;
    }
    for (const HaproxyProcess& m : *found) {
      if (m.pid == master && m.workers.size() >= min_workers) return m;
    }
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

class RealHaproxyTest : public ::testing::Test {
 protected:
  void SetUp() override { SKIP_WITHOUT_HAPROXY(); }

  TempDir tmp_;
  base::SystemClock clock_;
};

TEST_F(RealHaproxyTest, ReloadStartsANewWorkerAndKeepsEstablishedConnections) {
  Listener first = listenLoopback();
  Listener second = listenLoopback();
  const std::uint16_t frontend = freePort();
  const fs::path config = tmp_.path() / "haproxy.cfg";
  writeFile(config, testConfig(frontend, {first.port}));

  HaproxyChild haproxy(config.string(), tmp_.path() / "haproxy.log");
  ASSERT_GT(haproxy.pid(), 0);
  std::optional<HaproxyProcess> before = waitForMaster(config, haproxy.pid());
  ASSERT_TRUE(before) << "no HAProxy master with a worker within 10s\n" << haproxy.log();

  // A connection through the frontend to the first backend.
  base::UniqueFd client = connectTo(frontend);
  ASSERT_TRUE(client.valid()) << haproxy.log();
  base::UniqueFd backend = acceptWithin(first);
  ASSERT_TRUE(backend.valid()) << "the connection never reached the backend\n" << haproxy.log();
  ASSERT_TRUE(sendAll(client.get(), "before"));
  ASSERT_EQ(readExactly(backend.get(), 6), "before");

  // The agent's write: a new inode with another endpoint set.
  const ino_t old_inode = inodeOf(config);
  replaceFile(config, testConfig(frontend, {second.port}));
  ASSERT_NE(inodeOf(config), old_inode);

  auto result = reloadHaproxy(config.string(), clock_, testOptions());
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_TRUE(result->confirmed) << result->detail << "\n" << haproxy.log();
  EXPECT_THAT(result->masters, ElementsAre(haproxy.pid()));
  EXPECT_THAT(result->detail,
              HasSubstr("reloaded master " + std::to_string(haproxy.pid()) + " (new worker "));

  auto after = findHaproxyMasters(config.string(), testOptions());
  ASSERT_TRUE(after) << after.error().message();
  ASSERT_THAT(*after, SizeIs(1));
  EXPECT_EQ((*after)[0].pid, before->pid);
  EXPECT_EQ((*after)[0].start_time, before->start_time);
  bool has_new_worker = std::any_of(
      (*after)[0].workers.begin(), (*after)[0].workers.end(), [&](const ProcessIdentity& w) {
        return std::find(before->workers.begin(), before->workers.end(), w) ==
               before->workers.end();
      });
  EXPECT_TRUE(has_new_worker) << ::testing::PrintToString(workerPids((*after)[0]));

  // The established connection survived the reload, both ways.
  ASSERT_TRUE(sendAll(client.get(), "after"));
  EXPECT_EQ(readExactly(backend.get(), 5), "after") << haproxy.log();
  ASSERT_TRUE(sendAll(backend.get(), "reply"));
  EXPECT_EQ(readExactly(client.get(), 5), "reply") << haproxy.log();

  // New connections follow the new config.
  base::UniqueFd client2 = connectTo(frontend);
  ASSERT_TRUE(client2.valid());
  base::UniqueFd backend2 = acceptWithin(second);
  EXPECT_TRUE(backend2.valid()) << "a new connection did not reach the new backend\n"
                                << haproxy.log();
  EXPECT_TRUE(haproxy.alive());
}

TEST_F(RealHaproxyTest, RejectedConfigIsNotConfirmedAndTheOldWorkerKeepsServing) {
  Listener backend = listenLoopback();
  const std::uint16_t frontend = freePort();
  const fs::path config = tmp_.path() / "haproxy.cfg";
  const std::string good = testConfig(frontend, {backend.port});
  writeFile(config, good);

  HaproxyChild haproxy(config.string(), tmp_.path() / "haproxy.log");
  ASSERT_GT(haproxy.pid(), 0);
  std::optional<HaproxyProcess> before = waitForMaster(config, haproxy.pid());
  ASSERT_TRUE(before) << "no HAProxy master with a worker within 10s\n" << haproxy.log();

  replaceFile(config, "this is not a haproxy config\n");
  ReloadOptions options = testOptions();
  options.confirm_timeout = 1500ms;
  const auto start = clock_.monoNow();
  auto result = reloadHaproxy(config.string(), clock_, options);
  const auto took = clock_.monoNow() - start;
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_FALSE(result->confirmed) << result->detail;
  EXPECT_THAT(result->masters, ElementsAre(haproxy.pid()));
  EXPECT_EQ(result->detail, "master " + std::to_string(haproxy.pid()) +
                                " started no new worker within 1.5s: the new config was probably "
                                "rejected, the old worker keeps serving");
  EXPECT_GE(took, 1500ms);
  EXPECT_LT(took, 1500ms + kWait);

  // The master is alive and the old worker still serves.
  EXPECT_TRUE(haproxy.alive());
  auto after = findHaproxyMasters(config.string(), testOptions());
  ASSERT_TRUE(after) << after.error().message();
  ASSERT_THAT(*after, SizeIs(1));
  EXPECT_EQ((*after)[0].pid, haproxy.pid());
  EXPECT_EQ((*after)[0].workers, before->workers);
  {
    base::UniqueFd client = connectTo(frontend);
    ASSERT_TRUE(client.valid());
    EXPECT_TRUE(acceptWithin(backend).valid()) << haproxy.log();
  }
  EXPECT_THAT(haproxy.log(), HasSubstr("Loading failure"));

  // The next good config reloads normally.
  replaceFile(config, good);
  result = reloadHaproxy(config.string(), clock_, testOptions());
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_TRUE(result->confirmed) << result->detail << "\n" << haproxy.log();
}

TEST_F(RealHaproxyTest, ReloadRightAfterStartWaitsForTheMaster) {
  // HAProxy 2.6 dies of a SIGUSR2 that arrives before its master set up signals, and ignores one
  // that arrives while it re-executes after forking its first worker. Signal it at once, a few
  // times over.
  Listener backend = listenLoopback();
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    TempDir dir;
    const fs::path config = dir.path() / "haproxy.cfg";
    const std::uint16_t frontend = freePort();
    writeFile(config, testConfig(frontend, {backend.port}));
    HaproxyChild haproxy(config.string(), dir.path() / "haproxy.log");
    ASSERT_GT(haproxy.pid(), 0);
    // Right after execve its command line is empty for a moment: wait until it can be found.
    ASSERT_TRUE(waitForMaster(config, haproxy.pid(), /*min_workers=*/0)) << haproxy.log();

    auto result = reloadHaproxy(config.string(), clock_, testOptions());
    ASSERT_TRUE(result) << result.error().message();
    EXPECT_TRUE(result->confirmed) << result->detail << "\n" << haproxy.log();
    EXPECT_THAT(result->masters, ElementsAre(haproxy.pid()));
    EXPECT_TRUE(haproxy.alive()) << haproxy.log();

    // And at once again, while it re-executes for the first reload.
    result = reloadHaproxy(config.string(), clock_, testOptions());
    ASSERT_TRUE(result) << result.error().message();
    EXPECT_TRUE(result->confirmed) << result->detail << "\n" << haproxy.log();
    EXPECT_TRUE(haproxy.alive()) << haproxy.log();
  }
}

TEST_F(RealHaproxyTest, NoProcessServesAnUnrelatedFile) {
  Listener backend = listenLoopback();
  const fs::path config = tmp_.path() / "haproxy.cfg";
  writeFile(config, testConfig(freePort(), {backend.port}));
  HaproxyChild haproxy(config.string(), tmp_.path() / "haproxy.log");
  ASSERT_GT(haproxy.pid(), 0);
  ASSERT_TRUE(waitForMaster(config, haproxy.pid())) << haproxy.log();

  // Same content, another file.
  const fs::path unrelated = tmp_.path() / "copy.cfg";
  writeFile(unrelated, readFile(config));
  auto found = findHaproxyMasters(unrelated.string(), testOptions());
  ASSERT_TRUE(found) << found.error().message();
  EXPECT_THAT(*found, IsEmpty());
  auto result = reloadHaproxy(unrelated.string(), clock_, testOptions());
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_THAT(result->masters, IsEmpty());
  EXPECT_FALSE(result->confirmed);
  EXPECT_EQ(result->detail, "no HAProxy process serves " + unrelated.string());
}

TEST_F(RealHaproxyTest, OnlyTheMasterOfThisConfigIsSignalled) {
  Listener backend = listenLoopback();
  const fs::path dir_a = tmp_.path() / "a";
  const fs::path dir_b = tmp_.path() / "b";
  const fs::path config_a = dir_a / "haproxy.cfg";
  const fs::path config_b = dir_b / "haproxy.cfg";
  writeFile(config_a, testConfig(freePort(), {backend.port}));
  writeFile(config_b, testConfig(freePort(), {backend.port}));

  HaproxyChild a(config_a.string(), tmp_.path() / "a.log");
  // B reads its config by a relative path from its working directory.
  HaproxyChild b("haproxy.cfg", tmp_.path() / "b.log", dir_b);
  ASSERT_GT(a.pid(), 0);
  ASSERT_GT(b.pid(), 0);
  std::optional<HaproxyProcess> a_before = waitForMaster(config_a, a.pid());
  std::optional<HaproxyProcess> b_before = waitForMaster(config_b, b.pid());
  ASSERT_TRUE(a_before) << a.log();
  ASSERT_TRUE(b_before) << b.log();

  auto found_a = findHaproxyMasters(config_a.string(), testOptions());
  ASSERT_TRUE(found_a);
  EXPECT_THAT(masterPids(*found_a), ElementsAre(a.pid()));
  auto found_b = findHaproxyMasters(config_b.string(), testOptions());
  ASSERT_TRUE(found_b);
  EXPECT_THAT(masterPids(*found_b), ElementsAre(b.pid()));

  auto result = reloadHaproxy(config_a.string(), clock_, testOptions());
  ASSERT_TRUE(result) << result.error().message();
  EXPECT_TRUE(result->confirmed) << result->detail << "\n" << a.log();
  EXPECT_THAT(result->masters, ElementsAre(a.pid()));

  // B was left alone: same workers, no reload in its log.
  auto b_after = findHaproxyMasters(config_b.string(), testOptions());
  ASSERT_TRUE(b_after);
  ASSERT_THAT(*b_after, SizeIs(1));
  EXPECT_EQ((*b_after)[0].workers, b_before->workers);
  EXPECT_THAT(b.log(), ::testing::Not(HasSubstr("Reloading HAProxy")));
  EXPECT_THAT(a.log(), HasSubstr("Reloading HAProxy"));
}

}  // namespace
}  // namespace ekco::haproxy
