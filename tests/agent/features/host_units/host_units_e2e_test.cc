// The real `ekco agent` installing its systemd units over sd-bus: a temporary host root with
// /usr/bin/ekco, its system bus (a private dbus-daemon at <root>/run/dbus/system_bus_socket) with
// the python3-dbusmock systemd (tests/units/systemd_mock.py, loading unit files from
// <root>/etc/systemd/system at daemon-reload), and ekco-kubesim in-process. Three agent runs
// against the same "host": with a schedule (everything installed, enabled, started), without it
// (the timer stopped, disabled, removed; the reboot service left alone), and again without it
// (nothing to do: no daemon-reload, no enable, no start).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "agent/serve/health_server.h"
#include "base/clock.h"
#include "tests/agent/process_support.h"
#include "tests/fakes/systemd_bus.h"
#include "tests/kubesim/server/server.h"
#include "units/systemd_manager.h"

namespace ekco::agent {
namespace {

// The sd-bus waits run on real time (a dbus-daemon answers), so the job timeouts do too.
const base::SystemClock kClock;

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using testing::eventually;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A file's permission bits, or -1 when it is missing.
int modeOf(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

// The entry named `name` in /status host_units.units, or null.
json unitEntry(const json& status, const std::string& name) {
  for (const auto& u : status["host_units"].value("units", json::array())) {
    if (u.value("name", "") == name) return u;
  }
  return nullptr;
}

// The controller named `name` in /status, or null.
json controllerEntry(const json& status, const std::string& name) {
  for (const auto& c : status.value("controllers", json::array())) {
    if (c.value("name", "") == name) return c;
  }
  return nullptr;
}

class HostUnitsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-host-units-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    root_ = dir_ / "root";
    fs::create_directories(root_ / "usr/bin");
    fs::create_directories(root_ / "etc/kubernetes");
    // Only its presence matters: the units name /usr/bin/ekco, which systemd (here the mock)
    // would run.
    std::ofstream(root_ / "usr/bin/ekco") << "#!/bin/sh\nexit 0\n";
    fs::permissions(root_ / "usr/bin/ekco", fs::perms(0755));
    std::ofstream(root_ / "etc/kubernetes/kubelet.conf") << "# joined\n";

    const std::string why = bus_.start({.root = root_.string(),
                                        .work_dir = (dir_ / "bus").string(),
                                        .unit_dir = (root_ / "etc/systemd/system").string()});
    ASSERT_EQ(why, "");

    const json node = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "node-a"}}}};
    auto server = kubesim::Server::start(
        {.out_dir = (dir_ / "sim").string(), .objects = {kubesim::namespaceObject("kurl"), node}});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    testing::killAndReap(pid_);
    pid_ = -1;
    bus_.stop();
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  std::string socket() const { return (dir_ / "agent.sock").string(); }
  std::string logOf() const { return testing::readWholeFile((dir_ / "agent.log").string()); }

  // Starts `ekco agent` for node-a with `config` (YAML); returns the mock's log offset at that
  // moment (its calls from then on are this run's).
  std::size_t startAgent(const std::string& config) {
    const std::string path = (dir_ / "config.yaml").string();
    std::ofstream(path, std::ios::trunc) << config;
    const std::size_t from = bus_.logSize();
    std::ofstream(dir_ / "agent.log", std::ios::app) << "==== agent start\n";
    pid_ = testing::spawnLogged(
        {EKCO_BIN, "agent", "--config", path, "--kubeconfig", server_->kubeconfigPath(),
         "--node-name", "node-a", "--host-root", root_.string(), "--socket", socket()},
        (dir_ / "agent.log").string());
    EXPECT_GT(pid_, 0);
    return from;
  }

  // SIGTERM, and the exit status (-1: killed by a signal, or no exit within 60 s).
  int stopAgent() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    pid_t reaped = 0;
    eventually([&] { return (reaped = ::waitpid(pid_, &status, WNOHANG)) == pid_; }, seconds(60));
    if (reaped != pid_) {
      testing::killAndReap(pid_);
      pid_ = -1;
      return -1;
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::optional<json> status() {
    auto reply = queryHealthSocket(socket(), "/status", milliseconds(5000));
    if (!reply || reply->status != 200) return std::nullopt;
    auto parsed = json::parse(reply->body, nullptr, false);
    if (parsed.is_discarded()) return std::nullopt;
    return parsed;
  }

  // Waits until the host-units controller has finished a reconcile without error; returns the
  // /status of that moment.
  std::optional<json> afterHostUnitsReconciled() {
    std::optional<json> last;
    const bool ok = eventually(
        [&] {
          last = status();
          if (!last) return false;
          const json c = controllerEntry(*last, "host-units");
          return c.is_object() && c.value("runs", 0) >= 1 && c.value("errors", 0) == 0 &&
                 c.value("last_error", "").empty();
        },
        seconds(60));
    if (!ok) {
      ADD_FAILURE() << "host-units did not reconcile; /status: "
                    << (last ? last->dump(2) : std::string("(none)")) << "\nagent log:\n"
                    << logOf() << "\nmock log:\n"
                    << bus_.log();
      return std::nullopt;
    }
    return last;
  }

  // The mock's calls of the methods that change systemd, since `from`.
  std::vector<std::string> changingCalls(std::size_t from) const {
    std::vector<std::string> out;
    for (const char* m :
         {"Reload", "EnableUnitFiles", "DisableUnitFiles", "StartUnit", "StopUnit"}) {
      for (auto& c : bus_.calls(m, from)) out.push_back(std::move(c));
    }
    return out;
  }

  fs::path dir_;
  fs::path root_;
  fakes::SystemdBus bus_;
  std::unique_ptr<kubesim::Server> server_;
  pid_t pid_ = -1;
};

TEST_F(HostUnitsE2eTest, InstallsChangesAndLeavesAloneTheUnitsOverSdBus) {
  const fs::path unit_dir = root_ / "etc/systemd/system";

  // 1. With a schedule: the scripts and the three units written, daemon-reload, then the reboot
  // service and the timer enabled and started.
  std::size_t from = startAgent("auto_upgrade_schedule: \"Sat 17:30\"\n");
  auto s = afterHostUnitsReconciled();
  ASSERT_TRUE(s);
  EXPECT_THAT(bus_.calls("Reload", from), ElementsAre("Reload"));
  EXPECT_THAT(bus_.calls("EnableUnitFiles", from),
              ElementsAre(R"(EnableUnitFiles ["ekco-reboot.service"] False True)",
                          R"(EnableUnitFiles ["ekco-upgrade.timer"] False True)"));
  EXPECT_THAT(bus_.calls("StartUnit", from),
              ElementsAre(R"(StartUnit "ekco-reboot.service" "replace")",
                          R"(StartUnit "ekco-upgrade.timer" "replace")"));
  EXPECT_THAT(bus_.calls("StopUnit", from), IsEmpty());
  EXPECT_THAT(bus_.calls("DisableUnitFiles", from), IsEmpty());
  // In this order: the reload before the enables, each enable before its start.
  {
    const std::string log = bus_.log().substr(from);
    const auto reload = log.find(" Reload\n");
    const auto enable_reboot = log.find(R"(EnableUnitFiles ["ekco-reboot.service"])");
    const auto start_reboot = log.find(R"(StartUnit "ekco-reboot.service")");
    const auto enable_timer = log.find(R"(EnableUnitFiles ["ekco-upgrade.timer"])");
    const auto start_timer = log.find(R"(StartUnit "ekco-upgrade.timer")");
    EXPECT_LT(reload, enable_reboot);
    EXPECT_LT(enable_reboot, start_reboot);
    EXPECT_LT(start_reboot, enable_timer);
    EXPECT_LT(enable_timer, start_timer);
  }
  EXPECT_EQ(modeOf(root_ / "opt/ekco/startup.sh"), 0755);
  EXPECT_EQ(modeOf(root_ / "opt/ekco/shutdown.sh"), 0755);
  EXPECT_EQ(modeOf(unit_dir / "ekco-reboot.service"), 0644);
  EXPECT_EQ(modeOf(unit_dir / "ekco-upgrade.service"), 0644);
  EXPECT_EQ(modeOf(unit_dir / "ekco-upgrade.timer"), 0644);
  EXPECT_THAT(testing::readWholeFile((root_ / "opt/ekco/shutdown.sh").string()),
              HasSubstr("exec /usr/bin/ekco shutdown"));
  EXPECT_THAT(testing::readWholeFile((unit_dir / "ekco-reboot.service").string()),
              HasSubstr("ExecStop=/usr/bin/ekco shutdown\n"));
  EXPECT_THAT(testing::readWholeFile((unit_dir / "ekco-upgrade.timer").string()),
              HasSubstr("OnCalendar=Sat *-*-* 17:30:00\n"));

  // /status: both units enabled and active, and the timer's next run (the mock computes it from
  // the timer file's OnCalendar=, in local time: a Saturday, 17:30).
  {
    const json& hu = (*s)["host_units"];
    EXPECT_EQ(hu.value("problem", "?"), "") << hu.dump(2);
    EXPECT_EQ(hu.value("bin", ""), "/usr/bin/ekco");
    ASSERT_EQ(hu["units"].size(), 3U) << hu.dump(2);
    const json reboot = unitEntry(*s, "ekco-reboot.service");
    ASSERT_TRUE(reboot.is_object()) << hu.dump(2);
    EXPECT_EQ(reboot.value("file_state", ""), "enabled");
    EXPECT_EQ(reboot.value("active_state", ""), "active");
    EXPECT_FALSE(reboot.contains("next_elapse_usec"));
    const json timer = unitEntry(*s, "ekco-upgrade.timer");
    ASSERT_TRUE(timer.is_object()) << hu.dump(2);
    EXPECT_EQ(timer.value("file_state", ""), "enabled");
    EXPECT_EQ(timer.value("active_state", ""), "active");
    ASSERT_TRUE(timer.contains("next_elapse_usec")) << hu.dump(2);
    const auto next_usec = timer["next_elapse_usec"].get<std::uint64_t>();
    const auto now_usec =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count());
    EXPECT_GT(next_usec, now_usec);
    EXPECT_LE(next_usec, now_usec + 7ULL * 24 * 3600 * 1000000);
    const time_t next_secs = static_cast<time_t>(next_usec / 1000000);
    struct tm local {};
    ASSERT_NE(::localtime_r(&next_secs, &local), nullptr);
    EXPECT_EQ(local.tm_wday, 6);  // Saturday
    EXPECT_EQ(local.tm_hour, 17);
    EXPECT_EQ(local.tm_min, 30);
    // The upgrade service is only triggered by the timer: not enabled, not started.
    const json service = unitEntry(*s, "ekco-upgrade.service");
    ASSERT_TRUE(service.is_object()) << hu.dump(2);
    EXPECT_EQ(service.value("file_state", ""), "disabled");
    EXPECT_EQ(service.value("active_state", ""), "inactive");
  }
  ASSERT_EQ(stopAgent(), 0) << logOf();

  // 2. The schedule removed: the timer stopped, both upgrade units disabled, their files removed,
  // daemon-reload; the reboot service is neither stopped nor touched.
  from = startAgent("disable_reboot_service: false\n");
  s = afterHostUnitsReconciled();
  ASSERT_TRUE(s);
  EXPECT_THAT(bus_.calls("StopUnit", from),
              ElementsAre(R"(StopUnit "ekco-upgrade.timer" "replace")"));
  EXPECT_THAT(
      bus_.calls("DisableUnitFiles", from),
      ElementsAre(R"(DisableUnitFiles ["ekco-upgrade.service", "ekco-upgrade.timer"] False)"));
  EXPECT_THAT(bus_.calls("Reload", from), ElementsAre("Reload"));
  EXPECT_THAT(bus_.calls("EnableUnitFiles", from), IsEmpty());
  EXPECT_THAT(bus_.calls("StartUnit", from), IsEmpty());
  {
    const std::string log = bus_.log().substr(from);
    EXPECT_LT(log.find("StopUnit "), log.find("DisableUnitFiles "));
    EXPECT_LT(log.find("DisableUnitFiles "), log.find(" Reload\n"));
  }
  EXPECT_FALSE(fs::exists(unit_dir / "ekco-upgrade.timer"));
  EXPECT_FALSE(fs::exists(unit_dir / "ekco-upgrade.service"));
  EXPECT_EQ(modeOf(unit_dir / "ekco-reboot.service"), 0644);
  EXPECT_EQ(modeOf(root_ / "opt/ekco/startup.sh"), 0755);
  EXPECT_EQ(modeOf(root_ / "opt/ekco/shutdown.sh"), 0755);
  {
    const json& hu = (*s)["host_units"];
    EXPECT_EQ(hu.value("problem", "?"), "") << hu.dump(2);
    ASSERT_EQ(hu["units"].size(), 1U) << hu.dump(2);
    const json reboot = unitEntry(*s, "ekco-reboot.service");
    ASSERT_TRUE(reboot.is_object()) << hu.dump(2);
    EXPECT_EQ(reboot.value("file_state", ""), "enabled");
    EXPECT_EQ(reboot.value("active_state", ""), "active");
  }
  // What systemd (the mock) now says, read over our own connection.
  {
    auto systemd = units::connectSystemd(units::systemBusAddress(root_.string()), kClock);
    ASSERT_TRUE(systemd) << systemd.error().message();
    auto timer = (*systemd)->unitState("ekco-upgrade.timer");
    ASSERT_TRUE(timer) << timer.error().message();
    EXPECT_EQ(timer->load_state, "not-found");  // its file is gone since the daemon-reload
    EXPECT_EQ(timer->active_state, "inactive");
    EXPECT_EQ(timer->unit_file_state, "disabled");
    auto reboot = (*systemd)->unitState("ekco-reboot.service");
    ASSERT_TRUE(reboot) << reboot.error().message();
    EXPECT_EQ(reboot->load_state, "loaded");
    EXPECT_EQ(reboot->active_state, "active");
  }
  ASSERT_EQ(stopAgent(), 0) << logOf();

  // 3. The same config again: nothing changed, so systemd is not told anything.
  from = startAgent("disable_reboot_service: false\n");
  s = afterHostUnitsReconciled();
  ASSERT_TRUE(s);
  EXPECT_THAT(changingCalls(from), IsEmpty());
  EXPECT_EQ((*s)["host_units"].value("problem", "?"), "");
  const json reboot = unitEntry(*s, "ekco-reboot.service");
  ASSERT_TRUE(reboot.is_object()) << s->dump(2);
  EXPECT_EQ(reboot.value("active_state", ""), "active");
  EXPECT_EQ(controllerEntry(*s, "host-units").value("last_result", ""), "units up to date");
  ASSERT_EQ(stopAgent(), 0) << logOf();

  // Over all three runs, ekco-reboot.service was never stopped (its stop job drains the node).
  EXPECT_THAT(bus_.log(), ::testing::Not(HasSubstr(R"(StopUnit "ekco-reboot.service")")));
}

}  // namespace
}  // namespace ekco::agent
