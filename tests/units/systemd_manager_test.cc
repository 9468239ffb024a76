// SdBusSystemdManager against a private dbus-daemon and a python3-dbusmock systemd
// (tests/units/systemd_mock.py, which documents how unit names steer its jobs).
//
// One bus and one mock per suite: the bus socket sits at <root>/run/dbus/system_bus_socket of a
// temporary directory laid out as a host root whose name needs D-Bus address escaping, so every
// test also goes through systemBusAddress(root). Tests use unit names of their own, and read the
// calls from the mock's log from where their test started. The bus and the mock are
// tests/fakes/systemd_bus.h.
#include "units/systemd_manager.h"
#include "base/clock.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/result.h"
#include "tests/fakes/systemd_bus.h"

namespace ekco::units {
namespace {

// The sd-bus waits run on real time (a dbus-daemon answers), so the job timeouts do too.
const base::SystemClock kClock;

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

class SystemdManagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_error_ = new std::string();
    // A name with a space, a comma and '=' (all %-escaped in D-Bus addresses).
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "ekco units,sd=bus-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      *setup_error_ = "mkdtemp failed";
      return;
    }
    root_ = tmpl;
    bus_ = new fakes::SystemdBus();
    *setup_error_ = bus_->start({.root = root_});
  }

  static void TearDownTestSuite() {
    delete bus_;  // ends the mock and the bus
    bus_ = nullptr;
    if (!root_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
      root_.clear();
    }
    delete setup_error_;
    setup_error_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(setup_error_->empty()) << *setup_error_;
    log_offset_ = bus_->logSize();
    auto manager = connectSystemd(systemBusAddress(root_), kClock);
    ASSERT_TRUE(manager) << manager.error().message();
    manager_ = std::move(*manager);
  }

  static void addMockUnit(const std::string& name) { EXPECT_EQ(bus_->addMockUnit(name), ""); }
  static void setTimer(const std::string& name, std::uint64_t next, std::uint64_t last) {
    EXPECT_EQ(bus_->setTimer(name, next, last), "");
  }
  // The mock's calls of `method` since this test started.
  std::vector<std::string> calls(const std::string& method) const {
    return bus_->calls(method, log_offset_);
  }

  static inline std::string* setup_error_ = nullptr;
  static inline std::string root_{};
  static inline fakes::SystemdBus* bus_ = nullptr;

  std::size_t log_offset_ = 0;
  std::unique_ptr<SystemdManager> manager_{};
};

TEST(SystemBusAddressTest, RootsAndEscaping) {
  EXPECT_EQ(systemBusAddress("/"), "unix:path=/run/dbus/system_bus_socket");
  EXPECT_EQ(systemBusAddress(""), "unix:path=/run/dbus/system_bus_socket");
  EXPECT_EQ(systemBusAddress("/host"), "unix:path=/host/run/dbus/system_bus_socket");
  EXPECT_EQ(systemBusAddress("/host//"), "unix:path=/host/run/dbus/system_bus_socket");
  // Kept as they are: [-0-9A-Za-z_/.\*].
  EXPECT_EQ(systemBusAddress("/a-Z_9.x\\*"), "unix:path=/a-Z_9.x\\*/run/dbus/system_bus_socket");
  // Everything else is %xx, bytewise (UTF-8 included).
  EXPECT_EQ(systemBusAddress("/a b,c=d;e%f:g\xc3\xa9"),
            "unix:path=/a%20b%2cc%3dd%3be%25f%3ag%c3%a9/run/dbus/system_bus_socket");
}

TEST(ConnectSystemdTest, MissingSocketNamesTheAddress) {
  const std::string address = systemBusAddress("/nonexistent/ekco-root");
  auto manager = connectSystemd(address, kClock);
  ASSERT_FALSE(manager);
  EXPECT_EQ(manager.error().message(),
            "connect to systemd at unix:path=/nonexistent/ekco-root/run/dbus/system_bus_socket: "
            "No such file or directory");
  EXPECT_EQ(manager.error().code(), base::ErrorCode::kUnavailable);
}

TEST(ConnectSystemdTest, BadAddress) {
  auto manager = connectSystemd("nonsense", kClock);
  ASSERT_FALSE(manager);
  EXPECT_THAT(manager.error().message(), StartsWith("connect to systemd at nonsense: "));
}

TEST_F(SystemdManagerTest, BusListensAtTheEscapedHostRootAddress) {
  // dbus-daemon parsed our escaped address back into the real path (with its space, comma, '=').
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/run/dbus/system_bus_socket").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  const std::string& printed = bus_->printedAddress();
  EXPECT_EQ(printed.substr(0, printed.find(",guid=")), bus_->address());
  EXPECT_THAT(bus_->address(), HasSubstr("ekco%20units%2csd%3dbus-"));
}

TEST_F(SystemdManagerTest, Reload) {
  ASSERT_TRUE(manager_->reload());
  EXPECT_THAT(calls("Reload"), ElementsAre("Reload"));
}

TEST_F(SystemdManagerTest, EnableAndDisableReturnTheChanges) {
  addMockUnit("en-a.service");
  auto enabled = manager_->enableUnitFiles({"en-a.service", "en-b.timer"});
  ASSERT_TRUE(enabled) << enabled.error().message();
  EXPECT_THAT(
      *enabled,
      ElementsAre(
          UnitFileChange{"symlink", "/etc/systemd/system/multi-user.target.wants/en-a.service",
                         "/etc/systemd/system/en-a.service"},
          UnitFileChange{"symlink", "/etc/systemd/system/multi-user.target.wants/en-b.timer",
                         "/etc/systemd/system/en-b.timer"}));
  EXPECT_THAT(calls("EnableUnitFiles"),
              ElementsAre(R"(EnableUnitFiles ["en-a.service", "en-b.timer"] False True)"));
  auto state = manager_->unitState("en-a.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->unit_file_state, "enabled");

  // Enabling again changes nothing.
  auto again = manager_->enableUnitFiles({"en-a.service"});
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_TRUE(again->empty());

  auto disabled = manager_->disableUnitFiles({"en-a.service", "en-b.timer"});
  ASSERT_TRUE(disabled) << disabled.error().message();
  EXPECT_THAT(
      *disabled,
      ElementsAre(
          UnitFileChange{"unlink", "/etc/systemd/system/multi-user.target.wants/en-a.service", ""},
          UnitFileChange{"unlink", "/etc/systemd/system/multi-user.target.wants/en-b.timer", ""}));
  EXPECT_THAT(calls("DisableUnitFiles"),
              ElementsAre(R"(DisableUnitFiles ["en-a.service", "en-b.timer"] False)"));
  state = manager_->unitState("en-a.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->unit_file_state, "disabled");
}

TEST_F(SystemdManagerTest, StartAndStopWaitForTheJob) {
  addMockUnit("web.service");
  auto state = manager_->unitState("web.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->load_state, "loaded");
  EXPECT_EQ(state->active_state, "inactive");
  EXPECT_EQ(state->sub_state, "dead");
  EXPECT_EQ(state->unit_file_state, "disabled");

  // The mock flips the state in the same idle callback that sends JobRemoved, so reading it
  // right after the wait shows whether the wait really waited for the signal.
  auto started = manager_->startUnit("web.service", 10s);
  ASSERT_TRUE(started) << started.error().message();
  state = manager_->unitState("web.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->active_state, "active");
  EXPECT_EQ(state->sub_state, "running");

  auto stopped = manager_->stopUnit("web.service", 10s);
  ASSERT_TRUE(stopped) << stopped.error().message();
  state = manager_->unitState("web.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->active_state, "inactive");
  EXPECT_EQ(state->sub_state, "dead");

  EXPECT_THAT(calls("StartUnit"), ElementsAre(R"(StartUnit "web.service" "replace")"));
  EXPECT_THAT(calls("StopUnit"), ElementsAre(R"(StopUnit "web.service" "replace")"));
  EXPECT_THAT(calls("Subscribe"), ElementsAre("Subscribe"));  // once per connection
}

TEST_F(SystemdManagerTest, JobRemovedBeforeTheReplyIsNotMissed) {
  addMockUnit("eager.service");
  const auto start = std::chrono::steady_clock::now();
  auto started = manager_->startUnit("eager.service", 10s);
  ASSERT_TRUE(started) << started.error().message();
  EXPECT_LT(since(start), 5s);
  auto state = manager_->unitState("eager.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->active_state, "active");
}

TEST_F(SystemdManagerTest, FailedJobIsAnError) {
  addMockUnit("will-fail.service");
  auto started = manager_->startUnit("will-fail.service", 10s);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().message(), "start will-fail.service: job failed");
  EXPECT_EQ(started.error().code(), base::ErrorCode::kUnknown);
  auto state = manager_->unitState("will-fail.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->active_state, "failed");
}

TEST_F(SystemdManagerTest, JobWithoutJobRemovedTimesOut) {
  addMockUnit("hang.service");
  addMockUnit("later.service");
  const auto start = std::chrono::steady_clock::now();
  auto started = manager_->startUnit("hang.service", 1s);
  const auto took = since(start);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().code(), base::ErrorCode::kTimeout);
  EXPECT_THAT(started.error().message(),
              StartsWith("start hang.service: job /org/freedesktop/systemd1/job/"));
  EXPECT_THAT(started.error().message(), HasSubstr(" did not finish within 1000ms"));
  EXPECT_GE(took, 1s);
  EXPECT_LT(took, 6s);

  // The connection is still good for the next job.
  auto next = manager_->startUnit("later.service", 10s);
  EXPECT_TRUE(next) << next.error().message();
}

TEST_F(SystemdManagerTest, UnknownUnit) {
  auto started = manager_->startUnit("nope.service", 10s);
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().message(), "start nope.service: unit not found");
  EXPECT_EQ(started.error().code(), base::ErrorCode::kNotFound);

  auto stopped = manager_->stopUnit("nope.service", 10s);
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().message(), "stop nope.service: unit not found");
  EXPECT_EQ(stopped.error().code(), base::ErrorCode::kNotFound);

  // Like systemctl show: LoadUnit of an unknown name is a "not-found" unit, not an error.
  auto state = manager_->unitState("nope.service");
  ASSERT_TRUE(state) << state.error().message();
  EXPECT_EQ(state->load_state, "not-found");
  EXPECT_EQ(state->active_state, "inactive");
  EXPECT_EQ(state->unit_file_state, "");
}

TEST_F(SystemdManagerTest, TimerState) {
  addMockUnit("maint.timer");
  auto never = manager_->timerState("maint.timer");
  ASSERT_TRUE(never) << never.error().message();
  EXPECT_EQ(never->next_elapse_realtime_usec, std::nullopt);
  EXPECT_EQ(never->last_trigger_usec, std::nullopt);

  const std::uint64_t next = 1795340246000000;  // microseconds since the epoch
  const std::uint64_t last = 1794735446123456;
  setTimer("maint.timer", next, last);
  auto timer = manager_->timerState("maint.timer");
  ASSERT_TRUE(timer) << timer.error().message();
  EXPECT_EQ(timer->next_elapse_realtime_usec, next);
  EXPECT_EQ(timer->last_trigger_usec, last);

  setTimer("maint.timer", next, 0);
  timer = manager_->timerState("maint.timer");
  ASSERT_TRUE(timer) << timer.error().message();
  EXPECT_EQ(timer->next_elapse_realtime_usec, next);
  EXPECT_EQ(timer->last_trigger_usec, std::nullopt);
}

TEST_F(SystemdManagerTest, TimerStateOfANonTimerIsAnError) {
  addMockUnit("plain.service");
  auto timer = manager_->timerState("plain.service");
  ASSERT_FALSE(timer);
  EXPECT_THAT(timer.error().message(),
              StartsWith("timer state of plain.service: NextElapseUSecRealtime: "));
}

TEST_F(SystemdManagerTest, SharedBetweenThreads) {
  addMockUnit("shared.service");
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const bool ok = (t % 2 == 0) ? bool(manager_->startUnit("shared.service", 10s))
                                     : bool(manager_->unitState("shared.service"));
        if (!ok) ++failures[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(failures, ElementsAre(0, 0, 0, 0));
  EXPECT_EQ(calls("StartUnit").size(), 10u);
}

}  // namespace
}  // namespace ekco::units
