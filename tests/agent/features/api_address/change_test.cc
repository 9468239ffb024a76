// agent/features/api_address/change.h: the records round-trip, malformed ones are refused, and
// the leader's decision as a table: the order (certificates on the primaries, then every node's
// kubeconfigs, primaries first, then the old names dropped), resumption from the nodes'
// answers, and every way the operation stops.
#include "agent/features/api_address/change.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ekco::agent::api_address {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

const base::WallTime kNow = std::chrono::sys_days{std::chrono::year{2026} / 11 / 29} + 7h;

ChangeRequest request() {
  return {.id = "r1",
          .server = "https://localhost:6444",
          .old_server = "https://10.0.0.1:6443",
          .internal = true,
          .drop_old_sans = true,
          .exclude = {}};
}

std::vector<ChangeNode> cluster() {
  return {{.name = "worker-2", .ready = true},
          {.name = "cp-2", .control_plane = true, .ready = true},
          {.name = "cp-1", .control_plane = true, .ready = true},
          {.name = "worker-1", .ready = true}};
}

std::vector<std::string> order(const std::vector<std::pair<Step, std::string>>& steps) {
  std::vector<std::string> out;
  for (const auto& [step, node] : steps) out.push_back(std::string(stepName(step)) + " " + node);
  return out;
}

TEST(ApiAddressChange, RecordsRoundTripAndBadOnesAreRefused) {
  const ChangeRequest r = request();
  auto back = parseRequest(requestConfigMap("kurl", r));
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_EQ(*back, r);
  auto cm =
      requestConfigMap("kurl", {.id = "r2", .server = "https://lb:6443", .exclude = {"a", "b"}});
  EXPECT_EQ(cm["data"]["exclude"], "a,b");
  EXPECT_THAT(parseRequest(cm)->exclude, ElementsAre("a", "b"));
  cm["data"]["server"] = "http://lb";
  EXPECT_THAT(parseRequest(cm).error().message(),
              HasSubstr("ConfigMap ekco-api-address data.server: \"http://lb\" is not an https"));
  cm["data"]["server"] = "https://lb";
  cm["data"]["internal"] = "yes";
  EXPECT_THAT(parseRequest(cm).error().message(), HasSubstr("data.internal: want true or false"));

  const NodeTask t{.id = "r1",
                   .step = Step::kKubeconfigs,
                   .server = "https://localhost:6444",
                   .admin = true,
                   .at = kNow};
  EXPECT_EQ(*parseTask(renderTask(t)), t);
  const NodeResult res{
      .id = "r1", .step = Step::kDropSans, .state = StepState::kFailed, .why = "x"};
  EXPECT_EQ(*parseResult(renderResult(res)), res);
  EXPECT_FALSE(parseTask("{"));
  EXPECT_THAT(
      parseTask(R"({"id":"r","step":"reboot","at":"2026-11-29T07:00:00Z"})").error().message(),
      HasSubstr("unknown step \"reboot\""));
  EXPECT_THAT(
      parseTask(
          R"({"id":"r","step":"kubeconfigs","server":"https://a b","at":"2026-11-29T07:00:00Z"})")
          .error()
          .message(),
      HasSubstr("is not an https://HOST[:PORT] URL"));
  EXPECT_THAT(parseResult(R"({"id":"r","step":"certificate","state":"maybe"})").error().message(),
              HasSubstr("unknown state \"maybe\""));
}

TEST(ApiAddressChange, TheStepsArePrimariesCertificatesThenKubeconfigsThenTheOldNames) {
  // With --internal, the load balancer answers on every node before any node moves.
  EXPECT_THAT(order(changeSteps(request(), cluster())),
              ElementsAre("certificate cp-1", "certificate cp-2", "check cp-1", "check cp-2",
                          "check worker-1", "check worker-2", "kubeconfigs cp-1",
                          "kubeconfigs cp-2", "kubeconfigs worker-1", "kubeconfigs worker-2",
                          "drop-sans cp-1", "drop-sans cp-2"));
  ChangeRequest keep = request();
  keep.internal = false;
  keep.drop_old_sans = false;
  keep.exclude = {"cp-2", "worker-1"};
  EXPECT_THAT(order(changeSteps(keep, cluster())),
              ElementsAre("certificate cp-1", "kubeconfigs cp-1", "kubeconfigs worker-2"));
  // The same host on another port: nothing to drop.
  ChangeRequest same = request();
  same.old_server = "https://localhost:6443";
  EXPECT_EQ(changeSteps(same, cluster()).size(), 10U);
}

// With --internal: after the certificates, every node checks the new address answers there (its
// load balancer is up) before the first one moves.
TEST(ApiAddressChange, WithTheInternalLoadBalancerEveryNodeChecksBeforeAnyMoves) {
  ChangeView view{.request = request(),
                  .recorded_done = {{Step::kCertificate, "cp-1"}, {Step::kCertificate, "cp-2"}},
                  .nodes = cluster(),
                  .now = kNow};
  ChangeDecision d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "cp-1");
  EXPECT_EQ(d.task.step, Step::kCheck);
  EXPECT_EQ(d.task.server, "https://localhost:6444");
  EXPECT_EQ(*parseTask(renderTask(d.task)), d.task);
  for (const char* n : {"cp-1", "cp-2", "worker-1", "worker-2"}) {
    view.recorded_done.emplace_back(Step::kCheck, n);
  }
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.task.step, Step::kKubeconfigs);
  // A worker whose load balancer does not answer stops it before any node moved.
  view.recorded_done.pop_back();  // worker-2's check
  view.nodes[0].result = NodeResult{.id = "r1",
                                    .step = Step::kCheck,
                                    .state = StepState::kFailed,
                                    .why = "the new address does not answer on this node"};
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kFinish);
  EXPECT_EQ(d.result, "worker-2: check: the new address does not answer on this node");
}

TEST(ApiAddressChange, OneNodeAtATimeResumedFromTheNodesAnswers) {
  ChangeRequest r = request();
  r.internal = false;
  ChangeView view{.request = r, .nodes = cluster(), .now = kNow};
  // Nothing done: cp-1's certificate, with the new host.
  ChangeDecision d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "cp-1");
  EXPECT_EQ(d.task.step, Step::kCertificate);
  EXPECT_THAT(d.task.add, ElementsAre("localhost"));
  EXPECT_EQ(d.task.at, kNow);
  EXPECT_EQ(d.progress["steps"][0]["state"], "running");
  EXPECT_EQ(d.progress["steps"][1]["state"], "pending");

  // Assigned, no answer yet (or running): wait.
  ChangeNode& cp1 = view.nodes[2];
  cp1.task = d.task;
  EXPECT_EQ(planChange(view).kind, ChangeDecision::Kind::kWait);
  cp1.result = NodeResult{.id = "r1", .step = Step::kCertificate, .state = StepState::kRunning};
  EXPECT_EQ(planChange(view).kind, ChangeDecision::Kind::kWait);
  // An answer of another request or step does not count.
  cp1.result = NodeResult{.id = "r0", .step = Step::kCertificate, .state = StepState::kDone};
  EXPECT_EQ(planChange(view).kind, ChangeDecision::Kind::kWait);

  // Done: recorded in the progress (the ConfigMap, the leader's journal), the next primary.
  cp1.result = NodeResult{.id = "r1", .step = Step::kCertificate, .state = StepState::kDone};
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "cp-2");
  view.recorded_done = doneSteps(d.progress, "r1");
  EXPECT_THAT(order(view.recorded_done), ElementsAre("certificate cp-1"));

  // Every certificate done: cp-1's kubeconfigs, the server, admin on a primary.
  ChangeNode& cp2 = view.nodes[1];
  cp2.task = d.task;
  cp2.result = NodeResult{.id = "r1", .step = Step::kCertificate, .state = StepState::kDone};
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "cp-1");
  EXPECT_EQ(d.task.step, Step::kKubeconfigs);
  EXPECT_EQ(d.task.server, "https://localhost:6444");
  EXPECT_TRUE(d.task.admin);
  view.recorded_done = doneSteps(d.progress, "r1");
  // cp-1's annotation now answers its kubeconfigs step: its certificate stays done (recorded).
  cp1.task = d.task;
  cp1.result = NodeResult{.id = "r1", .step = Step::kKubeconfigs, .state = StepState::kRunning};
  d = planChange(view);
  EXPECT_EQ(d.kind, ChangeDecision::Kind::kWait);
  EXPECT_EQ(d.progress["steps"][0]["state"], "done");

  // A new leader, from the recorded progress and the nodes' last answers: every kubeconfigs
  // step done but worker-2's, which is next; nothing before it is redone.
  for (ChangeNode& n : view.nodes) {
    n.result = NodeResult{.id = "r1", .step = Step::kKubeconfigs, .state = StepState::kDone};
  }
  view.nodes[0].result.reset();  // worker-2
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "worker-2");
  EXPECT_FALSE(d.task.admin);
  // Then the old names, on each primary.
  view.recorded_done = doneSteps(d.progress, "r1");
  view.nodes[0].result =
      NodeResult{.id = "r1", .step = Step::kKubeconfigs, .state = StepState::kDone};
  d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kAssign);
  EXPECT_EQ(d.node, "cp-1");
  EXPECT_EQ(d.task.step, Step::kDropSans);
  EXPECT_THAT(d.task.drop, ElementsAre("10.0.0.1"));
  // A progress of another request records nothing.
  EXPECT_TRUE(doneSteps(d.progress, "r0").empty());
}

TEST(ApiAddressChange, AFailureANodeNotReadyOrSilenceStopsIt) {
  ChangeView view{.request = request(), .nodes = cluster(), .now = kNow};
  view.nodes[2].result = NodeResult{.id = "r1",
                                    .step = Step::kCertificate,
                                    .state = StepState::kFailed,
                                    .why = "not verified within 3m"};
  ChangeDecision d = planChange(view);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kFinish);
  EXPECT_EQ(d.result, "cp-1: certificate: not verified within 3m");
  EXPECT_EQ(d.progress["steps"][0]["state"], "failed");
  EXPECT_EQ(d.progress["steps"][1]["state"], "pending");
  // Once the result is written: idle, the progress kept.
  view.result = d.result;
  d = planChange(view);
  EXPECT_EQ(d.kind, ChangeDecision::Kind::kIdle);
  EXPECT_THAT(d.summary, HasSubstr("stopped: cp-1: certificate: not verified within 3m"));

  ChangeView down{.request = request(), .nodes = cluster(), .now = kNow};
  down.nodes[2].ready = false;
  d = planChange(down);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kFinish);
  EXPECT_EQ(d.result, "cp-1: certificate: the node is not Ready (bring it back, or --exclude it)");

  EXPECT_TRUE(d.withdraw.empty());  // cp-1 answered (failed), nobody else had a task

  ChangeView silent{.request = request(), .nodes = cluster(), .now = kNow};
  silent.nodes[2].task = NodeTask{.id = "r1", .step = Step::kCertificate, .at = kNow - 16min};
  d = planChange(silent);
  ASSERT_EQ(d.kind, ChangeDecision::Kind::kFinish);
  EXPECT_THAT(d.result, HasSubstr("cp-1: certificate: no final answer within 15m"));
  EXPECT_THAT(d.withdraw, ElementsAre("cp-1"));  // so cp-1's agent, back later, does not start it
  silent.nodes[2].task->at = kNow - 14min;
  EXPECT_EQ(planChange(silent).kind, ChangeDecision::Kind::kWait);

  EXPECT_EQ(planChange({}).kind, ChangeDecision::Kind::kIdle);
}

TEST(ApiAddressChange, EveryStepDoneIsSuccess) {
  ChangeRequest r = request();
  r.internal = false;
  r.drop_old_sans = false;
  ChangeView view{.request = r,
                  .recorded_done = {{Step::kCertificate, "cp-1"}, {Step::kCertificate, "cp-2"}},
                  .nodes = cluster(),
                  .now = kNow};
  for (ChangeNode& n : view.nodes) {
    n.result = NodeResult{.id = "r1", .step = Step::kKubeconfigs, .state = StepState::kDone};
  }
  const ChangeDecision d = planChange(view);
  EXPECT_EQ(d.kind, ChangeDecision::Kind::kFinish) << d.summary;
  EXPECT_EQ(d.result, "success");
  EXPECT_EQ(doneSteps(d.progress, "r1").size(), 6U);
}

}  // namespace
}  // namespace ekco::agent::api_address
