// The host-units node controller with a recording fake systemd: files written once, systemd told
// only on change, the reboot service never stopped, the timer removed when the schedule goes.
#include "agent/features/host_units/host_units.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "tests/agent/cli_support.h"

namespace ekco::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Records every call as one string; units flip between active and inactive.
class FakeSystemd : public units::SystemdManager {
 public:
  struct Shared {
    std::vector<std::string> calls;
    std::map<std::string, std::string> active;  // unit -> active state
    std::set<std::string> enabled;
    bool fail_start = false;
  };
  explicit FakeSystemd(Shared& s) : s_(s) {}
  base::Status reload() override {
    s_.calls.push_back("reload");
    return base::ok();
  }
  base::Result<std::vector<units::UnitFileChange>> enableUnitFiles(
      const std::vector<std::string>& names) override {
    for (const auto& n : names) {
      s_.calls.push_back("enable " + n);
      s_.enabled.insert(n);
    }
    return std::vector<units::UnitFileChange>{};
  }
  base::Result<std::vector<units::UnitFileChange>> disableUnitFiles(
      const std::vector<std::string>& names) override {
    for (const auto& n : names) {
      s_.calls.push_back("disable " + n);
      s_.enabled.erase(n);
    }
    return std::vector<units::UnitFileChange>{};
  }
  base::Status startUnit(const std::string& name, std::chrono::milliseconds) override {
    s_.calls.push_back("start " + name);
    if (s_.fail_start)
      return base::Error("start " + name + ": job failed", base::ErrorCode::kUnknown);
    s_.active[name] = "active";
    return base::ok();
  }
  base::Status stopUnit(const std::string& name, std::chrono::milliseconds) override {
    s_.calls.push_back("stop " + name);
    s_.active[name] = "inactive";
    return base::ok();
  }
  base::Status restartUnit(const std::string& name, std::chrono::milliseconds) override {
    s_.calls.push_back("restart " + name);
    s_.active[name] = "active";
    return base::ok();
  }
  base::Result<units::UnitState> unitState(const std::string& name) override {
    auto it = s_.active.find(name);
    return units::UnitState{.load_state = "loaded",
                            .active_state = it == s_.active.end() ? "inactive" : it->second,
                            .sub_state = "",
                            .unit_file_state = s_.enabled.count(name) ? "enabled" : "disabled"};
  }
  base::Result<units::TimerState> timerState(const std::string&) override {
    return units::TimerState{.next_elapse_realtime_usec = 1'800'000'000'000'000ULL};
  }

 private:
  Shared& s_;
};

class HostUnitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fs = hostfs::LocalHostFs::open(dir_.path(), clock_);
    ASSERT_TRUE(fs) << fs.error().message();
    fs_ = std::move(*fs);
    std::filesystem::create_directories(dir_.path() + "/usr/bin");
    std::ofstream(dir_.path() + "/usr/bin/ekco") << "#!/bin/sh\n";
  }
  HostUnitsController make(HostUnitsControllerOptions options = {}) {
    return HostUnitsController(
        *fs_,
        [this]() -> base::Result<std::unique_ptr<units::SystemdManager>> {
          ++connects_;
          if (bus_down_) {
            return base::Error(
                "connect to systemd at unix:path=/run/dbus/system_bus_socket: "
                "No such file or directory",
                base::ErrorCode::kUnavailable);
          }
          return std::unique_ptr<units::SystemdManager>(new FakeSystemd(systemd_));
        },
        std::move(options));
  }
  bool present(const std::string& path) { return std::filesystem::exists(dir_.path() + path); }
  std::vector<std::string> takeCalls() { return std::exchange(systemd_.calls, {}); }

  testing::TempDir dir_{"ekco-units"};
  base::ManualClock clock_;
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  FakeSystemd::Shared systemd_;
  bool bus_down_ = false;
  int connects_ = 0;
};

TEST_F(HostUnitsTest, InstallsEnablesAndStartsTheRebootServiceOnce) {
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(present("/etc/systemd/system/ekco-reboot.service"));
  EXPECT_TRUE(present("/opt/ekco/shutdown.sh"));
  EXPECT_EQ(std::filesystem::status(dir_.path() + "/opt/ekco/shutdown.sh").permissions() &
                std::filesystem::perms::owner_exec,
            std::filesystem::perms::owner_exec);
  EXPECT_FALSE(present("/etc/systemd/system/ekco-upgrade.timer"));
  EXPECT_THAT(takeCalls(),
              ElementsAre("reload", "enable ekco-reboot.service", "start ekco-reboot.service"));
  EXPECT_THAT(r->summary, HasSubstr("enabled ekco-reboot.service"));
  // Nothing changed: systemd is not told anything (status reads only).
  ASSERT_TRUE(c.reconcile());
  EXPECT_TRUE(takeCalls().empty());
  const auto status = c.status();
  EXPECT_EQ(status["units"][0]["name"], "ekco-reboot.service");
  EXPECT_EQ(status["units"][0]["file_state"], "enabled");
  EXPECT_EQ(status["units"][0]["active_state"], "active");
}

TEST_F(HostUnitsTest, AnInactiveRebootServiceIsNotStartedAgainBehindSystemdsBack) {
  auto c = make();
  ASSERT_TRUE(c.reconcile());
  takeCalls();
  // systemd stopped it (a system shutdown in progress): starting it would run `ekco startup`.
  systemd_.active["ekco-reboot.service"] = "inactive";
  ASSERT_TRUE(c.reconcile());
  EXPECT_TRUE(takeCalls().empty());
}

TEST_F(HostUnitsTest, TheTimerComesAndGoesWithTheSchedule) {
  auto with = make({.units = {.upgrade_schedule = "Sat 17:30"}});
  ASSERT_TRUE(with.reconcile());
  EXPECT_TRUE(present("/etc/systemd/system/ekco-upgrade.timer"));
  EXPECT_THAT(takeCalls(),
              ElementsAre("reload", "enable ekco-reboot.service", "start ekco-reboot.service",
                          "enable ekco-upgrade.timer", "start ekco-upgrade.timer"));
  EXPECT_EQ(with.status()["units"][2]["next_elapse_usec"], 1'800'000'000'000'000ULL);
  // A new schedule: the timer file changes, systemd reloads; the active timer is not restarted.
  auto changed = make({.units = {.upgrade_schedule = "Sun 03:00"}});
  ASSERT_TRUE(changed.reconcile());
  EXPECT_THAT(takeCalls(), ElementsAre("reload", "enable ekco-upgrade.timer"));
  // Unset: the timer is stopped, both units disabled and removed; the reboot service untouched.
  auto without = make();
  auto r = without.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(present("/etc/systemd/system/ekco-upgrade.timer"));
  EXPECT_FALSE(present("/etc/systemd/system/ekco-upgrade.service"));
  EXPECT_THAT(takeCalls(), ElementsAre("stop ekco-upgrade.timer", "disable ekco-upgrade.service",
                                       "disable ekco-upgrade.timer", "reload"));
}

TEST_F(HostUnitsTest, DisablingTheRebootServiceNeverStopsIt) {
  ASSERT_TRUE(make().reconcile());
  takeCalls();
  auto c = make({.units = {.reboot_service = false}});
  ASSERT_TRUE(c.reconcile());
  EXPECT_FALSE(present("/etc/systemd/system/ekco-reboot.service"));
  EXPECT_TRUE(present("/opt/ekco/shutdown.sh"));  // still there for manual use
  EXPECT_THAT(takeCalls(), ElementsAre("disable ekco-reboot.service", "reload"));
}

TEST_F(HostUnitsTest, ASystemdFailureIsRetriedUntilDone) {
  bus_down_ = true;
  auto c = make();
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("systemd: connect to systemd"));
  EXPECT_THAT(c.status()["problem"].get<std::string>(), HasSubstr("No such file"));
  // The files are written; the systemd side is owed.
  EXPECT_TRUE(present("/etc/systemd/system/ekco-reboot.service"));
  bus_down_ = false;
  systemd_.fail_start = true;
  ASSERT_FALSE(c.reconcile());
  systemd_.fail_start = false;
  takeCalls();
  ASSERT_TRUE(c.reconcile());
  EXPECT_THAT(takeCalls(),
              ElementsAre("reload", "enable ekco-reboot.service", "start ekco-reboot.service"));
  ASSERT_TRUE(c.reconcile());
  EXPECT_TRUE(takeCalls().empty());
  EXPECT_EQ(c.status()["problem"], "");
}

TEST_F(HostUnitsTest, WithoutTheBinaryOnTheHostNothingIsInstalled) {
  std::filesystem::remove(dir_.path() + "/usr/bin/ekco");
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->summary, HasSubstr("skipped: /usr/bin/ekco is not on the host"));
  EXPECT_FALSE(present("/etc/systemd/system/ekco-reboot.service"));
  EXPECT_EQ(connects_, 0);
}

TEST_F(HostUnitsTest, DryRunWritesNothingAndTellsSystemdNothing) {
  auto c = make({.units = {.upgrade_schedule = "daily"}, .dry_run = true});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("write /etc/systemd/system/ekco-upgrade.timer"));
  EXPECT_FALSE(present("/etc/systemd/system/ekco-reboot.service"));
  EXPECT_EQ(connects_, 0);
}

}  // namespace
}  // namespace ekco::agent
