// The HAProxy reload against a real haproxy in master-worker mode: a new worker, established
// connections kept, a rejected config not confirmed, only this config's master signalled.
// (reload_proc_test.cc: finding the master and its workers in a fake /proc.)
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
#include "base/os/unique_fd.h"
#include "haproxy/render.h"
#include "tests/haproxy/reload_support.h"

extern char** environ;

namespace ekco::haproxy {

namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using namespace std::chrono_literals;
using testing::inodeOf;
using testing::masterPids;
using testing::readFile;
using testing::replaceFile;
using testing::TempDir;
using testing::workerPids;
using testing::writeFile;

constexpr const char* kHaproxyBinary = "/usr/sbin/haproxy";
// Generous: the tests run on loaded 2-core machines.
constexpr auto kWait = 10s;

#define SKIP_WITHOUT_HAPROXY()                                               \
  do {                                                                       \
    if (!fs::exists(kHaproxyBinary)) {                                       \
      GTEST_SKIP() << kHaproxyBinary << " is not installed (scripts/setup)"; \
    }                                                                        \
  } while (false)

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
