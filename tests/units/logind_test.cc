// SdBusLogind (units/logind.h) against python3-dbusmock's stock logind template on a private
// dbus-daemon (tests/fakes/systemd_bus.h): the delay lock and its descriptor, InhibitDelayMaxUSec,
// PrepareForShutdown. The same code under a real logind: tests/nspawn/run.
#include "units/logind.h"

#include <stdlib.h>
#include <systemd/sd-bus.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/fakes/systemd_bus.h"
#include "units/systemd_manager.h"

namespace ekco::units {
namespace {

using namespace std::chrono_literals;
using ::testing::StartsWith;

constexpr const char* kLogind = "org.freedesktop.login1";
constexpr const char* kPath = "/org/freedesktop/login1";
constexpr const char* kManager = "org.freedesktop.login1.Manager";
constexpr const char* kMock = "org.freedesktop.DBus.Mock";

class LogindTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setup_error_ = new std::string();
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-logind-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      *setup_error_ = "mkdtemp failed";
      return;
    }
    root_ = tmpl;
    bus_ = new fakes::SystemdBus();
    *setup_error_ = bus_->start({.root = root_, .mock_template = "logind", .bus_name = kLogind});
  }
  static void TearDownTestSuite() {
    delete bus_;
    bus_ = nullptr;
    if (!root_.empty()) std::filesystem::remove_all(root_);
    delete setup_error_;
  }
  void SetUp() override {
    ASSERT_TRUE(setup_error_->empty()) << *setup_error_;
    sd_bus* raw = nullptr;
    ASSERT_GE(sd_bus_new(&raw), 0);
    test_bus_ = raw;
    ASSERT_GE(sd_bus_set_address(test_bus_, systemBusAddress(root_).c_str()), 0);
    ASSERT_GE(sd_bus_set_bus_client(test_bus_, 1), 0);
    ASSERT_GE(sd_bus_start(test_bus_), 0);
    auto logind = connectLogind(systemBusAddress(root_), clock_);
    ASSERT_TRUE(logind) << logind.error().message();
    logind_ = std::move(*logind);
  }
  void TearDown() override { sd_bus_flush_close_unref(test_bus_); }

  // Mock.EmitSignal(Manager, PrepareForShutdown, "b", [value]).
  void emitPrepareForShutdown(bool value) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    const int r =
        sd_bus_call_method(test_bus_, kLogind, kPath, kMock, "EmitSignal", &error, nullptr, "sssav",
                           kManager, "PrepareForShutdown", "b", 1, "b", static_cast<int>(value));
    EXPECT_GE(r, 0) << (error.message != nullptr ? error.message : "");
    sd_bus_error_free(&error);
  }
  // (what, who, mode) of the inhibitors logind lists.
  std::vector<std::tuple<std::string, std::string, std::string>> inhibitors() {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_message* reply = nullptr;
    int r = sd_bus_call_method(test_bus_, kLogind, kPath, kManager, "ListInhibitors", &error,
                               &reply, "");
    EXPECT_GE(r, 0);
    if (r >= 0) r = sd_bus_message_enter_container(reply, 'a', "(ssssuu)");
    while (r > 0) {
      const char *what = nullptr, *who = nullptr, *why = nullptr, *mode = nullptr;
      std::uint32_t uid = 0, pid = 0;
      r = sd_bus_message_read(reply, "(ssssuu)", &what, &who, &why, &mode, &uid, &pid);
      if (r > 0) out.emplace_back(what, who, mode);
    }
    sd_bus_message_unref(reply);
    sd_bus_error_free(&error);
    return out;
  }

  static inline std::string* setup_error_ = nullptr;
  static inline std::string root_{};
  static inline fakes::SystemdBus* bus_ = nullptr;
  sd_bus* test_bus_ = nullptr;
  base::SystemClock clock_;
  std::unique_ptr<Logind> logind_;
};

TEST(ConnectLogindTest, AMissingBusIsUnavailableAndNamesTheAddress) {
  base::SystemClock clock;
  auto logind = connectLogind(systemBusAddress("/nonexistent/ekco-root"), clock);
  ASSERT_FALSE(logind);
  EXPECT_EQ(logind.error().message(),
            "connect to logind at unix:path=/nonexistent/ekco-root/run/dbus/system_bus_socket: "
            "No such file or directory");
  EXPECT_EQ(logind.error().code(), base::ErrorCode::kUnavailable);
}

TEST_F(LogindTest, TheDelayLockIsListedWhileItsDescriptorIsOpen) {
  auto lock = logind_->inhibitShutdownDelay("ekco", "drain the node");
  ASSERT_TRUE(lock) << lock.error().message();
  EXPECT_TRUE(lock->valid());
  EXPECT_THAT(inhibitors(),
              ::testing::Contains(std::make_tuple(std::string("shutdown"), std::string("ekco"),
                                                  std::string("delay"))));
  lock->reset();
  // logind drops an inhibitor when the other end of its pipe hangs up.
  const auto end = std::chrono::steady_clock::now() + 5s;
  while (!inhibitors().empty() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(inhibitors().empty());
}

TEST_F(LogindTest, InhibitDelayMaxIsLogindsProperty) {
  sd_bus_error error = SD_BUS_ERROR_NULL;
  // The stock template has no InhibitDelayMaxUSec: add logind's default, 5 s.
  ASSERT_GE(sd_bus_call_method(test_bus_, kLogind, kPath, kMock, "AddProperty", &error, nullptr,
                               "ssv", kManager, "InhibitDelayMaxUSec", "t",
                               static_cast<std::uint64_t>(5'000'000)),
            0)
      << (error.message != nullptr ? error.message : "");
  sd_bus_error_free(&error);
  auto delay = logind_->inhibitDelayMax();
  ASSERT_TRUE(delay) << delay.error().message();
  EXPECT_EQ(*delay, std::chrono::microseconds(5'000'000));
}

TEST_F(LogindTest, PrepareForShutdownSignalsArriveInOrderAndAWaitWithoutOneTimesOut) {
  emitPrepareForShutdown(true);
  emitPrepareForShutdown(false);
  auto first = logind_->waitPrepareForShutdown(5s);
  ASSERT_TRUE(first) << first.error().message();
  ASSERT_TRUE(first->has_value());
  EXPECT_TRUE(**first);
  auto second = logind_->waitPrepareForShutdown(5s);
  ASSERT_TRUE(second) << second.error().message();
  ASSERT_TRUE(second->has_value());
  EXPECT_FALSE(**second);
  const auto started = std::chrono::steady_clock::now();
  auto none = logind_->waitPrepareForShutdown(200ms);
  ASSERT_TRUE(none) << none.error().message();
  EXPECT_FALSE(none->has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - started, 190ms);
}

}  // namespace
}  // namespace ekco::units
