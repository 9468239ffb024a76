// The controller manager's scheduling, driven step by step with a ManualClock (runDue), plus
// real-thread tests of run(): wake-ups, leadership changes, a long leader task not delaying
// node work, stop.
#include "agent/runtime/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>

namespace ekco::agent {
namespace {

using base::Error;
using base::ErrorCode;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Answers from a script (then succeeds), counting runs.
class FakeController final : public Controller {
 public:
  explicit FakeController(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  base::Result<ReconcileResult> reconcile() override {
    ++runs;
    if (throws > 0) {
      --throws;
      (void)nlohmann::json("not an object").value("spec", 0);  // type_error 306
    }
    if (block) {
      while (block->load()) std::this_thread::sleep_for(milliseconds(1));
    }
    if (!script.empty()) {
      auto next = std::move(script.front());
      script.pop_front();
      return next;
    }
    return ReconcileResult{.summary = "ok " + std::to_string(runs.load()), .plan = "nothing"};
  }
  std::string windowToClose() const override { return window; }
  std::atomic<int> runs{0};
  std::string window;  // windowToClose() (the step tests set it between runs)
  std::deque<base::Result<ReconcileResult>> script;
  std::atomic<bool>* block = nullptr;
  int throws = 0;  // runs that end in an exception (a bug in a real controller)

 private:
  std::string name_;
};

class ManagerTest : public ::testing::Test {
 protected:
  ManagerTest()
      : manager_(clock_, {.initial_backoff = seconds(1), .max_backoff = seconds(8), .random = [] {
                            return 1.0;
                          }}) {}  // no jitter: the full delay
  std::shared_ptr<FakeController> add(Scope scope, const std::string& name) {
    auto c = std::make_shared<FakeController>(name);
    EXPECT_TRUE(manager_.add(scope, c));
    return c;
  }
  const ControllerStatus& status(const std::string& name) {
    statuses_ = manager_.status();
    for (const auto& s : statuses_) {
      if (s.name == name) return s;
    }
    ADD_FAILURE() << "no controller " << name;
    return statuses_.front();
  }

  base::ManualClock clock_;
  Manager manager_;
  std::vector<ControllerStatus> statuses_;
};

TEST_F(ManagerTest, EveryControllerRunsOnceAtStartThenOnlyWhenWoken) {
  auto a = add(Scope::kNode, "a");
  auto b = add(Scope::kNode, "b");
  EXPECT_EQ(manager_.runDue(Scope::kNode), std::nullopt);
  EXPECT_EQ(a->runs, 1);
  EXPECT_EQ(b->runs, 1);
  manager_.runDue(Scope::kNode);
  EXPECT_EQ(a->runs, 1);
  EXPECT_TRUE(manager_.wake("b"));
  EXPECT_FALSE(manager_.wake("nope"));
  manager_.runDue(Scope::kNode);
  EXPECT_EQ(a->runs, 1);
  EXPECT_EQ(b->runs, 2);
  EXPECT_EQ(status("b").last_result, "ok 2");
  EXPECT_EQ(status("b").last_plan, "nothing");
  EXPECT_EQ(status("b").runs, 2U);
  EXPECT_EQ(status("b").next_run, std::nullopt);
}

TEST_F(ManagerTest, RequeueAfterSchedulesTheNextRun) {
  auto a = add(Scope::kNode, "a");
  a->script.push_back(ReconcileResult{.summary = "soon", .requeue_after = seconds(30)});
  const auto start = clock_.monoNow();
  auto next = manager_.runDue(Scope::kNode);
  ASSERT_TRUE(next);
  EXPECT_EQ(*next - start, seconds(30));
  EXPECT_EQ(status("a").next_run, clock_.wallNow() + seconds(30));
  clock_.advance(seconds(29));
  manager_.runDue(Scope::kNode);
  EXPECT_EQ(a->runs, 1);
  clock_.advance(seconds(1));
  EXPECT_EQ(manager_.runDue(Scope::kNode), std::nullopt);
  EXPECT_EQ(a->runs, 2);
}

TEST_F(ManagerTest, ARequeueOfZeroWaitsTheMinimumSoAControllerCannotSpin) {
  // A controller that asks to look again "at once" after every run (a purge whose cache has not
  // caught up) runs at most once per min_requeue (100 ms), not in a hot loop.
  auto a = add(Scope::kNode, "a");
  for (int i = 0; i < 3; ++i)
    a->script.push_back(ReconcileResult{.requeue_after = milliseconds(0)});
  const auto start = clock_.monoNow();
  auto next = manager_.runDue(Scope::kNode);
  ASSERT_TRUE(next);
  EXPECT_EQ(*next - start, milliseconds(100));
  manager_.runDue(Scope::kNode);
  manager_.runDue(Scope::kNode);
  EXPECT_EQ(a->runs, 1);
  clock_.advance(milliseconds(100));
  manager_.runDue(Scope::kNode);
  EXPECT_EQ(a->runs, 2);
}

TEST_F(ManagerTest, ARequeueCenturiesAwayIsHeldAtADay) {
  auto a = add(Scope::kNode, "a");
  a->script.push_back(ReconcileResult{
      .requeue_after = std::chrono::duration_cast<milliseconds>(std::chrono::years(200))});
  const auto start = clock_.monoNow();
  auto next = manager_.runDue(Scope::kNode);
  ASSERT_TRUE(next);
  EXPECT_EQ(*next - start, std::chrono::hours(24));
}

TEST_F(ManagerTest, ErrorsBackOffExponentiallyAndWakesDoNotCutTheBackoffShort) {
  auto a = add(Scope::kNode, "a");
  for (int i = 0; i < 5; ++i) a->script.push_back(Error("api down", ErrorCode::kUnavailable));
  std::vector<std::chrono::nanoseconds> delays;
  for (int i = 0; i < 5; ++i) {
    const auto before = clock_.monoNow();
    auto next = manager_.runDue(Scope::kNode);
    ASSERT_TRUE(next);
    delays.push_back(*next - before);
    manager_.wake("a");  // a watch event during the backoff
    manager_.runDue(Scope::kNode);
    EXPECT_EQ(a->runs, i + 1) << "a wake ran it during its backoff";
    clock_.advance(*next - before);
  }
  EXPECT_THAT(delays,
              ::testing::ElementsAre(seconds(1), seconds(2), seconds(4), seconds(8), seconds(8)));
  EXPECT_EQ(status("a").last_error, "api down");
  EXPECT_EQ(status("a").consecutive_errors, 5);
  // The next run succeeds: error cleared, backoff reset, nothing scheduled.
  EXPECT_EQ(manager_.runDue(Scope::kNode), std::nullopt);
  EXPECT_EQ(status("a").last_error, "");
  EXPECT_EQ(status("a").consecutive_errors, 0);
  EXPECT_EQ(status("a").errors, 5U);
}

// A controller that throws (a bug) fails that run and backs off; it neither ends the process nor
// stops the other controllers, and its next run starts clean.
TEST_F(ManagerTest, AnExceptionIsThatRunsErrorAndTheOthersRunOn) {
  auto bad = add(Scope::kNode, "bad");
  auto good = add(Scope::kNode, "good");
  bad->throws = 1;
  auto next = manager_.runDue(Scope::kNode);
  EXPECT_EQ(bad->runs, 1);
  EXPECT_EQ(good->runs, 1);
  EXPECT_THAT(status("bad").last_error,
              ::testing::StartsWith("internal error: reconcile threw: [json.exception.type_error"));
  EXPECT_EQ(status("bad").consecutive_errors, 1);
  EXPECT_EQ(status("good").last_error, "");
  ASSERT_TRUE(next);
  EXPECT_EQ(*next - clock_.monoNow(), seconds(1));  // the first backoff step
  clock_.advance(seconds(1));
  EXPECT_EQ(manager_.runDue(Scope::kNode), std::nullopt);
  EXPECT_EQ(bad->runs, 2);
  EXPECT_EQ(status("bad").last_error, "");
  EXPECT_EQ(status("bad").errors, 1U);
}

TEST_F(ManagerTest, LeaderControllersRunOnlyWhileLeaderAndAllRunOnGainingIt) {
  auto n = add(Scope::kNode, "node-task");
  auto l = add(Scope::kLeader, "leader-task");
  manager_.runDue(Scope::kNode);
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(n->runs, 1);
  EXPECT_EQ(l->runs, 0);
  EXPECT_FALSE(status("leader-task").active);
  manager_.wake("leader-task");
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(l->runs, 0);

  manager_.setLeader(true);
  EXPECT_TRUE(status("leader-task").active);
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(l->runs, 1);
  manager_.setLeader(true);  // still leader: no extra run
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(l->runs, 1);

  l->script.push_back(ReconcileResult{.requeue_after = seconds(5)});
  manager_.wake("leader-task");
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(l->runs, 2);
  manager_.setLeader(false);
  clock_.advance(seconds(10));
  EXPECT_EQ(manager_.runDue(Scope::kLeader), std::nullopt);
  EXPECT_EQ(l->runs, 2);
  EXPECT_EQ(status("leader-task").next_run, std::nullopt);
}

TEST_F(ManagerTest, RegistrationIsCheckedAndClosedOnceRunning) {
  add(Scope::kNode, "a");
  EXPECT_FALSE(manager_.add(Scope::kLeader, std::make_shared<FakeController>("a")));
  EXPECT_FALSE(manager_.add(Scope::kNode, std::make_shared<FakeController>("")));
  EXPECT_FALSE(manager_.add(Scope::kNode, nullptr));
}

TEST_F(ManagerTest, ReconciledCallbackSeesEachRun) {
  std::vector<std::string> seen;
  base::ManualClock clock;
  Manager manager(clock, {.on_reconciled = [&](const ControllerStatus& s, bool ok) {
                    seen.push_back(s.name + (ok ? " ok" : " failed: " + s.last_error));
                  }});
  auto c = std::make_shared<FakeController>("c");
  c->script.push_back(Error("boom", ErrorCode::kIo));
  ASSERT_TRUE(manager.add(Scope::kNode, c));
  manager.runDue(Scope::kNode);
  EXPECT_THAT(seen, ::testing::ElementsAre("c failed: boom"));
}

// --- run() on real threads ---

template <typename F>
bool eventually(F pred, milliseconds timeout = milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return pred();
}

TEST(ManagerRunTest, WakesRunPromptlyALongLeaderTaskDoesNotDelayNodeWorkAndStopIsPrompt) {
  base::SystemClock clock;
  Manager manager(clock, {.initial_backoff = milliseconds(10), .heartbeat = milliseconds(50)});
  auto node = std::make_shared<FakeController>("node");
  auto slow = std::make_shared<FakeController>("slow-leader");
  std::atomic<bool> block{true};
  slow->block = &block;
  ASSERT_TRUE(manager.add(Scope::kNode, node));
  ASSERT_TRUE(manager.add(Scope::kLeader, slow));
  EXPECT_FALSE(manager.alive(seconds(5), seconds(60)));
  std::thread t([&] { manager.run(); });
  ASSERT_TRUE(eventually([&] { return node->runs == 1; }));
  EXPECT_TRUE(eventually([&] { return manager.alive(seconds(5), seconds(60)); }));

  manager.setLeader(true);
  ASSERT_TRUE(eventually([&] { return slow->runs == 1; }));  // and now blocked inside
  for (int i = 2; i <= 5; ++i) {
    manager.wake("node");
    ASSERT_TRUE(eventually([&] { return node->runs == i; })) << "node work waited for the leader";
  }
  // Stuck in one reconcile longer than max_reconcile: not alive.
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_FALSE(manager.alive(seconds(5), milliseconds(20)));
  EXPECT_TRUE(manager.alive(seconds(5), seconds(60)));

  manager.stop();
  block = false;
  t.join();
  EXPECT_EQ(slow->runs, 1);
  EXPECT_FALSE(manager.alive(seconds(5), seconds(60)));
}

TEST(ManagerRunTest, RequeueAndBackoffFireOnRealTime) {
  base::SystemClock clock;
  Manager manager(clock, {.initial_backoff = milliseconds(20), .heartbeat = milliseconds(500)});
  auto c = std::make_shared<FakeController>("c");
  c->script.push_back(ReconcileResult{.requeue_after = milliseconds(30)});
  c->script.push_back(Error("once", ErrorCode::kUnavailable));
  ASSERT_TRUE(manager.add(Scope::kNode, c));
  std::thread t([&] { manager.run(); });
  // start → requeue 30 ms → error → backoff 10–20 ms → success.
  EXPECT_TRUE(eventually([&] { return c->runs >= 3; }, milliseconds(2000)));
  manager.stop();
  t.join();
  EXPECT_EQ(manager.status().front().last_error, "");
}

}  // namespace
}  // namespace ekco::agent

namespace ekco::agent {
namespace {

// Maintenance mode (agent/maintenance/maintenance.h): pausable controllers do not start while
// paused and say why; the others run; resuming runs each pausable one at once, including a
// periodic one whose time came during the pause.
TEST_F(ManagerTest, PausedControllersDoNotRunSayWhyAndRunAtOnceWhenResumed) {
  auto lb = add(Scope::kNode, "internal-lb");
  auto clear = std::make_shared<FakeController>("clear-nodes");
  ASSERT_TRUE(manager_.add(Scope::kLeader, clear, /*pauses_in_maintenance=*/true));
  auto certs = std::make_shared<FakeController>("cluster-certificates");
  certs->script.push_back(ReconcileResult{.summary = "checked", .requeue_after = seconds(10)});
  ASSERT_TRUE(manager_.add(Scope::kNode, certs, /*pauses_in_maintenance=*/true));
  manager_.setLeader(true);
  manager_.runDue(Scope::kNode);
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(certs->runs, 1);
  EXPECT_EQ(clear->runs, 1);

  manager_.setPaused("maintenance (storage migration)");
  clock_.advance(seconds(11));  // certs' requeue passes during the pause
  manager_.wake("clear-nodes");
  manager_.wake("internal-lb");
  const auto next_node = manager_.runDue(Scope::kNode);
  EXPECT_EQ(manager_.runDue(Scope::kLeader), std::nullopt);  // nothing to wait for: paused
  EXPECT_EQ(next_node, std::nullopt);
  EXPECT_EQ(lb->runs, 2);  // not pausable: runs on
  EXPECT_EQ(certs->runs, 1);
  EXPECT_EQ(clear->runs, 1);
  EXPECT_EQ(status("clear-nodes").paused, "maintenance (storage migration)");
  EXPECT_TRUE(status("clear-nodes").pausable);
  EXPECT_EQ(status("clear-nodes").next_run, std::nullopt);
  EXPECT_EQ(status("internal-lb").paused, "");

  // A new reason while paused only changes the text.
  manager_.setPaused("maintenance (upgrade)");
  EXPECT_EQ(status("cluster-certificates").paused, "maintenance (upgrade)");
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(clear->runs, 1);

  manager_.setPaused("");
  EXPECT_EQ(status("clear-nodes").paused, "");
  manager_.runDue(Scope::kNode);
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(certs->runs, 2);
  EXPECT_EQ(clear->runs, 2);
}

TEST_F(ManagerTest, APausedControllerWithAWindowToCloseRunsUntilItIsClosedAndSaysSo) {
  auto minio = std::make_shared<FakeController>("minio-ha");
  ASSERT_TRUE(manager_.add(Scope::kLeader, minio, /*pauses_in_maintenance=*/true));
  auto clear = std::make_shared<FakeController>("clear-nodes");
  ASSERT_TRUE(manager_.add(Scope::kLeader, clear, /*pauses_in_maintenance=*/true));
  manager_.setLeader(true);
  manager_.runDue(Scope::kLeader);
  ASSERT_EQ(minio->runs, 1);

  // Maintenance on while minio-ha has MinIO offline: it goes on running (a requeue, a wake);
  // clear-nodes, with nothing to close, is held.
  minio->window = "the MinIO migration's offline window (phase copying)";
  minio->script.push_back(ReconcileResult{.summary = "rolled back", .requeue_after = seconds(0)});
  manager_.setPaused("maintenance (disk swap)");
  manager_.wake("minio-ha");
  manager_.wake("clear-nodes");
  const auto next = manager_.runDue(Scope::kLeader);
  EXPECT_EQ(minio->runs, 2);
  EXPECT_EQ(clear->runs, 1);
  EXPECT_EQ(status("minio-ha").paused, "");
  EXPECT_EQ(status("minio-ha").closing, "the MinIO migration's offline window (phase copying)");
  EXPECT_EQ(status("minio-ha").last_result, "rolled back");
  EXPECT_EQ(status("clear-nodes").paused, "maintenance (disk swap)");
  EXPECT_EQ(status("clear-nodes").closing, "");
  ASSERT_TRUE(next.has_value()) << "a controller closing a window is scheduled while paused";

  // Closed: from now on it is held like the others, a wake remembered for the resume.
  minio->window.clear();
  clock_.advance(seconds(1));
  manager_.wake("minio-ha");
  EXPECT_EQ(manager_.runDue(Scope::kLeader), std::nullopt);
  EXPECT_EQ(minio->runs, 2);
  EXPECT_EQ(status("minio-ha").paused, "maintenance (disk swap)");
  EXPECT_EQ(status("minio-ha").closing, "");

  manager_.setPaused("");
  manager_.runDue(Scope::kLeader);
  EXPECT_EQ(minio->runs, 3);
  EXPECT_EQ(clear->runs, 2);
}

TEST_F(ManagerTest, AResumeWakesTheRunningLoopWithinMilliseconds) {
  base::SystemClock real;
  Manager manager(real, {.heartbeat = seconds(30)});
  auto c = std::make_shared<FakeController>("purge-dead-nodes");
  ASSERT_TRUE(manager.add(Scope::kLeader, c, true));
  manager.setPaused("maintenance (x)");
  manager.setLeader(true);
  std::thread t([&] { manager.run(); });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(c->runs, 0);
  const auto resumed = std::chrono::steady_clock::now();
  manager.setPaused("");
  while (c->runs == 0 && std::chrono::steady_clock::now() - resumed < seconds(5)) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(c->runs, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - resumed, milliseconds(500));
  manager.stop();
  t.join();
}

}  // namespace
}  // namespace ekco::agent
