// The agent's shutdown inhibitor (agent/features/reboot/shutdown_inhibitor.h) over an in-memory
// logind: the lock is a pipe whose other end shows whether it is still held. The real sd-bus side
// is tests/units/logind_test.cc (python3-dbusmock's logind), the real logind tests/nspawn/run.
#include "agent/features/reboot/shutdown_inhibitor.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

namespace ekco::agent {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

constexpr const char* kBoot = "0f6a3b2c-1d4e-4f5a-8b9c-0d1e2f3a4b5c";

// What the fake logind shares with the test.
struct LogindState {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<bool> signals;
  int connect_failures = 0;  // connects to refuse before one succeeds
  int connects = 0;
  int inhibits = 0;
  std::string last_who, last_why;
  std::chrono::microseconds delay{5s};
  int held_end = -1;  // our end of the latest lock's pipe

  void emit(bool value) {
    std::lock_guard lock(mu);
    signals.push_back(value);
    cv.notify_all();
  }
  // True while the latest lock's descriptor is open in the inhibitor.
  bool lockHeld() {
    std::lock_guard lock(mu);
    if (held_end < 0) return false;
    pollfd p{.fd = held_end, .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, 0) == 0;  // the write end closed: POLLHUP
  }
  ~LogindState() {
    if (held_end >= 0) ::close(held_end);
  }
};

class FakeLogind final : public units::Logind {
 public:
  explicit FakeLogind(std::shared_ptr<LogindState> s) : s_(std::move(s)) {}
  base::Result<base::UniqueFd> inhibitShutdownDelay(const std::string& who,
                                                    const std::string& why) override {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return base::Error("pipe");
    std::lock_guard lock(s_->mu);
    ++s_->inhibits;
    s_->last_who = who;
    s_->last_why = why;
    if (s_->held_end >= 0) ::close(s_->held_end);
    s_->held_end = fds[0];
    return base::UniqueFd(fds[1]);
  }
  base::Result<std::chrono::microseconds> inhibitDelayMax() override {
    std::lock_guard lock(s_->mu);
    return s_->delay;
  }
  base::Result<std::optional<bool>> waitPrepareForShutdown(
      std::chrono::milliseconds timeout) override {
    std::unique_lock lock(s_->mu);
    if (!s_->cv.wait_for(lock, timeout, [&] { return !s_->signals.empty(); })) {
      return std::optional<bool>();
    }
    const bool v = s_->signals.front();
    s_->signals.pop_front();
    return std::optional<bool>(v);
  }

 private:
  std::shared_ptr<LogindState> s_;
};

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return pred();
}

class ShutdownInhibitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ekco-inhibitor-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    auto fs = hostfs::LocalHostFs::open(root_, clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    fs_ = std::move(*fs);
  }
  void TearDown() override {
    if (inhibitor_) inhibitor_->stop();
    if (thread_.joinable()) thread_.join();
    std::filesystem::remove_all(root_);
  }

  void start(std::function<bool()> drain, std::chrono::milliseconds drain_bound = 330s) {
    auto state = state_;
    inhibitor_ = std::make_unique<ShutdownInhibitor>(
        [state]() -> base::Result<std::unique_ptr<units::Logind>> {
          std::lock_guard lock(state->mu);
          ++state->connects;
          if (state->connect_failures > 0) {
            --state->connect_failures;
            return base::Error("connect to logind at unix:path=/x: No such file or directory",
                               base::ErrorCode::kUnavailable);
          }
          return std::unique_ptr<units::Logind>(std::make_unique<FakeLogind>(state));
        },
        std::move(drain), [] { return std::string(kBoot); }, *fs_,
        ShutdownInhibitorOptions{
            .drain_bound = drain_bound, .retry_interval = 50ms, .poll = 20ms, .pid = 4242});
    thread_ = std::thread([this] { inhibitor_->run(); });
  }
  std::string marker() const {
    std::ifstream in(root_ + "/run/ekco/shutdown-drain");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  base::SystemClock clock_;
  std::string root_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  std::shared_ptr<LogindState> state_ = std::make_shared<LogindState>();
  std::unique_ptr<ShutdownInhibitor> inhibitor_;
  std::thread thread_;
};

TEST_F(ShutdownInhibitorTest, TakesADelayLockAtStartAndWarnsWhenLogindsDelayIsShorterThanTheDrain) {
  start([] { return true; });
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  ASSERT_TRUE(eventually([&] { return inhibitor_->status()["held"] == true; }));
  const auto s = inhibitor_->status();
  EXPECT_EQ(s["state"], "waiting");
  EXPECT_EQ(s["inhibit_delay_max"], "5s");
  EXPECT_EQ(s["drain_bound"], "5m30s");
  EXPECT_EQ(s["delay_too_short"], true);
  EXPECT_EQ(state_->last_who, "ekco");
  EXPECT_THAT(state_->last_why, HasSubstr("drain"));
  EXPECT_EQ(marker(), "");  // nothing written before a shutdown
}

TEST_F(ShutdownInhibitorTest, ADelayLongEnoughIsNoWarning) {
  state_->delay = 10min;
  start([] { return true; });
  ASSERT_TRUE(eventually([&] { return inhibitor_->status()["held"] == true; }));
  EXPECT_EQ(inhibitor_->status()["delay_too_short"], false);
  EXPECT_EQ(inhibitor_->status()["inhibit_delay_max"], "10m");
}

TEST_F(ShutdownInhibitorTest, PrepareForShutdownDrainsUnderTheLockThenReleasesItAndMarksDrained) {
  std::atomic<bool> held_during_drain{false};
  std::string marker_during_drain;
  start([&] {
    held_during_drain = state_->lockHeld();
    marker_during_drain = marker();
    return true;
  });
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  state_->emit(true);
  ASSERT_TRUE(eventually([&] { return inhibitor_->status()["drains"] == 1; }));
  EXPECT_TRUE(held_during_drain);
  EXPECT_EQ(marker_during_drain, std::string("draining pid=4242 boot_id=") + kBoot + "\n");
  EXPECT_EQ(marker(), std::string("drained boot_id=") + kBoot + "\n");
  EXPECT_TRUE(eventually([&] { return !state_->lockHeld(); }));  // logind goes on
  const auto s = inhibitor_->status();
  EXPECT_EQ(s["held"], false);
  EXPECT_EQ(s["state"], "released");
  EXPECT_EQ(s["last_drain"], "drained");
  // Not taken again while the system goes down.
  std::this_thread::sleep_for(200ms);
  std::lock_guard lock(state_->mu);
  EXPECT_EQ(state_->inhibits, 1);
}

TEST_F(ShutdownInhibitorTest, AFailedDrainIsMarkedSoTheStopJobDrainsAgain) {
  start([] { return false; });
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  state_->emit(true);
  ASSERT_TRUE(eventually([&] { return inhibitor_->status()["drains"] == 1; }));
  EXPECT_EQ(marker(), std::string("failed boot_id=") + kBoot + "\n");
  EXPECT_EQ(inhibitor_->status()["last_drain"], "failed");
  EXPECT_FALSE(state_->lockHeld());
}

TEST_F(ShutdownInhibitorTest, ACancelledShutdownRemovesTheMarkerAndTakesTheLockAgain) {
  start([] { return true; });
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  state_->emit(true);
  ASSERT_TRUE(eventually([&] { return inhibitor_->status()["drains"] == 1; }));
  state_->emit(false);
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  EXPECT_TRUE(eventually([&] { return inhibitor_->status()["held"] == true; }));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/run/ekco/shutdown-drain"));
  std::lock_guard lock(state_->mu);
  EXPECT_EQ(state_->inhibits, 2);
}

TEST_F(ShutdownInhibitorTest, NoLogindIsReportedAndRetriedUntilItAnswers) {
  state_->connect_failures = 3;
  start([] { return true; });
  ASSERT_TRUE(eventually([&] {
    const auto s = inhibitor_->status();
    return s["state"] == "unavailable" &&
           s["last_error"].get<std::string>().find("No such file") != std::string::npos;
  }));
  EXPECT_EQ(inhibitor_->status()["held"], false);
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  EXPECT_TRUE(eventually([&] { return inhibitor_->status()["held"] == true; }));
  EXPECT_EQ(inhibitor_->status()["last_error"], "");
  std::lock_guard lock(state_->mu);
  EXPECT_EQ(state_->connects, 4);
}

TEST_F(ShutdownInhibitorTest, StopReleasesTheLock) {
  start([] { return true; });
  ASSERT_TRUE(eventually([&] { return state_->lockHeld(); }));
  inhibitor_->stop();
  thread_.join();
  EXPECT_FALSE(state_->lockHeld());
  EXPECT_EQ(inhibitor_->status()["state"], "stopped");
}

}  // namespace
}  // namespace ekco::agent
