// The controllers of `ekco change-load-balancer` over the fake API: the leader's journal before
// each task, Events, the end recorded once, fencing and dry run (change_leader.h); a node's step
// run once on its own thread with `running` first, resumed after a restart, and its answer
// (change_node.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/features/api_address/change.h"
#include "agent/features/api_address/change_leader.h"
#include "agent/features/api_address/change_node.h"
#include "kube/decode/json_fields.h"
#include "tests/agent/features/api_address/change_support.h"
#include "tests/fakes/fake_kube.h"

namespace ekco::agent {
namespace {

using api_address::NodeResult;
using api_address::NodeTask;
using api_address::Step;
using api_address::StepState;
using kube::testing::FakeKube;
using kube::testing::Verb;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ChangeLeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kube_.put(kube::resources::kNodes, testing::readyNode("cp-1", true));
    kube_.put(kube::resources::kNodes, testing::readyNode("worker-1", false));
    kube_.put(kube::resources::kConfigMaps,
              api_address::requestConfigMap("kurl", {.id = "r1",
                                                     .server = "https://localhost:6444",
                                                     .old_server = "https://10.0.0.1:6443"}));
  }
  ChangeLeaderController leader(bool dry_run = false) {
    return ChangeLeaderController(
        [this]() -> base::Result<std::optional<json>> {
          return kube_.object(kube::resources::kConfigMaps, "kurl", "ekco-api-address");
        },
        [this] {
          ObservedNodes o{.synced = true};
          for (const char* n : {"cp-1", "worker-1"}) {
            o.nodes.push_back(testing::nodeRecordOf(*kube_.object(kube::resources::kNodes, "", n)));
          }
          return o;
        },
        kube_, clock_,
        {.ns = "kurl",
         .effects = {.dry_run = dry_run,
                     .is_leader_fresh = [this] { return fresh_; },
                     .record_event =
                         [this](const kube::EventSpec& e) {
                           events_.push_back(e.reason + " " + e.involved_name);
                         }}});
  }
  std::optional<NodeTask> taskOf(const std::string& n) {
    const json o = *kube_.object(kube::resources::kNodes, "", n);
    const std::string t =
        kube::jsonText(kube::jsonField(o["metadata"], "annotations"), api_address::kTaskAnnotation);
    if (t.empty()) return std::nullopt;
    auto parsed = api_address::parseTask(t);
    return parsed ? std::optional(*parsed) : std::nullopt;
  }
  void answer(const std::string& n, Step step, StepState state, std::string why = "") {
    json o = *kube_.object(kube::resources::kNodes, "", n);
    o["metadata"]["annotations"][std::string(api_address::kResultAnnotation)] =
        api_address::renderResult({.id = "r1", .step = step, .state = state, .why = why});
    kube_.put(kube::resources::kNodes, o);
  }
  json data() {
    return (*kube_.object(kube::resources::kConfigMaps, "kurl", "ekco-api-address"))["data"];
  }

  FakeKube kube_;
  base::SystemClock clock_;
  bool fresh_ = true;
  std::vector<std::string> events_;
};

TEST_F(ChangeLeaderTest, JournalsEachStepBeforeTheNextTaskAndRecordsTheEnd) {
  auto l = leader();
  ASSERT_TRUE(l.reconcile());
  ASSERT_TRUE(taskOf("cp-1"));
  EXPECT_EQ(taskOf("cp-1")->step, Step::kCertificate);
  EXPECT_THAT(taskOf("cp-1")->add, ElementsAre("localhost"));
  EXPECT_FALSE(taskOf("worker-1"));
  EXPECT_THAT(data()["progress"].get<std::string>(), HasSubstr(R"("state":"running")"));
  EXPECT_THAT(events_, ElementsAre("ApiAddressStep cp-1"));
  // Nothing new: no write.
  const int patches = kube_.count(Verb::kPatch);
  ASSERT_TRUE(l.reconcile());
  EXPECT_EQ(kube_.count(Verb::kPatch), patches);

  answer("cp-1", Step::kCertificate, StepState::kDone, "re-issued");
  ASSERT_TRUE(l.reconcile());
  EXPECT_EQ(taskOf("cp-1")->step, Step::kKubeconfigs);
  EXPECT_TRUE(taskOf("cp-1")->admin);
  // The journal says certificate cp-1 done, whatever cp-1's annotation says next.
  EXPECT_THAT(api_address::doneSteps(json::parse(data()["progress"].get<std::string>()), "r1"),
              ElementsAre(std::pair{Step::kCertificate, std::string("cp-1")}));
  answer("cp-1", Step::kKubeconfigs, StepState::kRunning);
  ASSERT_TRUE(l.reconcile());
  EXPECT_EQ(taskOf("cp-1")->step, Step::kKubeconfigs);
  answer("cp-1", Step::kKubeconfigs, StepState::kDone);
  ASSERT_TRUE(l.reconcile());
  ASSERT_TRUE(taskOf("worker-1"));
  EXPECT_FALSE(taskOf("worker-1")->admin);
  answer("worker-1", Step::kKubeconfigs, StepState::kFailed, "the new address does not answer");
  auto r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(data()["result"], "worker-1: kubeconfigs: the new address does not answer");
  EXPECT_EQ(events_.back(), "ApiAddressChangeFailed worker-1");
  // Ended: nothing more.
  const int after = kube_.count(Verb::kPatch);
  ASSERT_TRUE(l.reconcile());
  EXPECT_EQ(kube_.count(Verb::kPatch), after);
  EXPECT_THAT(l.status()["summary"].get<std::string>(), HasSubstr("stopped: worker-1"));
}

TEST_F(ChangeLeaderTest, EveryStepDoneIsSuccess) {
  auto l = leader();
  for (auto [n, step] :
       {std::pair{"cp-1", Step::kCertificate}, std::pair{"cp-1", Step::kKubeconfigs},
        std::pair{"worker-1", Step::kKubeconfigs}}) {
    ASSERT_TRUE(l.reconcile());
    ASSERT_EQ(taskOf(n)->step, step) << n;
    answer(n, step, StepState::kDone);
  }
  ASSERT_TRUE(l.reconcile());
  EXPECT_EQ(data()["result"], "success");
  EXPECT_EQ(events_.back(), "ApiAddressChanged ekco-api-address");
}

TEST_F(ChangeLeaderTest, NothingIsWrittenWithoutAFreshLeaseOrInADryRun) {
  fresh_ = false;
  auto stale = leader().reconcile();
  ASSERT_FALSE(stale);
  EXPECT_THAT(stale.error().message(), HasSubstr("leadership is not fresh"));
  fresh_ = true;
  auto l = leader(/*dry_run=*/true);
  auto r = l.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("would record the API address change's progress"));
  EXPECT_EQ(kube_.count(Verb::kPatch), 0);
  EXPECT_FALSE(taskOf("cp-1"));
  EXPECT_TRUE(events_.empty());
}

class ChangeNodeTest : public ::testing::Test {
 protected:
  ChangeNodeController controller() {
    return ChangeNodeController(
        {.own_node =
             [this] {
               std::lock_guard lock(mu_);
               kube::NodeRecord n;
               n.name = kube::Atom("cp-1");
               n.ekco_annotations = annotations_;
               return ObservedNode{.synced = true, .node = n};
             },
         .answer = [this](const std::string& value) -> base::Status {
           std::lock_guard lock(mu_);
           if (value.find(R"("state":"running")") == std::string::npos &&
               failing_final_answers_ > 0) {
             --failing_final_answers_;
             return base::Error("the API is away", base::ErrorCode::kUnavailable);
           }
           answers_.push_back(value);
           set(api_address::kResultAnnotation, value);
           return base::ok();
         },
         .run_step = [this](const NodeTask& t, bool resumed) -> base::Result<std::string> {
           std::lock_guard lock(mu_);
           runs_.push_back(std::string(api_address::stepName(t.step)) +
                           (resumed ? " resumed" : ""));
           if (fail_) return base::Error("kubelet did not come back", base::ErrorCode::kTimeout);
           return std::string("kubelet.conf points at https://localhost:6444");
         },
         .restart_agent =
             [this](std::string why) {
               std::lock_guard lock(mu_);
               restarts_.push_back(std::move(why));
             }},
        clock_, {.node_name = "cp-1", .agent_server = agent_server_});
  }
  void set(std::string_view key, const std::string& value) {
    for (auto& [k, v] : annotations_) {
      if (k == key) {
        v = value;
        return;
      }
    }
    annotations_.emplace_back(std::string(key), value);
  }
  void task(Step step) {
    std::lock_guard lock(mu_);
    set(api_address::kTaskAnnotation, api_address::renderTask({.id = "r1",
                                                               .step = step,
                                                               .server = "https://localhost:6444",
                                                               .at = clock_.wallNow()}));
  }

  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> annotations_;
  std::vector<std::string> answers_;
  base::ManualClock clock_;
  std::vector<std::string> runs_;
  std::vector<std::string> restarts_;
  int failing_final_answers_ = 0;
  bool fail_ = false;
  std::string agent_server_ = "https://10.0.0.1:6443";
};

TEST_F(ChangeNodeTest, RunsEachTaskOnceAnswersRunningThenDoneOrFailed) {
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->summary, "no task");
  task(Step::kKubeconfigs);
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_THAT(runs_, ElementsAre("kubeconfigs"));
  ASSERT_EQ(answers_.size(), 2U);
  EXPECT_EQ(api_address::parseResult(answers_[0])->state, StepState::kRunning);
  EXPECT_EQ(api_address::parseResult(answers_[1])->state, StepState::kDone);
  EXPECT_EQ(api_address::parseResult(answers_[1])->why,
            "kubelet.conf points at https://localhost:6444");
  // Its kubeconfigs moved: a fresh agent process is asked for (its connection).
  EXPECT_THAT(restarts_,
              ElementsAre("this node's kubeconfigs now point at https://localhost:6444"));
  // Answered: never again.
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_EQ(runs_.size(), 1U);
  // A failing step.
  fail_ = true;
  task(Step::kDropSans);
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_EQ(api_address::parseResult(answers_.back())->state, StepState::kFailed);
  EXPECT_THAT(api_address::parseResult(answers_.back())->why,
              HasSubstr("kubelet did not come back"));
  EXPECT_EQ(restarts_.size(), 1U);  // not after a failure, nor after another step
}

TEST_F(ChangeNodeTest, NoRestartWhenTheAgentAlreadyTalksToTheNewAddress) {
  agent_server_ = "https://localhost:6444";  // a change run again after this node moved
  auto c = controller();
  task(Step::kKubeconfigs);
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_THAT(runs_, ElementsAre("kubeconfigs"));
  EXPECT_EQ(api_address::parseResult(answers_.back())->state, StepState::kDone);
  EXPECT_THAT(restarts_, ::testing::IsEmpty());
}

TEST_F(ChangeNodeTest, AStaleTaskIsNotStartedAndAnUnsentAnswerIsRetriedNotRerun) {
  {
    std::lock_guard lock(mu_);
    set(api_address::kTaskAnnotation, api_address::renderTask({.id = "r1",
                                                               .step = Step::kKubeconfigs,
                                                               .server = "https://localhost:6444",
                                                               .at = clock_.wallNow()}));
  }
  clock_.advance(std::chrono::minutes(16));  // nobody started it meanwhile
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r);
  EXPECT_THAT(r->summary, HasSubstr("older than 15m and was never started; not run"));
  EXPECT_TRUE(runs_.empty());

  // A fresh task whose final answer cannot be written (the API is away): the answer stays
  // `running` in the cache, yet this process does not run the step again; it writes the answer.
  task(Step::kCertificate);
  failing_final_answers_ = 3;
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_THAT(runs_, ElementsAre("certificate"));
  EXPECT_EQ(api_address::parseResult(answers_.back())->state, StepState::kRunning);
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_THAT(runs_, ElementsAre("certificate"));
  EXPECT_EQ(api_address::parseResult(answers_.back())->state, StepState::kDone);
}

TEST_F(ChangeNodeTest, ARunningAnswerOfAnEarlierProcessIsResumed) {
  task(Step::kCertificate);
  set(api_address::kResultAnnotation,
      api_address::renderResult(
          {.id = "r1", .step = Step::kCertificate, .state = StepState::kRunning}));
  auto c = controller();  // a new process: it did not write that answer
  ASSERT_TRUE(c.reconcile());
  c.join();
  EXPECT_THAT(runs_, ElementsAre("certificate resumed"));
  EXPECT_EQ(api_address::parseResult(answers_.back())->state, StepState::kDone);
}

}  // namespace
}  // namespace ekco::agent
