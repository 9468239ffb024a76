// Maintenance mode's stored form (agent/maintenance/maintenance.h): what a ConfigMap means, and how
// the on/off calls write it and record Events, against the fake API.
#include "agent/maintenance/maintenance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/decode/timestamp.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::hours;
using std::chrono::seconds;

base::WallTime at(const char* text) { return *kube::parseRfc3339(text); }

json configMap(json data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "ekco-maintenance"}, {"namespace", "kurl"}}},
          {"data", std::move(data)}};
}

TEST(Maintenance, AbsentIsOffPresentIsOnUntilItsExpiry) {
  EXPECT_FALSE(parseMaintenance(nullptr).activeAt(at("2026-01-01T00:00:00Z")));
  const MaintenanceState s = parseMaintenance(configMap({{"reason", "storage migration"},
                                                         {"since", "2026-01-01T00:00:00Z"},
                                                         {"until", "2026-01-01T01:00:00Z"},
                                                         {"by", "ekco maintenance on"}}));
  EXPECT_TRUE(s.activeAt(at("2026-01-01T00:59:59Z")));
  EXPECT_FALSE(s.activeAt(at("2026-01-01T01:00:00Z")));
  EXPECT_TRUE(s.expiredAt(at("2026-01-01T01:00:00Z")));
  EXPECT_EQ(s.reasonText(), "storage migration");
  EXPECT_EQ(describeMaintenance(s, at("2026-01-01T00:30:00Z")),
            "on (storage migration), since 2026-01-01T00:00:00Z, until 2026-01-01T01:00:00Z, by "
            "ekco maintenance on");
  EXPECT_THAT(describeMaintenance(s, at("2026-01-01T02:00:00Z")),
              ::testing::StartsWith("off (expired at 2026-01-01T01:00:00Z"));
  const json j = maintenanceJson(s, at("2026-01-01T00:30:00Z"));
  EXPECT_EQ(j["on"], true);
  EXPECT_EQ(j["until"], "2026-01-01T01:00:00Z");
  EXPECT_EQ(j["expired"], false);
}

TEST(Maintenance, NoDataMeansOnWithoutExpiryAndABadExpiryStaysOnWithTheProblem) {
  const MaintenanceState bare = parseMaintenance(configMap(nullptr));
  EXPECT_TRUE(bare.activeAt(at("2030-01-01T00:00:00Z")));
  EXPECT_EQ(bare.reasonText(), "no reason given");
  const MaintenanceState bad = parseMaintenance(configMap({{"until", "tomorrow"}}));
  EXPECT_TRUE(bad.activeAt(at("2030-01-01T00:00:00Z")));
  EXPECT_EQ(bad.reasonText(),
            "ekco-maintenance has an unreadable until \"tomorrow\" (on until turned off)");
}

TEST(Maintenance, OnWritesTheConfigMapAndAnEventAgainReplacesItOffDeletesIt) {
  kube::testing::FakeKube kube;
  base::ManualClock clock;
  clock.setWall(at("2026-01-01T00:00:00Z"));
  auto on = enterMaintenance(kube, "kurl", {.reason = "upgrade", .duration = hours(1), .by = "me"},
                             clock);
  ASSERT_TRUE(on) << on.error().message();
  auto read = readMaintenance(kube, "kurl");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->reason, "upgrade");
  EXPECT_EQ(read->until, at("2026-01-01T01:00:00Z"));
  EXPECT_TRUE(read->activeAt(clock.wallNow()));

  // Longer than a year is refused and changes nothing (285 years wrapped the expiry into 1727).
  auto too_long = enterMaintenance(
      kube, "kurl", {.reason = "typo", .duration = hours(2'500'000), .by = "me"}, clock);
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().message(), "maintenance: the duration 2500000h is longer than 8784h");
  EXPECT_EQ(readMaintenance(kube, "kurl")->reason, "upgrade");

  // Again, without --for: replaced, no expiry.
  ASSERT_TRUE(enterMaintenance(kube, "kurl", {.reason = "longer"}, clock));
  read = readMaintenance(kube, "kurl");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->reason, "longer");
  EXPECT_EQ(read->until, std::nullopt);

  auto off = leaveMaintenance(kube, "kurl", "me");
  ASSERT_TRUE(off);
  EXPECT_TRUE(*off);
  read = readMaintenance(kube, "kurl");
  ASSERT_TRUE(read);
  EXPECT_FALSE(read->present);
  off = leaveMaintenance(kube, "kurl", "me");  // already off: fine, no Event
  ASSERT_TRUE(off);
  EXPECT_FALSE(*off);

  std::vector<std::string> reasons;
  for (const auto& e : kube.events()) reasons.push_back(e.reason);
  EXPECT_THAT(reasons, ::testing::ElementsAre("MaintenanceOn", "MaintenanceOn", "MaintenanceOff"));
  EXPECT_FALSE(enterMaintenance(kube, "kurl", {.duration = seconds(0)}, clock));
}

}  // namespace
}  // namespace ekco::agent
