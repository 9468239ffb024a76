// envoy-restarts: EKCO's predicate as a table (its contour_test.go cases first), and the
// controller against ekco-kubesim as the ekco ServiceAccount with deploy/ and deploy-contour/
// RBAC enforced: one pod
// per pass, the longest broken first, passes a minute apart, woken when the next pod falls due,
// a pod that recovered since the cache saw it left alone, dry run.
#include "agent/features/envoy/envoy_restarts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "kube/decode/timestamp.h"
#include "kube/resource.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/sa_client.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const base::WallTime kNow = base::WallTime(std::chrono::seconds(1'800'000'000));

// An Envoy pod as kubelet reports it: both containers running since `started`, ContainersReady
// False since `not_ready_since` when a container is not ready.
json envoyPod(const std::string& name, bool envoy_ready, bool manager_ready, base::WallTime started,
              base::WallTime not_ready_since) {
  auto container = [&](const char* c, bool ready) {
    return json{{"name", c},
                {"ready", ready},
                {"state", {{"running", {{"startedAt", kube::formatRfc3339(started)}}}}}};
  };
  const bool all = envoy_ready && manager_ready;
  json ready = {{"type", "ContainersReady"},
                {"status", all ? "True" : "False"},
                {"lastTransitionTime", kube::formatRfc3339(all ? started : not_ready_since)}};
  if (!all) ready["reason"] = "ContainersNotReady";
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", "projectcontour"},
            {"uid", "uid-" + name},
            {"labels", {{"app", "envoy"}}}}},
          {"spec",
           {{"nodeName", "node-a"},
            {"containers",
             {{{"name", "shutdown-manager"}, {"image", "contour:1.28"}},
              {{"name", "envoy"}, {"image", "envoy:1.29"}}}}}},
          {"status",
           {{"phase", "Running"},
            {"conditions", {ready}},
            {"containerStatuses",
             {container("shutdown-manager", manager_ready), container("envoy", envoy_ready)}}}}};
}

kube::Pod parsed(const json& j) {
  auto p = kube::parsePod(j);
  EXPECT_TRUE(p) << p.error().message();
  return p ? *p : kube::Pod{};
}

TEST(EnvoyRestartRule, EkcosCasesAndTheEdges) {
  const auto d = std::chrono::minutes(5);
  struct Case {
    const char* name;
    json pod;
    bool restart;
  };
  json terminating = envoyPod("t", false, true, kNow - 10min, kNow - 10min);
  terminating["metadata"]["deletionTimestamp"] = kube::formatRfc3339(kNow);
  json pending = envoyPod("p", false, true, kNow - 10min, kNow - 10min);
  pending["status"]["phase"] = "Pending";
  json no_condition = envoyPod("n", false, true, kNow - 10min, kNow - 10min);
  no_condition["status"]["conditions"] = json::array();
  json waiting = envoyPod("w", false, true, kNow - 10min, kNow - 10min);
  waiting["status"]["containerStatuses"][1]["state"] = {{"waiting", {{"reason", "CrashLoop"}}}};
  const Case cases[] = {
      {"delete me", envoyPod("a", false, true, kNow - 10min, kNow - 10min), true},
      {"hasnt been enough time", envoyPod("b", false, true, kNow - 2min, kNow - 2min), false},
      {"restarted recently", envoyPod("c", false, true, kNow - 2min, kNow - 10min), false},
      {"not ready recently", envoyPod("c", false, true, kNow - 10min, kNow - 2min), false},
      {"healthy", envoyPod("d", true, true, kNow - 10min, kNow - 10min), false},
      {"both not ready", envoyPod("e", false, false, kNow - 10min, kNow - 10min), false},
      {"exactly the duration", envoyPod("f", false, true, kNow - 5min, kNow - 5min), false},
      {"terminating", terminating, false},
      {"pending", pending, false},
      {"no ContainersReady condition", no_condition, false},
      {"envoy not running", waiting, false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(envoyRestartVerdict(parsed(c.pod), kNow, d).restart, c.restart) << c.name;
  }
  // When it falls due: the latest of both starts and the transition, plus the duration.
  const EnvoyVerdict soon =
      envoyRestartVerdict(parsed(envoyPod("b", false, true, kNow - 3min, kNow - 2min)), kNow, d);
  ASSERT_TRUE(soon.due_at);
  EXPECT_EQ(*soon.due_at, kNow + 3min);
  EXPECT_THAT(soon.reason, HasSubstr("restarted after 5m"));
  EXPECT_FALSE(envoyRestartVerdict(parsed(envoyPod("d", true, true, kNow, kNow)), kNow, d).due_at);
  const EnvoyVerdict due =
      envoyRestartVerdict(parsed(envoyPod("a", false, true, kNow - 10min, kNow - 10min)), kNow, d);
  EXPECT_THAT(due.reason,
              HasSubstr("while shutdown-manager is ready (projectcontour/contour#3192)"));
}

class EnvoyRestartsTest : public ::testing::Test {
 protected:
  void start(std::vector<json> pods) {
    pods.push_back(kubesim::namespaceObject("projectcontour"));
    ASSERT_NO_FATAL_FAILURE(
        cluster_.start(dir_.path(), std::move(pods), {"/deploy", "/deploy-contour"}, real_));
  }
  void TearDown() override { cluster_.expectEveryRequestAllowed(); }

  // The cache as the agent's would show it: every app=envoy pod in the namespace, now.
  ObservedPods observe() {
    if (stale_) return *stale_;
    ObservedPods out{.synced = true};
    auto list = cluster_.client().list(kube::resources::kPods, "projectcontour",
                                       {.label_selector = "app=envoy"});
    EXPECT_TRUE(list) << list.error().message();
    if (!list) return out;
    for (const json& item : (*list)["items"]) out.pods.push_back(parsed(item));
    return out;
  }
  EnvoyRestarts controller(bool dry_run = false) {
    return EnvoyRestarts(
        [this] { return observe(); }, cluster_.client(), clock_,
        {.ns = "projectcontour",
         .not_ready_for = 5min,
         .effects = {.dry_run = dry_run,
                     .is_leader_fresh = [] { return true; },
                     .record_event =
                         [this](const kube::EventSpec& e) {
                           ASSERT_TRUE(cluster_.client().recordEvent(e));
                           events_.push_back(e.involved_name + " " + e.reason + " " + e.type);
                         }}});
  }
  bool exists(const std::string& name) {
    return cluster_.server().get("pods", "projectcontour", name).has_value();
  }
  // The Events recorded (each created through the API as the ServiceAccount).
  std::vector<std::string> events() {
    std::vector<std::string> out = events_;
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::TempDir dir_{"ekco-envoy"};
  base::SystemClock real_;
  base::ManualClock clock_{kNow};
  testing::ServiceAccountCluster cluster_;
  std::optional<ObservedPods> stale_;
  std::vector<std::string> events_;
};

TEST_F(EnvoyRestartsTest, OnePodPerPassTheLongestBrokenFirstAndWokenWhenTheNextFallsDue) {
  ASSERT_NO_FATAL_FAILURE(start({envoyPod("envoy-a", false, true, kNow - 20min, kNow - 20min),
                                 envoyPod("envoy-b", false, true, kNow - 10min, kNow - 10min),
                                 envoyPod("envoy-c", false, true, kNow - 2min, kNow - 2min),
                                 envoyPod("envoy-d", true, true, kNow - 30min, kNow - 30min)}));
  auto c = controller();
  auto first = c.reconcile();
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_EQ(first->summary, "restarted projectcontour/envoy-a");
  EXPECT_FALSE(exists("envoy-a"));
  EXPECT_TRUE(exists("envoy-b"));
  EXPECT_EQ(first->requeue_after, milliseconds(60'000));  // envoy-b is due too: a minute on

  // Straight after: envoy-b waits for its turn.
  auto second = c.reconcile();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->summary, "1 envoy pods to restart; the next in 1m (one per 1m)");
  EXPECT_TRUE(exists("envoy-b"));

  clock_.advance(60s);
  auto third = c.reconcile();
  ASSERT_TRUE(third) << third.error().message();
  EXPECT_EQ(third->summary, "restarted projectcontour/envoy-b");
  // envoy-c falls due 5 minutes after it went not ready (2 minutes before the start): woken then.
  EXPECT_EQ(third->requeue_after, milliseconds(120'001));

  clock_.advance(120s);
  auto not_yet = c.reconcile();
  ASSERT_TRUE(not_yet);
  EXPECT_TRUE(exists("envoy-c"));
  EXPECT_EQ(not_yet->requeue_after, milliseconds(1));
  clock_.advance(1ms);
  auto fourth = c.reconcile();
  ASSERT_TRUE(fourth) << fourth.error().message();
  EXPECT_EQ(fourth->summary, "restarted projectcontour/envoy-c");
  EXPECT_FALSE(fourth->requeue_after);  // nothing left on its way
  EXPECT_TRUE(exists("envoy-d"));       // healthy: never touched

  EXPECT_EQ(events(), (std::vector<std::string>{"envoy-a EnvoyPodRestarted Warning",
                                                "envoy-b EnvoyPodRestarted Warning",
                                                "envoy-c EnvoyPodRestarted Warning"}));
  const json status = c.status();
  EXPECT_EQ(status["history"].size(), 3u);
  EXPECT_EQ(status["last_restart"]["pod"], "projectcontour/envoy-c");
}

TEST_F(EnvoyRestartsTest, APodThatRecoveredSinceTheCacheSawItIsLeftAlone) {
  ASSERT_NO_FATAL_FAILURE(start({envoyPod("envoy-a", false, true, kNow - 20min, kNow - 20min)}));
  stale_ = observe();  // the cache as it was
  json healthy = envoyPod("envoy-a", true, true, kNow - 20min, kNow - 20min);
  ASSERT_TRUE(cluster_.server().put(healthy));  // envoy became ready meanwhile
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "projectcontour/envoy-a changed since the cache saw it; looking again");
  EXPECT_TRUE(exists("envoy-a"));
  EXPECT_TRUE(events().empty());
}

TEST_F(EnvoyRestartsTest, ADryRunDeletesNothing) {
  ASSERT_NO_FATAL_FAILURE(start({envoyPod("envoy-a", false, true, kNow - 20min, kNow - 20min)}));
  auto c = controller(/*dry_run=*/true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "would restart projectcontour/envoy-a (dry run)");
  EXPECT_THAT(r->plan,
              HasSubstr("restart envoy pod projectcontour/envoy-a: envoy not ready since"));
  EXPECT_TRUE(exists("envoy-a"));
  for (const auto& req : cluster_.server().requestLog()) {
    EXPECT_TRUE(req.verb == "get" || req.verb == "list") << req.verb << " " << req.path;
  }
}

}  // namespace
}  // namespace ekco::agent
