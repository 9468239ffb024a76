// Unit rendering: golden files, validation, and the real `systemd-analyze verify` (no warnings)
// and `systemd-analyze calendar` on what is rendered.
#include "units/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::units {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Compares with tests/testdata/units/<name>; EKCO_UPDATE_GOLDEN=1 rewrites it.
void expectGolden(const std::string& actual, const std::string& name) {
  const auto path = std::filesystem::path(EKCO_TESTDATA_DIR) / "units" / name;
  if (const char* update = std::getenv("EKCO_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing (EKCO_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, readFile(path)) << "golden " << path;
}

const RenderedFile* find(const std::vector<RenderedFile>& files, std::string_view path) {
  for (const auto& f : files) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

TEST(RenderHostUnits, DefaultsAreTheWrappersAndTheRebootService) {
  auto files = renderHostUnits({});
  ASSERT_TRUE(files) << files.error().message();
  ASSERT_EQ(files->size(), 3U);
  EXPECT_EQ((*files)[0].path, "/opt/ekco/startup.sh");
  EXPECT_EQ((*files)[0].mode, 0755U);
  EXPECT_EQ((*files)[1].path, "/opt/ekco/shutdown.sh");
  EXPECT_EQ((*files)[2].path, "/etc/systemd/system/ekco-reboot.service");
  EXPECT_EQ((*files)[2].mode, 0644U);
  expectGolden((*files)[0].content, "startup.sh");
  expectGolden((*files)[1].content, "shutdown.sh");
  expectGolden((*files)[2].content, "ekco-reboot.service");
  EXPECT_THAT((*files)[1].content, HasSubstr("exec /usr/bin/ekco shutdown \"$@\"\n"));
}

TEST(RenderHostUnits, AScheduleAddsTheUpgradeServiceAndTimer) {
  auto files = renderHostUnits({.upgrade_schedule = "Sat 17:30"});
  ASSERT_TRUE(files) << files.error().message();
  ASSERT_EQ(files->size(), 5U);
  const RenderedFile* service = find(*files, "/etc/systemd/system/ekco-upgrade.service");
  const RenderedFile* timer = find(*files, "/etc/systemd/system/ekco-upgrade.timer");
  ASSERT_TRUE(service && timer);
  expectGolden(service->content, "ekco-upgrade.service");
  expectGolden(timer->content, "ekco-upgrade.timer");
  EXPECT_THAT(timer->content, HasSubstr("\nOnCalendar=Sat *-*-* 17:30:00\nPersistent=true\n"));
}

TEST(RenderHostUnits, OptionsReachTheFiles) {
  auto files = renderHostUnits({.bin = "/opt/ekco/bin/ekco-1.2",
                                .reboot_service = false,
                                .upgrade_schedule = "daily",
                                .startup_bound = std::chrono::seconds(30),
                                .shutdown_bound = std::chrono::seconds(120)});
  ASSERT_TRUE(files) << files.error().message();
  EXPECT_EQ(find(*files, "/etc/systemd/system/ekco-reboot.service"), nullptr);
  EXPECT_THAT(find(*files, "/etc/systemd/system/ekco-upgrade.service")->content,
              HasSubstr("ExecStart=/opt/ekco/bin/ekco-1.2 upgrade\n"));
  EXPECT_THAT(find(*files, "/opt/ekco/startup.sh")->content,
              HasSubstr("exec /opt/ekco/bin/ekco-1.2 startup"));
  auto with_reboot = renderHostUnits(
      {.startup_bound = std::chrono::seconds(30), .shutdown_bound = std::chrono::seconds(120)});
  ASSERT_TRUE(with_reboot);
  const std::string& unit = find(*with_reboot, "/etc/systemd/system/ekco-reboot.service")->content;
  EXPECT_THAT(unit, HasSubstr("TimeoutStartSec=90\n"));  // 30 s + the 60 s margin
  EXPECT_THAT(unit, HasSubstr("TimeoutStopSec=180\n"));
}

TEST(RenderHostUnits, RefusesBadValuesWithOneLine) {
  for (const char* bin : {"ekco", "", "/usr/bin/ekco --flag", "/usr/bin/ek%nco", "/usr/bin/$x",
                          "/usr/bin/ekco\nExecStartPre=/bin/rm", "/usr/../bin/ekco", "/a\"b"}) {
    auto files = renderHostUnits({.bin = bin});
    ASSERT_FALSE(files) << bin;
    EXPECT_EQ(files.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(files.error().message(), StartsWith("invalid ekco binary path \""));
    EXPECT_EQ(files.error().message().find('\n'), std::string::npos);
  }
  auto bad_schedule = renderHostUnits({.upgrade_schedule = "Sat 25:99"});
  ASSERT_FALSE(bad_schedule);
  EXPECT_THAT(bad_schedule.error().message(),
              StartsWith("auto_upgrade_schedule: invalid calendar"));
  auto newline = renderHostUnits({.upgrade_schedule = "daily\n[Service]"});
  ASSERT_FALSE(newline);
  EXPECT_EQ(newline.error().message().find('\n'), std::string::npos);
  EXPECT_FALSE(renderHostUnits({.shutdown_bound = std::chrono::seconds(0)}));
}

TEST(RenderHostUnits, ManagedPathsCoverEveryRenderedFile) {
  auto files = renderHostUnits({.upgrade_schedule = "weekly"});
  ASSERT_TRUE(files);
  const auto managed = managedUnitPaths();
  for (const auto& f : *files) {
    EXPECT_NE(std::find(managed.begin(), managed.end(), f.path), managed.end()) << f.path;
  }
  EXPECT_EQ(managed.size(), files->size());
}

// --- the real systemd-analyze

constexpr const char* kSystemdAnalyze = "/usr/bin/systemd-analyze";

struct ToolRun {
  bool ok = false;
  std::string out{};
  std::string err{};
};

ToolRun run(std::vector<std::string> argv) {
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  auto r = runner.run({.argv = std::move(argv), .timeout = std::chrono::seconds(60)});
  if (!r) return {.ok = false, .out = {}, .err = r.error().message()};
  return {.ok = r->success(), .out = r->stdout_data, .err = r->stderr_data};
}

class SystemdAnalyze : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kSystemdAnalyze)) GTEST_SKIP() << "no systemd-analyze";
    std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-units-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

TEST_F(SystemdAnalyze, EveryRenderedUnitVerifiesWithoutWarnings) {
  // verify checks that ExecStart's binary exists and is executable: use one that does.
  for (const char* schedule : {"Sat 17:30", "daily", "Mon..Fri *-*-* 02:00:00 Europe/Berlin"}) {
    auto files = renderHostUnits({.bin = "/usr/bin/true", .upgrade_schedule = schedule});
    ASSERT_TRUE(files) << files.error().message();
    std::vector<std::string> argv = {kSystemdAnalyze, "verify"};
    for (const auto& f : *files) {
      if (!f.path.starts_with("/etc/systemd/system/")) continue;
      const auto path = dir_ / std::filesystem::path(f.path).filename();
      std::ofstream(path, std::ios::binary) << f.content;
      argv.push_back(path.string());
    }
    ASSERT_EQ(argv.size(), 5U);
    ToolRun r = run(argv);
    EXPECT_TRUE(r.ok) << schedule << ": " << r.err;
    // Unknown keys are only warnings with exit 0: stderr must be empty too.
    EXPECT_EQ(r.err, "") << schedule;
  }
}

TEST_F(SystemdAnalyze, ThePackagedAgentUnitVerifiesAndWaitsForTheNodesKubeconfig) {
  std::ifstream in(std::string(EKCO_SOURCE_DIR) + "/packaging/systemd/ekco-agent.service");
  std::string unit((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(unit.empty());
  // Not before kubeadm join wrote the kubeconfig (no restart loop on an unjoined image).
  EXPECT_THAT(unit, HasSubstr("\nConditionPathExists=/etc/kubernetes/kubelet.conf\n"));
  // Started means started (READY=1 does not wait for the API): no start timeout of its own.
  EXPECT_THAT(unit, HasSubstr("\nType=notify\n"));
  EXPECT_THAT(unit, Not(HasSubstr("TimeoutStartSec=")));
  const std::string bin = "ExecStart=/usr/bin/ekco ";
  const auto at = unit.find(bin);
  ASSERT_NE(at, std::string::npos);
  unit.replace(at, bin.size(), "ExecStart=/usr/bin/true ");  // verify wants it to exist
  const auto path = dir_ / "ekco-agent.service";
  std::ofstream(path, std::ios::binary) << unit;
  ToolRun r = run({kSystemdAnalyze, "verify", path.string()});
  EXPECT_TRUE(r.ok) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(SystemdAnalyze, TheWrappersAreValidShellScripts) {
  auto files = renderHostUnits({});
  ASSERT_TRUE(files);
  for (const auto& f : *files) {
    if (!f.path.ends_with(".sh")) continue;
    const auto path = dir_ / std::filesystem::path(f.path).filename();
    std::ofstream(path, std::ios::binary) << f.content;
    ToolRun r = run({"/bin/sh", "-n", path.string()});
    EXPECT_TRUE(r.ok) << f.path << ": " << r.err;
  }
}

TEST_F(SystemdAnalyze, TheTimersCalendarIsWhatSystemdNormalizesTo) {
  for (const char* schedule : {"Sat 17:30", "weekly", "*-*-1 03:00", "Sun 04:00 UTC"}) {
    auto files = renderHostUnits({.upgrade_schedule = schedule});
    ASSERT_TRUE(files);
    const std::string& timer = find(*files, "/etc/systemd/system/ekco-upgrade.timer")->content;
    const auto at = timer.find("OnCalendar=") + std::string("OnCalendar=").size();
    const std::string rendered = timer.substr(at, timer.find('\n', at) - at);
    ToolRun r = run({kSystemdAnalyze, "calendar", schedule});
    ASSERT_TRUE(r.ok) << r.err;
    EXPECT_THAT(r.out, HasSubstr("Normalized form: " + rendered + "\n")) << schedule;
  }
}

}  // namespace
}  // namespace ekco::units
