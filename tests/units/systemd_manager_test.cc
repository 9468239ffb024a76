// SdBusSystemdManager against a private dbus-daemon and a python3-dbusmock systemd
// (tests/units/systemd_mock.py, which documents how unit names steer its jobs).
//
// One bus and one mock per suite: the bus socket sits at <root>/run/dbus/system_bus_socket of a
// temporary directory laid out as a host root whose name needs D-Bus address escaping, so every
// test also goes through systemBusAddress(root). Tests use unit names of their own, and read the
// calls from the mock's log from where their test started.
#include "units/systemd_manager.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/clock.h"
#include "base/process.h"
#include "base/result.h"

extern char** environ;

namespace ekco::units {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char* kSystemd = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kMockIface = "org.freedesktop.DBus.Mock";

std::string readWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

// Minimal XML escaping for the <listen> element (the address itself is already %-escaped).
std::string xmlEscape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '<') {
      out += "&lt;";
    } else {
      out += c;
    }
  }
  return out;
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

struct BusUnref {
  void operator()(sd_bus* bus) const { sd_bus_flush_close_unref(bus); }
};

// The test's own connection, to drive the mock (org.freedesktop.DBus.Mock) and check the bus.
std::unique_ptr<sd_bus, BusUnref> openBus(const std::string& address, std::string& why) {
  sd_bus* raw = nullptr;
  int r = sd_bus_new(&raw);
  std::unique_ptr<sd_bus, BusUnref> bus(raw);
  if (r >= 0) r = sd_bus_set_address(raw, address.c_str());
  if (r >= 0) r = sd_bus_set_bus_client(raw, 1);
  if (r >= 0) r = sd_bus_start(raw);
  if (r < 0) {
    why = std::string("open test bus connection: ") + std::strerror(-r);
    return nullptr;
  }
  return bus;
}

// Whether a method call succeeded; `why` gets the D-Bus error otherwise.
bool callOk(int r, sd_bus_error& error, std::string& why) {
  if (r >= 0) return true;
  why = error.message != nullptr ? error.message : std::strerror(-r);
  return false;
}

class SystemdManagerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_error_ = new std::string();
    *setup_error_ = startBusAndMock();
  }

  static void TearDownTestSuite() {
    bus_.reset();
    if (mock_pid_ > 0) {
      ::kill(mock_pid_, SIGTERM);
      reap(mock_pid_, 5s);
      mock_pid_ = -1;
    }
    if (daemon_pid_ > 0) {
      ::kill(daemon_pid_, SIGTERM);  // not our child (--fork): nothing to reap
      daemon_pid_ = -1;
    }
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
    log_offset_ = readWholeFile(log_path_).size();
    auto manager = connectSystemd(systemBusAddress(root_));
    ASSERT_TRUE(manager) << manager.error().message();
    manager_ = std::move(*manager);
  }

  // SIGTERM was sent; waits up to `grace`, then SIGKILL.
  static void reap(pid_t pid, std::chrono::milliseconds grace) {
    const auto start = std::chrono::steady_clock::now();
    while (since(start) < grace) {
      if (::waitpid(pid, nullptr, WNOHANG) == pid) return;
      std::this_thread::sleep_for(20ms);
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }

  // Starts dbus-daemon and the mock; returns what went wrong, or "".
  static std::string startBusAndMock() {
    // A name with a space, a comma and '=' (all %-escaped in D-Bus addresses).
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "ekco units,sd=bus-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return "mkdtemp failed";
    root_ = tmpl;
    std::filesystem::create_directories(root_ + "/run/dbus");
    address_ = systemBusAddress(root_);
    log_path_ = root_ + "/mock.log";

    const std::string conf = root_ + "/bus.conf";
    writeFile(conf, R"(<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>)" + xmlEscape(address_) + R"(</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/> <allow own="*"/>
    <allow send_type="method_call"/> <allow send_type="signal"/>
    <allow send_type="method_return"/> <allow send_type="error"/>
    <allow receive_type="method_call"/> <allow receive_type="signal"/>
    <allow receive_type="method_return"/> <allow receive_type="error"/>
  </policy>
</busconfig>
)");

    // dbus-daemon --fork prints the address and the daemon's pid, then its first process exits.
    base::SystemClock clock;
    base::BoostProcessRunner runner(clock);
    auto daemon = runner.run(base::ProcessRequest{
        .argv = {"dbus-daemon", "--config-file=" + conf, "--print-address=1", "--print-pid=1",
                 "--fork"},
        .timeout = 20s});
    if (!daemon) return daemon.error().message();
    if (!daemon->success()) return base::failureError({.argv = {"dbus-daemon"}}, *daemon).message();
    std::istringstream out(daemon->stdout_data);
    std::string printed_address;
    out >> printed_address >> daemon_pid_;
    if (daemon_pid_ <= 0) return "dbus-daemon printed no pid: " + daemon->stdout_data;
    printed_address_ = printed_address;

    // The mock, as our child, output to mock.out.
    const std::string mock_out = root_ + "/mock.out";
    std::vector<std::string> args = {"/usr/bin/python3", "-m", "dbusmock", "--system", "-t",
                                     std::string(EKCO_SOURCE_DIR) + "/tests/units/systemd_mock.py",
                                     "-l", log_path_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string bus_env = "DBUS_SYSTEM_BUS_ADDRESS=" + address_;
    std::vector<char*> envp;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("DBUS_SYSTEM_BUS_ADDRESS=")) continue;
      envp.push_back(*e);
    }
    envp.push_back(bus_env.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, mock_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = ::posix_spawn(&mock_pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      mock_pid_ = -1;
      return std::string("start dbusmock: ") + std::strerror(rc);
    }

    // Wait (up to 10 s) until the mock owns org.freedesktop.systemd1.
    std::string why;
    bus_ = openBus(address_, why);
    if (!bus_) return why;
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      sd_bus_error error = SD_BUS_ERROR_NULL;
      sd_bus_message* reply = nullptr;
      int r = sd_bus_call_method(bus_.get(), "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                 "org.freedesktop.DBus", "NameHasOwner", &error, &reply, "s",
                                 kSystemd);
      int has_owner = 0;
      if (r >= 0) r = sd_bus_message_read(reply, "b", &has_owner);
      sd_bus_message_unref(reply);
      sd_bus_error_free(&error);
      if (r < 0) return std::string("NameHasOwner: ") + std::strerror(-r);
      if (has_owner != 0) return "";
      if (::waitpid(mock_pid_, nullptr, WNOHANG) == mock_pid_) {
        mock_pid_ = -1;
        return "dbusmock exited: " + readWholeFile(mock_out);
      }
      if (since(start) > 10s) return "dbusmock did not take the name in 10 s: " + readWholeFile(mock_out);
      std::this_thread::sleep_for(20ms);
    }
  }

  // Mock method: AddMockUnit(name).
  static void addMockUnit(const std::string& name) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    std::string why;
    const int r = sd_bus_call_method(bus_.get(), kSystemd, kManagerPath, kMockIface, "AddMockUnit",
                                     &error, nullptr, "s", name.c_str());
    EXPECT_TRUE(callOk(r, error, why)) << "AddMockUnit " << name << ": " << why;
    sd_bus_error_free(&error);
  }

  // Sets the Timer properties of a mock *.timer unit (Mock.UpdateProperties on its object).
  static void setTimer(const std::string& name, std::uint64_t next, std::uint64_t last) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    std::string why;
    int r = sd_bus_call_method(bus_.get(), kSystemd, kManagerPath,
                               "org.freedesktop.systemd1.Manager", "GetUnit", &error, &reply, "s",
                               name.c_str());
    const char* path = nullptr;
    if (r >= 0) r = sd_bus_message_read(reply, "o", &path);
    if (callOk(r, error, why)) {
      sd_bus_error_free(&error);
      r = sd_bus_call_method(bus_.get(), kSystemd, path, kMockIface, "UpdateProperties", &error,
                             nullptr, "sa{sv}", "org.freedesktop.systemd1.Timer", 2,
                             "NextElapseUSecRealtime", "t", next, "LastTriggerUSec", "t", last);
      EXPECT_TRUE(callOk(r, error, why)) << "UpdateProperties " << name << ": " << why;
    } else {
      ADD_FAILURE() << "GetUnit " << name << ": " << why;
    }
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
  }

  // The mock's log since this test started: calls of `method`, as `method "arg" ...` (the mock
  // writes a line before it runs the method, so a call that returned is there).
  std::vector<std::string> calls(const std::string& method) const {
    std::vector<std::string> out;
    std::istringstream in(readWholeFile(log_path_).substr(log_offset_));
    std::string line;
    while (std::getline(in, line)) {
      const auto space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string call = line.substr(space + 1);
      if (call == method || call.starts_with(method + " ")) out.push_back(call);
    }
    return out;
  }

  static inline std::string* setup_error_ = nullptr;
  static inline std::string root_{};
  static inline std::string address_{};
  static inline std::string printed_address_{};
  static inline std::string log_path_{};
  static inline pid_t daemon_pid_ = -1;
  static inline pid_t mock_pid_ = -1;
  static inline std::unique_ptr<sd_bus, BusUnref> bus_{};

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
  auto manager = connectSystemd(address);
  ASSERT_FALSE(manager);
  EXPECT_EQ(manager.error().message(),
            "connect to systemd at unix:path=/nonexistent/ekco-root/run/dbus/system_bus_socket: "
            "No such file or directory");
  EXPECT_EQ(manager.error().code(), base::ErrorCode::kUnavailable);
}

TEST(ConnectSystemdTest, BadAddress) {
  auto manager = connectSystemd("nonsense");
  ASSERT_FALSE(manager);
  EXPECT_THAT(manager.error().message(), StartsWith("connect to systemd at nonsense: "));
}

TEST_F(SystemdManagerTest, BusListensAtTheEscapedHostRootAddress) {
  // dbus-daemon parsed our escaped address back into the real path (with its space, comma, '=').
  struct stat st{};
  ASSERT_EQ(::stat((root_ + "/run/dbus/system_bus_socket").c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(printed_address_.substr(0, printed_address_.find(",guid=")), address_);
  EXPECT_THAT(address_, HasSubstr("ekco%20units%2csd%3dbus-"));
}

TEST_F(SystemdManagerTest, Reload) {
  ASSERT_TRUE(manager_->reload());
  EXPECT_THAT(calls("Reload"), ElementsAre("Reload"));
}

TEST_F(SystemdManagerTest, EnableAndDisableReturnTheChanges) {
  addMockUnit("en-a.service");
  auto enabled = manager_->enableUnitFiles({"en-a.service", "en-b.timer"});
  ASSERT_TRUE(enabled) << enabled.error().message();
  EXPECT_THAT(*enabled,
              ElementsAre(UnitFileChange{"symlink",
                                         "/etc/systemd/system/multi-user.target.wants/en-a.service",
                                         "/etc/systemd/system/en-a.service"},
                          UnitFileChange{"symlink",
                                         "/etc/systemd/system/multi-user.target.wants/en-b.timer",
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
  EXPECT_THAT(*disabled,
              ElementsAre(UnitFileChange{"unlink",
                                         "/etc/systemd/system/multi-user.target.wants/en-a.service",
                                         ""},
                          UnitFileChange{"unlink",
                                         "/etc/systemd/system/multi-user.target.wants/en-b.timer",
                                         ""}));
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
