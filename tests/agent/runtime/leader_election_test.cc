// The leader elector: client-go's Lease semantics against the in-memory API with its
// resourceVersion semantics (ManualClock: instant, deterministic). (leader_election_sim_test.cc
// runs three electors against ekco-kubesim over HTTPS with real RestClients.)
#include "agent/runtime/leader_election.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "kube/decode/timestamp.h"
#include "tests/agent/runtime/leader_election_support.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using base::Error;
using base::ErrorCode;
using kube::Json;
using kube::testing::FakeKube;
using kube::testing::Verb;
using std::chrono::hours;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::elector;
using testing::Events;
using testing::Recorder;

using Events = std::vector<std::string>;

const base::WallTime kStart = base::WallTime(seconds(1'700'000'000) + microseconds(123456));

// A step that must not fail; returns whether we lead.
bool step(LeaderElector& e) {
  auto r = e.tryAcquireOrRenew();
  EXPECT_TRUE(r) << r.error().message();
  return r.value_or(false);
}

Json leaseObject(const std::string& holder, const std::string& renew_time,
                 std::int64_t duration_seconds = 15, std::int64_t transitions = 3) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "ekco-leader"}, {"namespace", "kurl"}}},
          {"spec",
           {{"holderIdentity", holder},
            {"leaseDurationSeconds", duration_seconds},
            {"acquireTime", renew_time},
            {"renewTime", renew_time},
            {"leaseTransitions", transitions}}}};
}

// The elector against the in-memory API (tests/fakes/fake_kube.h): resourceVersion on every
// write, kConflict on a stale one, kAlreadyExists, kNotFound; faults and hooks for races.
class LeaderElectionTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // The elector touches nothing but its Lease.
    for (const auto& call : kube_.calls()) {
      EXPECT_EQ(call.resource, kube::resources::kLeases);
      EXPECT_EQ(call.ns, "kurl");
    }
  }

  std::optional<Json> storedLease() const {
    return kube_.object(kube::resources::kLeases, "kurl", "ekco-leader");
  }
  Json spec() { return storedLease().value()["spec"]; }
  // Direct writes, as kubectl would make them.
  void put(Json object) { kube_.put(kube::resources::kLeases, std::move(object)); }
  void putRaw(Json object) {
    kube_.putRaw(kube::resources::kLeases, "kurl", "ekco-leader", std::move(object));
  }
  void erase() { kube_.erase(kube::resources::kLeases, "kurl", "ekco-leader"); }

  FakeKube kube_;
  base::ManualClock clock_{kStart};
};

TEST(LeaseIdentity, IsTheNodeNamePlusASuffixUniqueToTheProcess) {
  const std::string a = leaseIdentity("node-a");
  const std::string b = leaseIdentity("node-a");
  EXPECT_THAT(a, ::testing::MatchesRegex("node-a_[0-9a-f]{16}"));
  EXPECT_NE(a, b);
  EXPECT_EQ(leaseHolderNode(a), "node-a");
  EXPECT_EQ(leaseHolderNode("node-a"), "node-a");  // EKCO's bare node name
  EXPECT_EQ(leaseHolderNode(""), "");
}

TEST_F(LeaderElectionTest, FirstAgentCreatesTheLeaseAndLeads) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  EXPECT_FALSE(a->isLeader());
  EXPECT_FALSE(a->isLeaderFresh());

  EXPECT_TRUE(step(*a));
  EXPECT_TRUE(a->isLeader());
  EXPECT_TRUE(a->isLeaderFresh());
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started"}));

  auto lease = storedLease();
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ((*lease)["kind"], "Lease");
  EXPECT_EQ((*lease)["metadata"]["namespace"], "kurl");
  EXPECT_EQ(spec(), (Json{{"holderIdentity", "node-a"},
                          {"leaseDurationSeconds", 15},
                          {"acquireTime", "2023-11-14T22:13:20.123456Z"},
                          {"renewTime", "2023-11-14T22:13:20.123456Z"},
                          {"leaseTransitions", 0}}));
  auto s = a->status();
  EXPECT_EQ(s.holder, "node-a");
  EXPECT_TRUE(s.is_leader);
  EXPECT_TRUE(s.is_fresh);
  EXPECT_EQ(s.transitions, 0);
  EXPECT_EQ(s.renew_time, kStart);
  EXPECT_EQ(s.acquire_time, kStart);
  EXPECT_EQ(s.resource_version, (*lease)["metadata"]["resourceVersion"]);
  EXPECT_EQ(s.last_error, "");
}

TEST_F(LeaderElectionTest, LeaderRenewsWithOnePutKeepingAcquireTimeAndTransitions) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  const int before = kube_.callCount();
  for (int i = 0; i < 10; ++i) {
    clock_.advance(seconds(2));
    ASSERT_TRUE(step(*a));
  }
  EXPECT_EQ(kube_.count(Verb::kUpdate), 10);
  EXPECT_EQ(kube_.callCount() - before, 10);  // the fast path: no GET while leading
  EXPECT_EQ(spec()["acquireTime"], "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(spec()["renewTime"], "2023-11-14T22:13:40.123456Z");
  EXPECT_EQ(spec()["leaseTransitions"], 0);
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started"}));
}

TEST_F(LeaderElectionTest, DurationsAreWrittenInWholeSecondsRoundedUp) {
  auto a = elector(kube_, clock_, "node-a", nullptr,
                   {.lease_duration = milliseconds(7001),
                    .renew_deadline = milliseconds(5000),
                    .retry_period = milliseconds(1000)});
  ASSERT_TRUE(step(*a));
  EXPECT_EQ(spec()["leaseDurationSeconds"], 8);
}

TEST_F(LeaderElectionTest, SecondAgentDoesNotTakeAFreshLease) {
  Recorder rec_b;
  auto a = elector(kube_, clock_, "node-a");
  auto b = elector(kube_, clock_, "node-b", &rec_b);
  ASSERT_TRUE(step(*a));
  // A renews every 2 s for a minute; B tries every 2 s too.
  for (int i = 0; i < 30; ++i) {
    EXPECT_FALSE(step(*b));
    clock_.advance(seconds(2));
    EXPECT_TRUE(step(*a));
  }
  EXPECT_FALSE(b->isLeader());
  EXPECT_EQ(rec_b.take(), (Events{"leader node-a"}));
  EXPECT_EQ(b->status().holder, "node-a");
  EXPECT_EQ(spec()["holderIdentity"], "node-a");
  EXPECT_EQ(spec()["leaseTransitions"], 0);

  // Even without renewals, not before lease_duration has passed since B saw it change.
  clock_.advance(milliseconds(14999));
  EXPECT_FALSE(step(*b));
  EXPECT_EQ(spec()["holderIdentity"], "node-a");
}

TEST_F(LeaderElectionTest, ContentionOnUpdateExactlyOneLeadsAndTheLoserSeesAConflict) {
  // A released Lease: both may take it at once.
  put(leaseObject("", "2023-11-14T22:00:00.000000Z"));
  Recorder rec_a, rec_b;
  auto a = elector(kube_, clock_, "node-a", &rec_a);
  auto b = elector(kube_, clock_, "node-b", &rec_b);
  // B reads and writes between A's read and A's write.
  kube_.afterNext(Verb::kGet, [&] { EXPECT_TRUE(step(*b)); });
  const int before = kube_.callCount();
  auto r = a->tryAcquireOrRenew();
  ASSERT_TRUE(r) << r.error().message();  // a lost race is not an error
  EXPECT_FALSE(*r);
  EXPECT_EQ(kube_.callCount() - before, 4);  // A: get + update; B: get + update
  EXPECT_FALSE(a->isLeader());
  EXPECT_TRUE(b->isLeader());
  EXPECT_NE(a->status().last_error.find("Conflict"), std::string::npos) << a->status().last_error;
  EXPECT_EQ(rec_a.count("started"), 0);
  EXPECT_EQ(spec()["holderIdentity"], "node-b");
  EXPECT_EQ(spec()["leaseTransitions"], 4);

  // A's next step reads B's fresh claim and leaves it alone.
  EXPECT_FALSE(step(*a));
  EXPECT_EQ(a->status().holder, "node-b");
  EXPECT_EQ(a->status().last_error, "");
}

TEST_F(LeaderElectionTest, ContentionOnCreateTheLoserSeesAlreadyExists) {
  auto a = elector(kube_, clock_, "node-a");
  auto b = elector(kube_, clock_, "node-b");
  kube_.afterNext(Verb::kGet, [&] { EXPECT_TRUE(step(*b)); });
  auto r = a->tryAcquireOrRenew();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(*r);
  EXPECT_FALSE(a->isLeader());
  EXPECT_TRUE(b->isLeader());
  EXPECT_NE(a->status().last_error.find("AlreadyExists"), std::string::npos);
  EXPECT_EQ(kube_.count(Verb::kCreate), 2);
  EXPECT_EQ(spec()["holderIdentity"], "node-b");
}

TEST_F(LeaderElectionTest, ContentionFromThreadsLeavesExactlyOneLeader) {
  auto a = elector(kube_, clock_, "node-a");
  auto b = elector(kube_, clock_, "node-b");
  std::atomic<int> both{0};
  auto loop = [&](LeaderElector& self, LeaderElector& other) {
    for (int i = 0; i < 200; ++i) {
      static_cast<void>(self.tryAcquireOrRenew());
      if (self.isLeader() && other.isLeader()) both++;
    }
  };
  std::thread ta(loop, std::ref(*a), std::ref(*b));
  std::thread tb(loop, std::ref(*b), std::ref(*a));
  ta.join();
  tb.join();
  EXPECT_EQ(both.load(), 0);
  EXPECT_NE(a->isLeader(), b->isLeader());
  EXPECT_EQ(spec()["holderIdentity"], a->isLeader() ? "node-a" : "node-b");
  EXPECT_EQ(spec()["leaseTransitions"], 0);  // the creator kept it: nothing expired
}

TEST_F(LeaderElectionTest, ExpiresOnTheMonotonicClockAndTheTakeoverCountsATransition) {
  Recorder rec_a, rec_b;
  auto a = elector(kube_, clock_, "node-a", &rec_a);
  auto b = elector(kube_, clock_, "node-b", &rec_b);
  ASSERT_TRUE(step(*a));
  EXPECT_FALSE(step(*b));  // B observes A's record now
  // A stops renewing (hung, partitioned).
  clock_.advance(seconds(10));
  EXPECT_FALSE(a->isLeaderFresh());  // A's own fencing ends at renew_deadline...
  clock_.advance(milliseconds(4999));
  EXPECT_FALSE(step(*b));  // ...well before B may take over.
  clock_.advance(milliseconds(1));
  EXPECT_TRUE(step(*b));
  EXPECT_EQ(spec()["holderIdentity"], "node-b");
  EXPECT_EQ(spec()["leaseTransitions"], 1);
  EXPECT_EQ(spec()["acquireTime"], kube::formatRfc3339Micro(clock_.wallNow()));
  EXPECT_EQ(b->status().transitions, 1);
  EXPECT_EQ(rec_b.take(), (Events{"leader node-a", "leader node-b", "started"}));

  // A wakes up: its term is over, and the Lease is B's.
  auto r = a->tryAcquireOrRenew();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(*r);
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(rec_a.take(), (Events{"leader node-a", "started", "stopped", "leader node-b"}));
  EXPECT_EQ(spec()["holderIdentity"], "node-b");
}

TEST_F(LeaderElectionTest, HonoursTheRecordsLeaseDurationOfAnotherHolder) {
  // The holder promised 40 s (its config differs from ours).
  put(leaseObject("node-x", "2023-11-14T22:13:20.000000Z", 40));
  auto b = elector(kube_, clock_, "node-b");
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(39));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(1));
  EXPECT_TRUE(step(*b));
  EXPECT_EQ(spec()["leaseDurationSeconds"], 15);
}

TEST_F(LeaderElectionTest, RenewTimeOnTheWallClockNeverDecidesExpiry) {
  // A record last renewed a day ago (by the wall clock) is new to us: wait a lease duration.
  put(leaseObject("node-x", "2023-11-13T22:13:20.000000Z"));
  auto b = elector(kube_, clock_, "node-b");
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(14));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(1));
  EXPECT_TRUE(step(*b));

  // One renewed "a day from now" does not hold anyone off longer.
  put(leaseObject("node-y", "2023-11-15T22:13:20.000000Z"));
  EXPECT_FALSE(step(*b));
  EXPECT_FALSE(b->isLeader());
  clock_.advance(seconds(15));
  EXPECT_TRUE(step(*b));
}

TEST_F(LeaderElectionTest, ARenewTimeInYear9999IsReadWithoutOverflowAndHoldsNobodyOff) {
  // Defect: renewTime 9999-12-31 overflowed int64 nanoseconds (an abort under UBSan).
  put(leaseObject("node-x", "9999-12-31T23:59:59.999999Z"));
  auto b = elector(kube_, clock_, "node-b");
  EXPECT_FALSE(step(*b));
  EXPECT_EQ(b->status().renew_time, kube::kLatestApiTime);
  clock_.advance(seconds(15));
  EXPECT_TRUE(step(*b));
  EXPECT_TRUE(b->isLeader());
}

TEST_F(LeaderElectionTest, WallClockJumpsCauseNeitherTakeoverNorLoss) {
  // Each agent has its own clock; NTP steps them independently.
  base::ManualClock clock_a{kStart}, clock_b{kStart};
  Recorder rec_a, rec_b;
  auto a = elector(kube_, clock_a, "node-a", &rec_a);
  auto b = elector(kube_, clock_b, "node-b", &rec_b);
  ASSERT_TRUE(step(*a));
  for (int i = 0; i < 60; ++i) {
    if (i == 5) clock_b.setWall(clock_b.wallNow() + hours(6));    // B jumps ahead
    if (i == 15) clock_a.setWall(clock_a.wallNow() - hours(9));   // A falls behind
    if (i == 25) clock_a.setWall(clock_a.wallNow() + hours(30));  // A far ahead
    if (i == 35) clock_b.setWall(clock_b.wallNow() - hours(48));  // B far behind
    clock_a.advance(seconds(2));
    clock_b.advance(seconds(2));
    EXPECT_TRUE(step(*a)) << i;
    EXPECT_TRUE(a->isLeaderFresh()) << i;
    EXPECT_FALSE(step(*b)) << i;
  }
  EXPECT_EQ(rec_a.take(), (Events{"leader node-a", "started"}));
  EXPECT_EQ(rec_b.take(), (Events{"leader node-a"}));
  EXPECT_EQ(spec()["holderIdentity"], "node-a");
  EXPECT_EQ(spec()["leaseTransitions"], 0);
  // A wrote its (jumped) wall clock, as it should.
  EXPECT_EQ(spec()["renewTime"], kube::formatRfc3339Micro(clock_a.wallNow()));
}

TEST_F(LeaderElectionTest, ReleaseClearsTheHolderAndAnotherTakesOverAtOnce) {
  Recorder rec_a, rec_b;
  auto a = elector(kube_, clock_, "node-a", &rec_a);
  auto b = elector(kube_, clock_, "node-b", &rec_b);
  ASSERT_TRUE(step(*a));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(1));

  auto released = a->release();
  ASSERT_TRUE(released) << released.error().message();
  EXPECT_FALSE(a->isLeader());
  EXPECT_FALSE(a->isLeaderFresh());
  EXPECT_EQ(spec()["holderIdentity"], "");
  EXPECT_EQ(spec()["leaseDurationSeconds"], 1);
  EXPECT_EQ(spec()["renewTime"], kube::formatRfc3339Micro(clock_.wallNow()));
  EXPECT_EQ(spec()["leaseTransitions"], 0);
  EXPECT_EQ(rec_a.take(), (Events{"leader node-a", "started", "stopped", "leader "}));

  // No lease_duration wait.
  EXPECT_TRUE(step(*b));
  EXPECT_EQ(spec()["holderIdentity"], "node-b");
  EXPECT_EQ(spec()["leaseTransitions"], 1);
  EXPECT_EQ(spec()["leaseDurationSeconds"], 15);

  // Releasing again, or releasing what we do not hold, writes nothing.
  const int before = kube_.callCount();
  EXPECT_TRUE(a->release());
  EXPECT_EQ(kube_.callCount(), before);
  EXPECT_EQ(rec_a.take(), Events{});  // no second "stopped"
}

TEST_F(LeaderElectionTest, ReleaseThatFailsStillEndsTheTerm) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  kube_.unavailable = true;
  auto released = a->release();
  ASSERT_FALSE(released);
  EXPECT_EQ(released.error().code(), ErrorCode::kUnavailable);
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(rec.count("stopped"), 1);
  EXPECT_NE(a->status().last_error, "");
}

TEST_F(LeaderElectionTest, FailedRenewalsLongerThanTheRenewDeadlineEndTheTermOnce) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  rec.take();
  kube_.unavailable = true;
  for (int i = 1; i <= 4; ++i) {  // failures at 2, 4, 6, 8 s: still leader, still fresh
    clock_.advance(seconds(2));
    auto r = a->tryAcquireOrRenew();
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code(), ErrorCode::kUnavailable);
    EXPECT_TRUE(a->isLeader()) << i;
    EXPECT_TRUE(a->isLeaderFresh()) << i;
    EXPECT_NE(a->status().last_error.find("connection refused"), std::string::npos);
  }
  clock_.advance(milliseconds(1999));
  EXPECT_TRUE(a->isLeaderFresh());  // 9.999 s since the last success
  clock_.advance(milliseconds(1));
  // Fencing follows the last success even before a step notices.
  EXPECT_FALSE(a->isLeaderFresh());
  EXPECT_TRUE(a->isLeader());
  EXPECT_FALSE(a->tryAcquireOrRenew());
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(rec.take(), (Events{"stopped"}));
  for (int i = 0; i < 5; ++i) {
    clock_.advance(seconds(2));
    EXPECT_FALSE(a->tryAcquireOrRenew());
  }
  EXPECT_EQ(rec.take(), Events{});

  // The API comes back and the record still names us: a new term, same lease history.
  kube_.unavailable = false;
  EXPECT_TRUE(step(*a));
  EXPECT_EQ(rec.take(), (Events{"started"}));
  EXPECT_EQ(spec()["leaseTransitions"], 0);
  EXPECT_EQ(spec()["acquireTime"], "2023-11-14T22:13:20.123456Z");
}

TEST_F(LeaderElectionTest, FailuresWithinTheRenewDeadlineKeepTheTerm) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  kube_.unavailable = true;
  for (int i = 0; i < 4; ++i) {
    clock_.advance(seconds(2));
    EXPECT_FALSE(a->tryAcquireOrRenew());
  }
  kube_.unavailable = false;
  clock_.advance(seconds(1));  // 9 s after the last success
  EXPECT_TRUE(step(*a));
  clock_.advance(seconds(9));
  EXPECT_TRUE(a->isLeaderFresh());  // freshness restarted at the renewal
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started"}));
  EXPECT_EQ(a->status().last_error, "");
}

TEST_F(LeaderElectionTest, ASuspendedLeaderEndsItsTermBeforeRenewing) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  clock_.advance(seconds(12));  // no steps at all (SIGSTOP, VM paused)
  EXPECT_FALSE(a->isLeaderFresh());
  EXPECT_TRUE(step(*a));  // nobody took it: taken back, as a new term
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started", "stopped", "started"}));
  EXPECT_EQ(spec()["leaseTransitions"], 0);
}

TEST_F(LeaderElectionTest, ConflictOnRenewalReadsAgainAndKeepsALostSuccess) {
  auto a = elector(kube_, clock_, "node-a");
  ASSERT_TRUE(step(*a));
  // The renewal is applied but its answer is lost; the client's retry sees Conflict.
  kube_.lost_update_answers = 1;
  clock_.advance(seconds(2));
  const int before = kube_.callCount();
  EXPECT_TRUE(step(*a));
  EXPECT_EQ(kube_.callCount() - before, 3);  // update (conflict), get, update
  EXPECT_TRUE(a->isLeaderFresh());
  EXPECT_EQ(a->status().last_error, "");
  EXPECT_EQ(spec()["holderIdentity"], "node-a");
  EXPECT_EQ(spec()["leaseTransitions"], 0);
}

TEST_F(LeaderElectionTest, SomeoneElseOnTheLeaseEndsOurTermAtOnce) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  rec.take();
  // Another writer (a misconfigured agent, kubectl) puts its name on the Lease.
  Json taken = storedLease().value();
  taken["spec"]["holderIdentity"] = "node-z";
  put(taken);
  clock_.advance(seconds(2));
  auto r = a->tryAcquireOrRenew();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(*r);
  EXPECT_FALSE(a->isLeader());
  EXPECT_FALSE(a->isLeaderFresh());
  EXPECT_EQ(rec.take(), (Events{"stopped", "leader node-z"}));
  EXPECT_EQ(spec()["holderIdentity"], "node-z");
}

TEST_F(LeaderElectionTest, DeletedLeaseIsCreatedAgainByTheLeader) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  erase();
  clock_.advance(seconds(2));
  EXPECT_TRUE(step(*a));
  EXPECT_EQ(spec()["holderIdentity"], "node-a");
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started"}));
}

TEST_F(LeaderElectionTest, AnUnusableLeaseObjectIsAnErrorNeverACrash) {
  const std::vector<Json> garbage = {
      Json::array({1, 2}),
      "a string",
      {{"metadata", "x"}},
      // No resourceVersion: an update would be unconditional.
      {{"metadata", {{"name", "ekco-leader"}}}, {"spec", {{"holderIdentity", ""}}}},
      {{"metadata", {{"name", "ekco-leader"}, {"resourceVersion", 7}}}, {"spec", "x"}},
  };
  for (const auto& g : garbage) {
    putRaw(g);
    auto b = elector(kube_, clock_, "node-b");
    for (int i = 0; i < 3; ++i) {
      auto r = b->tryAcquireOrRenew();
      ASSERT_FALSE(r) << g.dump();
      EXPECT_EQ(r.error().code(), ErrorCode::kParse) << g.dump();
      EXPECT_FALSE(b->isLeader());
      EXPECT_EQ(b->status().last_error, r.error().message());
      clock_.advance(seconds(20));
    }
    EXPECT_EQ(storedLease().value(), g);  // not overwritten
  }
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
}

// Issue 24 defect 12: a Lease whose spec has garbage fields left the cluster with no leader
// while every agent was ready. It is held by nobody we know until it stays unchanged for the
// lease duration, then taken over on top of its resourceVersion; a change restarts the wait.
TEST_F(LeaderElectionTest, AGarbageSpecIsTakenOverOnceUnchangedForTheLeaseDuration) {
  const auto meta = Json{{"name", "ekco-leader"}, {"namespace", "kurl"}, {"resourceVersion", "7"}};
  const std::vector<Json> garbage = {
      {{"metadata", meta}, {"spec", {{"holderIdentity", 42}}}},
      {{"metadata", meta},
       {"spec", {{"holderIdentity", "node-x"}, {"leaseDurationSeconds", "15"}}}},
      {{"metadata", meta}, {"spec", {{"holderIdentity", "node-x"}, {"renewTime", "yesterday"}}}},
      {{"metadata", meta}, {"spec", "x"}},
  };
  for (const auto& g : garbage) {
    putRaw(g);
    Recorder rec;
    auto b = elector(kube_, clock_, "node-b", &rec);
    EXPECT_FALSE(step(*b)) << g.dump();
    EXPECT_THAT(
        b->status().last_error,
        ::testing::AllOf(::testing::HasSubstr("lease kurl/ekco-leader is unreadable (parse"),
                         ::testing::HasSubstr("taking it over if it stays unchanged for "
                                              "15s")));
    EXPECT_EQ(rec.take(), (Events{"leader (unreadable lease)"}));
    clock_.advance(seconds(14));
    EXPECT_FALSE(step(*b));
    EXPECT_EQ(storedLease().value(), g);
    // Someone rewrites it (still garbage): the wait starts again.
    Json changed = g;
    changed["metadata"]["resourceVersion"] = "8";
    putRaw(changed);
    clock_.advance(seconds(2));
    EXPECT_FALSE(step(*b));
    clock_.advance(seconds(14));
    EXPECT_FALSE(step(*b));
    clock_.advance(seconds(1));
    EXPECT_TRUE(step(*b)) << g.dump();
    EXPECT_EQ(b->status().last_error, "");
    EXPECT_EQ(spec()["holderIdentity"], b->config().identity);
    EXPECT_EQ(spec()["leaseDurationSeconds"], 15);
    EXPECT_EQ(rec.take(), (Events{"leader " + b->config().identity, "started"}));
    erase();
  }

  // A leader that finds its record overwritten with garbage ends its term at once: someone else
  // wrote there.
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a", &rec);
  ASSERT_TRUE(step(*a));
  putRaw(garbage[0]);
  clock_.advance(seconds(2));
  EXPECT_FALSE(step(*a));
  EXPECT_FALSE(a->isLeader());
  EXPECT_EQ(rec.count("stopped"), 1);
}

TEST(LeaderElectionConfig, DefaultsFollowTheIssue) {
  LeaderElectionConfig c;
  EXPECT_EQ(c.ns, "kurl");
  EXPECT_EQ(c.name, "ekco-leader");
  EXPECT_EQ(c.lease_duration, seconds(15));
  EXPECT_EQ(c.renew_deadline, seconds(10));
  EXPECT_EQ(c.retry_period, seconds(2));
  EXPECT_FALSE(validateLeaderElectionConfig(c));  // identity is required
  c.identity = "node-a";
  EXPECT_TRUE(validateLeaderElectionConfig(c));
}

TEST(LeaderElectionConfig, InvalidConfigsNameTheField) {
  struct Case {
    LeaderElectionConfig config{};
    std::string field{};
  };
  const std::vector<Case> cases = {
      {.config = {.identity = ""}, .field = "identity"},
      {.config = {.ns = "", .identity = "n"}, .field = "ns"},
      {.config = {.name = "", .identity = "n"}, .field = "name"},
      {.config = {.identity = "n", .retry_period = milliseconds(0)}, .field = "retry_period"},
      {.config = {.identity = "n", .retry_period = milliseconds(-5)}, .field = "retry_period"},
      {.config = {.identity = "n", .renew_deadline = seconds(2)}, .field = "renew_deadline"},
      {.config = {.identity = "n", .renew_deadline = seconds(1)}, .field = "renew_deadline"},
      {.config = {.identity = "n", .lease_duration = seconds(10)}, .field = "lease_duration"},
      {.config = {.identity = "n", .lease_duration = seconds(5)}, .field = "lease_duration"},
  };
  FakeKube kube;
  base::ManualClock clock;
  for (const auto& c : cases) {
    auto s = validateLeaderElectionConfig(c.config);
    ASSERT_FALSE(s) << c.field;
    EXPECT_EQ(s.error().code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(s.error().message().rfind("leader election: " + c.field + " ", 0), 0u)
        << s.error().message();
    auto e = LeaderElector::create(kube, clock, c.config);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code(), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(validateLeaderElectionConfig({.identity = "n", .lease_duration = seconds(5)})
                .error()
                .message(),
            "leader election: lease_duration (5s) must be greater than renew_deadline (10s)");
}

TEST_F(LeaderElectionTest, RunStepsUntilStopAndStopIsPrompt) {
  base::SystemClock clock;
  Recorder rec;
  auto a = elector(kube_, clock, "node-a", &rec,
                   {.lease_duration = seconds(30),
                    .renew_deadline = seconds(20),
                    .retry_period = milliseconds(20)});
  std::thread t([&] { a->run(); });
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  while (kube_.count(Verb::kUpdate) < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_GE(kube_.count(Verb::kUpdate), 3);  // created, then renewed every retry period
  EXPECT_TRUE(a->isLeaderFresh());
  const auto before = std::chrono::steady_clock::now();
  a->stop();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - before, seconds(1));
  a->stop();  // idempotent
  a->run();   // returns at once after stop()
  ASSERT_TRUE(a->release());
  EXPECT_EQ(spec()["holderIdentity"], "");
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "started", "stopped", "leader "}));
}

TEST_F(LeaderElectionTest, StopWaitsNoRetryPeriod) {
  auto a = elector(kube_, clock_, "node-a", nullptr,
                   {.lease_duration = seconds(600),
                    .renew_deadline = seconds(500),
                    .retry_period = seconds(300)});
  std::thread t([&] { a->run(); });
  while (kube_.callCount() == 0) std::this_thread::sleep_for(milliseconds(1));
  const auto before = std::chrono::steady_clock::now();
  a->stop();
  t.join();
  EXPECT_LT(std::chrono::steady_clock::now() - before, seconds(1));
}

TEST_F(LeaderElectionTest, AWatchedDeleteStepsAtOnceInsteadOfAfterTheRetryPeriod) {
  auto a = elector(kube_, clock_, "node-a", nullptr,
                   {.lease_duration = seconds(600),
                    .renew_deadline = seconds(500),
                    .retry_period = seconds(300)});
  std::thread t([&] { a->run(); });
  while (kube_.callCount() == 0) std::this_thread::sleep_for(milliseconds(1));
  const int before = kube_.callCount();
  a->observeDeleted();  // steps now, whatever the retry period
  const auto deadline = std::chrono::steady_clock::now() + seconds(5);
  while (kube_.callCount() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_GT(kube_.callCount(), before) << "a watched delete did not make run() step";
  a->stop();
  t.join();
}

// --- Watched records (observeWatched): what the agent's Lease informer feeds the elector ---

TEST_F(LeaderElectionTest, AWatchedRenewalRestartsTheExpiryWaitLikeARead) {
  Recorder rec;
  auto a = elector(kube_, clock_, "node-a");
  auto b = elector(kube_, clock_, "node-b", &rec);
  ASSERT_TRUE(step(*a));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(14));
  ASSERT_TRUE(step(*a));  // A renews; B only sees it on its watch
  b->observeWatched(storedLease().value());
  EXPECT_EQ(b->lastAnswer(), clock_.monoNow());
  EXPECT_EQ(b->status().resource_version, storedLease().value()["metadata"]["resourceVersion"]);
  // A stops. Without the watched renewal B would take over at 15 s; with it, 15 s after it.
  clock_.advance(seconds(14));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(1));
  EXPECT_TRUE(step(*b));
  EXPECT_EQ(rec.take(), (Events{"leader node-a", "leader node-b", "started"}));
}

TEST_F(LeaderElectionTest, AStaleWatchedRecordNeverHastensATakeover) {
  auto a = elector(kube_, clock_, "node-a");
  auto b = elector(kube_, clock_, "node-b");
  ASSERT_TRUE(step(*a));
  const Json first = storedLease().value();
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(10));
  ASSERT_TRUE(step(*a));
  EXPECT_FALSE(step(*b));  // B read the renewal at 10 s
  // A watch event of the first record arrives late: it changes what B saw, so B's wait restarts
  // (later, never sooner).
  clock_.advance(seconds(4));
  b->observeWatched(first);
  clock_.advance(seconds(11));  // 15 s after the renewal B read
  EXPECT_FALSE(step(*b)) << "the read differs from the stale record: a new observation";
  clock_.advance(seconds(14));
  EXPECT_FALSE(step(*b));
  clock_.advance(seconds(1));
  EXPECT_TRUE(step(*b));
}

TEST_F(LeaderElectionTest, AWatchedRecordIsIgnoredByTheLeaderAndAnUnreadableOneByAll) {
  auto a = elector(kube_, clock_, "node-a");
  ASSERT_TRUE(step(*a));
  const Json created = storedLease().value();
  ASSERT_TRUE(step(*a));
  // The leader renews on top of what it wrote, not on a stale watched record: one PUT.
  a->observeWatched(created);
  const int before = kube_.callCount();
  const int gets = kube_.count(Verb::kGet);
  ASSERT_TRUE(step(*a));
  EXPECT_EQ(kube_.callCount(), before + 1);
  EXPECT_EQ(kube_.count(Verb::kGet), gets);

  auto b = elector(kube_, clock_, "node-b");
  EXPECT_FALSE(step(*b));
  const std::string rv = b->status().resource_version;
  b->observeWatched(Json{{"metadata", {{"resourceVersion", "999"}}}, {"spec", 42}});
  b->observeWatched(Json::array());
  EXPECT_EQ(b->status().resource_version, rv);
  EXPECT_EQ(b->status().holder, a->config().identity);
}

// run() with watched records: a candidate that sees the holder's renewals reads nothing until
// they stop, then takes over once the last one has expired (never sooner).
class WatchedRunTest : public LeaderElectionTest {
 protected:
  static constexpr LeaderElectionConfig kFast{.lease_duration = milliseconds(1500),
                                              .renew_deadline = milliseconds(1000),
                                              .retry_period = milliseconds(50)};
  // A renew deadline long enough that a stalled test thread does not end A's term (its
  // re-acquisition would read the Lease and spoil the count of B's reads).
  static constexpr LeaderElectionConfig kWatched{.lease_duration = milliseconds(3000),
                                                 .renew_deadline = milliseconds(2500),
                                                 .retry_period = milliseconds(100)};
  // A one-minute lease: nothing expires during a test unless it is released or deleted.
  static LeaderElectionConfig longLease(milliseconds retry_period) {
    return {
        .lease_duration = seconds(60), .renew_deadline = seconds(40), .retry_period = retry_period};
  }
  base::SystemClock real_;
};

TEST_F(WatchedRunTest, ACandidateFedRenewalsReadsNothingThenTakesOverWhenTheyStop) {
  auto a = elector(kube_, real_, "node-a", nullptr, kWatched);
  auto b = elector(kube_, real_, "node-b", nullptr, kWatched);
  ASSERT_TRUE(step(*a));
  b->observeWatched(storedLease().value());  // the informer's initial list
  const int gets = kube_.count(Verb::kGet);
  std::thread t([&] { b->run(); });
  // A renews every 100 ms for 2 s; B's watch delivers each renewal.
  auto last_renewal = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(step(*a));
    last_renewal = std::chrono::steady_clock::now();
    b->observeWatched(storedLease().value());
  }
  // Polling, B would have read the Lease every 100-220 ms (9 or more times in 2 s).
  EXPECT_EQ(kube_.count(Verb::kGet), gets + 1) << "B's first step reads; then the watch serves it";
  EXPECT_FALSE(b->isLeader());
  // A stops renewing: B takes over 3 s (+ up to 120 ms of jitter) after the last renewal.
  const auto deadline = std::chrono::steady_clock::now() + seconds(10);
  while (!b->isLeader() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto took = std::chrono::steady_clock::now() - last_renewal;
  ASSERT_TRUE(b->isLeader());
  EXPECT_GE(took, milliseconds(3000));
  EXPECT_LT(took, milliseconds(3000) + seconds(1));
  b->stop();
  t.join();
}

TEST_F(WatchedRunTest, AfterAWatchedDeleteACandidateNeverWaitsForTheDeletedRecordsExpiry) {
  // A long lease, a short retry: after the delete B's first create fails (the API hiccups); its
  // next try must come a retry period later, not when the deleted record would have expired.
  const LeaderElectionConfig slow = longLease(milliseconds(200));
  auto a = elector(kube_, real_, "node-a", nullptr, slow);
  auto b = elector(kube_, real_, "node-b", nullptr, slow);
  ASSERT_TRUE(step(*a));
  b->observeWatched(storedLease().value());
  std::thread t([&] { b->run(); });
  while (kube_.count(Verb::kGet) < 2) std::this_thread::sleep_for(milliseconds(1));
  kube_.inject({.verb = Verb::kCreate,
                .error = Error("create leases/ekco-leader: the server is shutting down",
                               ErrorCode::kUnavailable)});
  erase();  // someone deletes the Lease (A does not notice until its next renewal)
  const auto deleted = std::chrono::steady_clock::now();
  b->observeDeleted();
  while (!b->isLeader() && std::chrono::steady_clock::now() - deleted < seconds(5)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(b->isLeader()) << "a deleted Lease must not wait for the last record's expiry";
  EXPECT_EQ(kube_.count(Verb::kCreate), 3);  // A's, then B's failed one and its own
  EXPECT_EQ(spec()["holderIdentity"], b->config().identity);
  b->stop();
  t.join();
}

TEST_F(WatchedRunTest, WithoutWatchedRecordsACandidatePollsEveryJitteredRetryPeriod) {
  auto a = elector(kube_, real_, "node-a", nullptr, kFast);
  auto b = elector(kube_, real_, "node-b", nullptr, kFast);
  ASSERT_TRUE(step(*a));
  std::thread t([&] { b->run(); });
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE(step(*a));
  }
  b->stop();
  t.join();
  EXPECT_GE(kube_.count(Verb::kGet), 8);
  EXPECT_FALSE(b->isLeader());
}

TEST_F(WatchedRunTest, AWatchedReleaseMakesACandidateTakeOverAtOnce) {
  const LeaderElectionConfig slow = longLease(seconds(20));
  auto a = elector(kube_, real_, "node-a", nullptr, slow);
  auto b = elector(kube_, real_, "node-b", nullptr, slow);
  ASSERT_TRUE(step(*a));
  std::thread t([&] { b->run(); });
  while (kube_.count(Verb::kGet) == 0) std::this_thread::sleep_for(milliseconds(1));
  b->observeWatched(storedLease().value());
  ASSERT_TRUE(a->release());
  const auto released = std::chrono::steady_clock::now();
  b->observeWatched(storedLease().value());
  while (!b->isLeader() && std::chrono::steady_clock::now() - released < seconds(5)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_TRUE(b->isLeader()) << "a released Lease must not wait for a 20 s retry period";
  b->stop();
  t.join();
}

// --- an observer (leader_election_candidate: false, the worker DaemonSet's agents) ---

TEST_F(LeaderElectionTest, AnObserverReadsTheLeaseButNeverCreatesTakesOrReleasesIt) {
  Recorder rec;
  LeaderElectionConfig observer_cfg;
  observer_cfg.candidate = false;
  auto w = elector(kube_, clock_, "worker-1", &rec, observer_cfg);
  // No Lease: nobody leads, and an observer creates nothing.
  EXPECT_FALSE(step(*w));
  EXPECT_FALSE(storedLease());
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);
  EXPECT_EQ(w->status().last_error, "");
  EXPECT_TRUE(w->lastAnswer());  // the NotFound was the API's answer

  auto a = elector(kube_, clock_, "node-a");
  ASSERT_TRUE(step(*a));
  EXPECT_FALSE(step(*w));
  EXPECT_EQ(w->status().holder, "node-a");
  EXPECT_EQ(rec.take(), (Events{"leader node-a"}));

  // node-a stops renewing: long past its expiry, and released, the observer still takes nothing.
  clock_.advance(seconds(60));
  EXPECT_FALSE(step(*w));
  ASSERT_TRUE(a->release());
  EXPECT_FALSE(step(*w));
  EXPECT_EQ(spec()["holderIdentity"], "");
  EXPECT_FALSE(w->isLeader());
  EXPECT_FALSE(w->isLeaderFresh());
  EXPECT_EQ(w->status().holder, "");
  EXPECT_EQ(rec.take(), (Events{"leader "}));
  // A garbage record is reported, never taken over, however long it stays.
  putRaw({{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", "ekco-leader"}, {"namespace", "kurl"}, {"resourceVersion", "9"}}},
          {"spec", {{"holderIdentity", 5}}}});
  EXPECT_FALSE(step(*w));
  clock_.advance(seconds(60));
  EXPECT_FALSE(step(*w));
  EXPECT_THAT(w->status().last_error, ::testing::HasSubstr("is unreadable"));
  EXPECT_THAT(w->status().last_error, ::testing::Not(::testing::HasSubstr("taking it over")));
  EXPECT_TRUE(w->release());
  // Every write was node-a's: its create and its release. The observer only read.
  EXPECT_EQ(kube_.count(Verb::kCreate), 1);
  EXPECT_EQ(kube_.count(Verb::kUpdate), 1);
}

TEST_F(WatchedRunTest, AnObserverReadsOnlyWhenItsWatchIsSilentAndNeverStepsOnARelease) {
  LeaderElectionConfig observer_cfg = kWatched;  // a 3 s lease, 100 ms retry period
  observer_cfg.candidate = false;
  auto a = elector(kube_, real_, "node-a", nullptr, kWatched);
  auto w = elector(kube_, real_, "worker-1", nullptr, observer_cfg);
  ASSERT_TRUE(step(*a));
  w->observeWatched(storedLease().value());
  const int gets = kube_.count(Verb::kGet);
  std::thread t([&] { w->run(); });
  // Fed renewals for 2 s, it reads once (its first step), as a candidate does.
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(step(*a));
    w->observeWatched(storedLease().value());
  }
  EXPECT_EQ(kube_.count(Verb::kGet), gets + 1);
  // A release seen on the watch makes a candidate step at once; an observer does not.
  ASSERT_TRUE(a->release());
  const int writes = kube_.count(Verb::kUpdate) + kube_.count(Verb::kCreate);
  w->observeWatched(storedLease().value());
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(kube_.count(Verb::kGet), gets + 1);
  // Silent for a lease duration (3 s + up to 120 ms): it reads again, to hear from the API,
  // and still writes nothing.
  const auto deadline = std::chrono::steady_clock::now() + seconds(6);
  while (kube_.count(Verb::kGet) == gets + 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(kube_.count(Verb::kGet), gets + 2);
  EXPECT_EQ(kube_.count(Verb::kUpdate) + kube_.count(Verb::kCreate), writes);
  EXPECT_FALSE(w->isLeader());
  EXPECT_EQ(spec()["holderIdentity"], "");
  w->stop();
  t.join();
}

TEST_F(WatchedRunTest, AFailedStepGoesToOnStepErrorAndALostRaceDoesNot) {
  std::mutex mu;
  std::vector<std::string> errors;
  LeaderElector::Callbacks callbacks{.on_step_error = [&](const base::Error& e) {
    std::lock_guard lock(mu);
    errors.push_back(e.message());
  }};
  LeaderElectionConfig cfg = kFast;
  cfg.identity = "node-b";
  // A released Lease: B's first write is applied but answered 409 (a lost race), then B reads
  // the record naming it and leads. Neither is an error.
  put(leaseObject("", "2023-11-14T22:13:20.000000Z", 1));
  kube_.lost_update_answers = 1;
  auto b = LeaderElector::create(kube_, real_, cfg, callbacks).value();
  std::thread t([&] { b->run(); });
  auto deadline = std::chrono::steady_clock::now() + seconds(5);
  while (!b->isLeader() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_TRUE(b->isLeader());
  EXPECT_EQ(kube_.lost_update_answers, 0) << "the lost race did not happen";
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(errors.empty()) << errors.front();
  }
  // An API that refuses connections: every failed step is reported.
  kube_.unavailable = true;
  deadline = std::chrono::steady_clock::now() + seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mu);
      if (!errors.empty()) break;
    }
    std::this_thread::sleep_for(milliseconds(5));
  }
  kube_.unavailable = false;
  b->stop();
  t.join();
  std::lock_guard lock(mu);
  ASSERT_FALSE(errors.empty());
  EXPECT_THAT(errors.front(), ::testing::HasSubstr("connection refused"));
}

}  // namespace
}  // namespace ekco::agent
