// The drain marker that keeps the agent's drain (logind's inhibitor) and ekco-reboot.service's
// stop job from ever draining together (agent/features/reboot/shutdown_drain.h).
#include "agent/features/reboot/shutdown_drain.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "base/clock.h"
#include "hostfs/local_host_fs.h"

namespace ekco::agent {
namespace {

constexpr const char* kBoot = "0f6a3b2c-1d4e-4f5a-8b9c-0d1e2f3a4b5c";
constexpr const char* kOtherBoot = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

TEST(ShutdownMarker, FormatsAndParsesEveryState) {
  for (const ShutdownMarker& m :
       {ShutdownMarker{.state = DrainState::kDraining, .pid = 4242, .boot_id = kBoot},
        ShutdownMarker{.state = DrainState::kDrained, .pid = 0, .boot_id = kBoot},
        ShutdownMarker{.state = DrainState::kFailed, .pid = 0, .boot_id = kBoot}}) {
    const std::string text = formatShutdownMarker(m);
    auto parsed = parseShutdownMarker(text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(*parsed, m) << text;
  }
  EXPECT_EQ(formatShutdownMarker({.state = DrainState::kDraining, .pid = 7, .boot_id = kBoot}),
            std::string("draining pid=7 boot_id=") + kBoot + "\n");
}

TEST(ShutdownMarker, AnythingButAWholeWellFormedLineIsNoMarker) {
  for (const char* text :
       {"", "drained", "drained boot_id=", "drained boot_id=x y\n",
        "drained boot_id=0f6a", /* torn: no newline */
        "drained boot_id=0f6a\nmore\n", "draining boot_id=0f6a\n", "draining pid=0 boot_id=0f6a\n",
        "draining pid=-3 boot_id=0f6a\n", "draining pid=12x boot_id=0f6a\n",
        "finished boot_id=0f6a\n", "drained boot_id=0F6A\n", "drained  boot_id=0f6a\n"}) {
    EXPECT_FALSE(parseShutdownMarker(text)) << text;
  }
}

TEST(StopJobAction, SkipsOnlyAThisBootDrainAndWaitsOnlyForALiveDrainingAgent) {
  const auto marker = [](DrainState s, const char* boot) {
    return std::optional<ShutdownMarker>(ShutdownMarker{.state = s, .pid = 99, .boot_id = boot});
  };
  struct Case {
    std::optional<ShutdownMarker> marker;
    std::string boot;
    bool alive;
    StopJobAction want;
  };
  const Case cases[] = {
      {std::nullopt, kBoot, false, StopJobAction::kDrain},
      {marker(DrainState::kDrained, kBoot), kBoot, false, StopJobAction::kSkip},
      {marker(DrainState::kDrained, kOtherBoot), kBoot, false, StopJobAction::kDrain},
      {marker(DrainState::kDrained, kBoot), "", false, StopJobAction::kDrain},  // boot unknown
      {marker(DrainState::kFailed, kBoot), kBoot, false, StopJobAction::kDrain},
      {marker(DrainState::kDraining, kBoot), kBoot, true, StopJobAction::kWait},
      {marker(DrainState::kDraining, kBoot), kBoot, false, StopJobAction::kDrain},  // agent died
      {marker(DrainState::kDraining, kOtherBoot), kBoot, true, StopJobAction::kDrain},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(stopJobAction(c.marker, c.boot, c.alive), c.want)
        << (c.marker ? formatShutdownMarker(*c.marker) : "none") << " boot=" << c.boot
        << " alive=" << c.alive;
  }
}

TEST(ShutdownMarker, WrittenReadAndRemovedUnderTheHostRoot) {
  char tmpl[] = "/tmp/ekco-drain-marker-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string root = tmpl;
  base::SystemClock clock;
  auto fs = hostfs::LocalHostFs::open(root, clock);
  ASSERT_TRUE(fs) << fs.error().message();
  auto none = readShutdownMarker(**fs);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  const ShutdownMarker m{.state = DrainState::kDrained, .pid = 0, .boot_id = kBoot};
  ASSERT_TRUE(writeShutdownMarker(**fs, m));  // creates /run/ekco
  std::ifstream in(root + "/run/ekco/shutdown-drain");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, std::string("drained boot_id=") + kBoot);
  auto read = readShutdownMarker(**fs);
  ASSERT_TRUE(read);
  ASSERT_TRUE(*read);
  EXPECT_EQ(**read, m);
  ASSERT_TRUE(removeShutdownMarker(**fs));
  ASSERT_TRUE(removeShutdownMarker(**fs));  // absent: not an error
  EXPECT_FALSE(std::filesystem::exists(root + "/run/ekco/shutdown-drain"));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ekco::agent
