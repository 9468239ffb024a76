// kotsadm-ha: the rqlite plan as a table, and the controller against ekco-kubesim as the ekco
// ServiceAccount with deploy/'s RBAC enforced (a call the manifests do not grant fails the test).
#include "agent/features/minio/kotsadm_ha.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/policy/storage_migration.h"
#include "base/clock.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/sa_client.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json rqlite(int replicas, std::vector<std::string> args) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", "kotsadm-rqlite"}, {"namespace", "default"}}},
          {"spec",
           {{"replicas", replicas},
            {"serviceName", "kotsadm-rqlite-headless"},
            {"selector", {{"matchLabels", {{"app", "kotsadm-rqlite"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "kotsadm-rqlite"}}}}},
              {"spec",
               {{"containers",
                 {{{"name", "rqlite"}, {"image", "rqlite/rqlite:7.21.4"}, {"args", args}}}}}}}}}}};
}

kube::NodeRecord node(const std::string& name, bool ready) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  n.conditions.push_back(
      {.type = kube::Atom("Ready"), .status = kube::Atom(ready ? "True" : "False")});
  return n;
}

const std::vector<std::string> kArgs = {"-disco-mode=dns", "-bootstrap-expect=1",
                                        "-join-interval=1s"};

TEST(KotsadmHaPlan, ThreeReplicasAndBootstrapExpectThreeAtThreeReadyNodesNeverDown) {
  struct Case {
    int replicas;
    std::vector<std::string> args;
    int ready;
    std::optional<std::int64_t> want_replicas;  // nullopt: no plan
    std::string want_arg;                       // the -bootstrap-expect argument after
  };
  const Case cases[] = {
      {1, kArgs, 2, std::nullopt, ""},                            // two Ready nodes: not yet
      {1, kArgs, 3, 3, "-bootstrap-expect=3"},                    // EKCO's case
      {1, {"-bootstrap-expect", "1"}, 3, 3, "3"},                 // the value as the next argument
      {3, {"-bootstrap-expect=3"}, 5, std::nullopt, ""},          // already
      {5, {"-bootstrap-expect=5"}, 3, std::nullopt, ""},          // set by hand above: never down
      {3, {"-bootstrap-expect=1"}, 3, 3, "-bootstrap-expect=3"},  // replicas right, arg not
      {1, {"-bootstrap-expect=x"}, 4, 3, "-bootstrap-expect=3"},  // unreadable: rewritten
      {1, {}, 3, 3, ""},                                          // no arguments: replicas only
  };
  for (const Case& c : cases) {
    auto plan = planKotsadmRqlite(rqlite(c.replicas, c.args), c.ready);
    ASSERT_EQ(plan.has_value(), c.want_replicas.has_value()) << c.replicas << " " << c.ready;
    if (!plan) continue;
    EXPECT_EQ(plan->replicas_to, *c.want_replicas);
    if (!c.want_arg.empty()) {
      EXPECT_THAT(plan->args_to, ::testing::Contains(c.want_arg));
    }
  }
  EXPECT_EQ(countReadyNodes({node("a", true), node("b", false), node("c", true)}), 2);
}

// A StatefulSet with fields of another type is read as if they were absent; nothing throws.
TEST(KotsadmHaRules, WronglyTypedFieldsReadAsAbsentNeverThrow) {
  const json bad[] = {
      {{"spec", "x"}},
      {{"spec", {{"replicas", "1"}, {"template", json::array()}}}},
      {{"spec", {{"template", {{"spec", {{"containers", "rqlite"}}}}}}}},
      {{"spec", {{"template", {{"spec", {{"containers", json::array({"rqlite"})}}}}}}}},
      {{"spec", {{"template", {{"spec", {{"containers", {{{"args", "-bootstrap-expect=1"}}}}}}}}}}},
  };
  for (const json& sts : bad) {
    auto plan = planKotsadmRqlite(sts, 3);
    ASSERT_TRUE(plan) << sts.dump();
    EXPECT_EQ(plan->replicas_from, 1) << sts.dump();
    EXPECT_EQ(plan->replicas_to, 3) << sts.dump();
    EXPECT_TRUE(plan->args_from.empty()) << sts.dump();
  }
  EXPECT_FALSE(planKotsadmRqlite(json("kotsadm-rqlite"), 3));
}

class KotsadmHaTest : public ::testing::Test {
 protected:
  void start(std::vector<json> objects) {
    ASSERT_NO_FATAL_FAILURE(cluster_.start(dir_.path(), std::move(objects), {"/deploy"}, real_));
  }
  void TearDown() override { cluster_.expectEveryRequestAllowed(); }
  KotsadmHa controller(bool dry_run = false) {
    return KotsadmHa(
        [this] { return ObservedNodes{.synced = true, .nodes = nodes_}; }, cluster_.client(),
        {.effects = {.dry_run = dry_run,
                     .is_leader_fresh = [] { return true; },
                     .record_event =
                         [this](const kube::EventSpec& e) {
                           ASSERT_TRUE(cluster_.client().recordEvent(e));
                           events_.push_back(e.involved_name + " " + e.reason + ": " + e.message);
                         }}});
  }
  void setReady(int n) {
    nodes_.clear();
    for (int i = 0; i < n; ++i) nodes_.push_back(node("node-" + std::to_string(i), true));
    nodes_.push_back(node("node-down", false));
  }
  json sts() {
    return cluster_.server()
        .get("statefulsets.apps", "default", "kotsadm-rqlite")
        .value_or(nullptr);
  }

  testing::TempDir dir_{"ekco-kotsadm"};
  base::SystemClock real_;
  testing::ServiceAccountCluster cluster_;
  std::vector<kube::NodeRecord> nodes_;
  std::vector<std::string> events_;
};

TEST_F(KotsadmHaTest, ScalesRqliteAtThreeReadyNodesWithAnEventAndThenLeavesItAlone) {
  ASSERT_NO_FATAL_FAILURE(start({rqlite(1, kArgs)}));
  auto c = controller();
  setReady(2);  // and one not Ready: two count
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(sts()["spec"]["replicas"], 1);
  EXPECT_THAT(r->summary, HasSubstr("2 Ready nodes: fewer than 3"));

  setReady(3);
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(sts()["spec"]["replicas"], 3);
  EXPECT_EQ(sts()["spec"]["template"]["spec"]["containers"][0]["args"],
            json({"-disco-mode=dns", "-bootstrap-expect=3", "-join-interval=1s"}));
  EXPECT_THAT(events_, ::testing::ElementsAre("kotsadm-rqlite Scaled: ekco set replicas 1 -> 3, "
                                              "-bootstrap-expect=3 (3 Ready nodes)"));
  EXPECT_THAT(c.status().dump(), HasSubstr("scaled StatefulSet default/kotsadm-rqlite"));

  setReady(1);  // nodes left: never scaled down
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(sts()["spec"]["replicas"], 3);
  EXPECT_EQ(events_.size(), 1u);
}

TEST_F(KotsadmHaTest, AbsentIsANoOpAndDryRunChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(start({}));
  setReady(3);
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "StatefulSet default/kotsadm-rqlite absent: nothing to scale");

  ASSERT_TRUE(cluster_.server().put(rqlite(1, kArgs)));
  auto dry = controller(/*dry_run=*/true);
  r = dry.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->summary, HasSubstr("would scale StatefulSet default/kotsadm-rqlite (dry run)"));
  EXPECT_EQ(sts()["spec"]["replicas"], 1);
  EXPECT_TRUE(events_.empty());
}

TEST_F(KotsadmHaTest, WaitsWhileAStorageMigrationRunsAndActsOnceItIsOver) {
  // kURL#4326: the MinIO migration's state in kurl says a migration is running.
  ASSERT_NO_FATAL_FAILURE(start(
      {rqlite(1, kArgs),
       {{"apiVersion", "v1"},
        {"kind", "ConfigMap"},
        {"metadata", {{"name", std::string(kStorageMigrationConfigMap)}, {"namespace", "kurl"}}},
        {"data", {{"migration", "minio"}, {"phase", "copying"}}}}}));
  setReady(3);
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->summary, HasSubstr("waiting: a storage migration is running (minio migration "
                                    "copying)"));
  EXPECT_EQ(sts()["spec"]["replicas"], 1);

  // A failed migration is not running (it changed nothing): kotsadm may scale.
  auto state = readStorageMigration(cluster_.client(), "kurl");
  ASSERT_TRUE(state) << state.error().message();
  auto data = state->data;
  data["phase"] = "failed";
  ASSERT_TRUE(writeStorageMigration(cluster_.client(), "kurl", *state, data));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(sts()["spec"]["replicas"], 3);
}

}  // namespace
}  // namespace ekco::agent
