// kubesim's pure parts: selectors, strategic merge patch, object and exec-script parsing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/apply/patch.h"
#include "tests/kubesim/features/exec_run.h"
#include "tests/kubesim/server/server.h"
#include "tests/kubesim/store/selector.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;

bool labelsMatch(const std::string& selector, const json& labels) {
  auto sel = LabelSelector::parse(selector);
  EXPECT_TRUE(sel) << selector;
  return sel && sel->matches(labels);
}

TEST(LabelSelector, NegativeRequirementsMatchObjectsWithoutTheLabel) {
  EXPECT_TRUE(labelsMatch("app!=web", json()));
  EXPECT_TRUE(labelsMatch("app notin (web,db)", json::object()));
  EXPECT_FALSE(labelsMatch("app in (web)", json()));
  EXPECT_TRUE(labelsMatch("!app", json::object()));
  EXPECT_TRUE(labelsMatch("", json()));
}

TEST(LabelSelector, SetRequirementsAndEqualityCombineWithAnd) {
  json labels = {{"app", "web"}, {"tier", "fe"}, {"node-role.kubernetes.io/control-plane", ""}};
  EXPECT_TRUE(labelsMatch("app in (db, web),tier=fe", labels));
  EXPECT_TRUE(labelsMatch("node-role.kubernetes.io/control-plane", labels));
  EXPECT_TRUE(labelsMatch("node-role.kubernetes.io/control-plane=", labels));
  EXPECT_FALSE(labelsMatch("app in (db),tier=fe", labels));
  EXPECT_FALSE(labelsMatch("tier==be", labels));
}

TEST(LabelSelector, MalformedSelectorsAreErrors) {
  EXPECT_FALSE(LabelSelector::parse("app in web"));
  EXPECT_FALSE(LabelSelector::parse("a,,b"));
  EXPECT_FALSE(LabelSelector::parse("=x"));
}

TEST(FieldSelector, MissingFieldsCompareAsEmpty) {
  auto sel = FieldSelector::parse("spec.nodeName=");
  ASSERT_TRUE(sel);
  EXPECT_TRUE(sel->matches(json{{"spec", json::object()}}));
  auto neg = FieldSelector::parse("status.phase!=Running");
  ASSERT_TRUE(neg);
  EXPECT_TRUE(neg->matches(json::object()));
  EXPECT_FALSE(neg->matches(json{{"status", {{"phase", "Running"}}}}));
  EXPECT_FALSE(FieldSelector::parse("spec.nodeName"));
}

TEST(StrategicMergePatch, MergesListsByKeyAndSetsAndReplacesOthers) {
  json target = {
      {"metadata", {{"finalizers", {"a"}}, {"labels", {{"x", "1"}, {"y", "2"}}}}},
      {"spec",
       {{"containers", {{{"name", "a"}, {"image", "1"}}, {{"name", "b"}, {"image", "1"}}}},
        {"tolerations", {{{"key", "t1"}}}},
        {"unschedulable", true}}}};
  json patch = {
      {"metadata", {{"finalizers", {"b", "a"}}, {"labels", {{"x", nullptr}}}}},
      {"spec",
       {{"containers", {{{"name", "b"}, {"image", "2"}}, {{"name", "c"}, {"image", "3"}}}},
        {"tolerations", {{{"key", "t2"}}}},
        {"unschedulable", nullptr},
        {"$setElementOrder/containers", {{{"name", "a"}}}}}}};
  auto out = strategicMergePatch(target, patch);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["metadata"]["finalizers"], (json{"a", "b"}));
  EXPECT_EQ((*out)["metadata"]["labels"], (json{{"y", "2"}}));
  EXPECT_EQ((*out)["spec"]["containers"], (json{{{"name", "a"}, {"image", "1"}},
                                                {{"name", "b"}, {"image", "2"}},
                                                {{"name", "c"}, {"image", "3"}}}));
  EXPECT_EQ((*out)["spec"]["tolerations"], (json{{{"key", "t2"}}}));
  EXPECT_FALSE((*out)["spec"].contains("unschedulable"));
  EXPECT_FALSE((*out)["spec"].contains("$setElementOrder/containers"));
}

TEST(StrategicMergePatch, DirectivesDeleteElementsAndReplaceMaps) {
  json target = {{"metadata", {{"finalizers", {"a", "b"}}, {"annotations", {{"x", "1"}}}}},
                 {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  json patch = {{"metadata",
                 {{"$deleteFromPrimitiveList/finalizers", {"a"}},
                  {"annotations", {{"$patch", "replace"}, {"y", "2"}}}}},
                {"status", {{"conditions", {{{"type", "Ready"}, {"$patch", "delete"}}}}}}};
  auto out = strategicMergePatch(target, patch);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)["metadata"]["finalizers"], (json{"b"}));
  EXPECT_EQ((*out)["metadata"]["annotations"], (json{{"y", "2"}}));
  EXPECT_EQ((*out)["status"]["conditions"], json::array());
}

TEST(ParseObjects, ReadsMultiDocumentYamlWithTypedScalarsAndFlattensLists) {
  auto objects = parseObjects(R"(
apiVersion: v1
kind: Pod
metadata: {name: a, labels: {version: "1"}}
spec: {terminationGracePeriodSeconds: 30, hostNetwork: true, x: 1.5, y: null, z: ~}
---
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}
)");
  ASSERT_TRUE(objects) << objects.error().message();
  ASSERT_EQ(objects->size(), 2u);
  const json& pod = (*objects)[0];
  EXPECT_EQ(pod["metadata"]["labels"]["version"], "1");
  EXPECT_EQ(pod["spec"]["terminationGracePeriodSeconds"], 30);
  EXPECT_EQ(pod["spec"]["hostNetwork"], true);
  EXPECT_EQ(pod["spec"]["x"], 1.5);
  EXPECT_TRUE(pod["spec"]["y"].is_null());
  EXPECT_TRUE(pod["spec"]["z"].is_null());
  EXPECT_EQ((*objects)[1]["kind"], "ConfigMap");
  EXPECT_FALSE(parseObjects("a: [b"));
}

TEST(ParseExecScript, ReadsCommandPrefixesOutputsAndExitCodes) {
  auto script = parseExecScript(R"(
- command: [ceph, status]
  stdout: HEALTH_OK
  exitCode: 0
- command: rbd
  stderr: boom
  exitCode: 3
)");
  ASSERT_TRUE(script) << script.error().message();
  ASSERT_EQ(script->size(), 2u);
  EXPECT_EQ((*script)[0].command_prefix, (std::vector<std::string>{"ceph", "status"}));
  EXPECT_EQ((*script)[0].stdout_data, "HEALTH_OK");
  EXPECT_EQ((*script)[1].command_prefix, (std::vector<std::string>{"rbd"}));
  EXPECT_EQ((*script)[1].exit_code, 3);
  EXPECT_FALSE(parseExecScript("{a: b}"));
}

TEST(ParseExecScript, ReadsRunEntriesAndRejectsMalformedOnes) {
  auto script = parseExecScript(R"(
- command: [ceph]
  run: true
  pod: rook-ceph-tools
  env: {CEPH_CONF: /tmp/c/ceph.conf}
)");
  ASSERT_TRUE(script) << script.error().message();
  ASSERT_EQ(script->size(), 1u);
  EXPECT_TRUE((*script)[0].run);
  EXPECT_EQ((*script)[0].pod_prefix, "rook-ceph-tools");
  EXPECT_EQ((*script)[0].run_env.at("CEPH_CONF"), "/tmp/c/ceph.conf");
  EXPECT_FALSE(parseExecScript("- {command: [ceph], run: yes please}"));
  EXPECT_FALSE(parseExecScript("- {command: [ceph], run: true, env: [A=B]}"));
  EXPECT_FALSE(parseExecScript("- {command: [ceph], run: true, env: {A: 1}}"));
  EXPECT_FALSE(parseExecScript("- {run: true}"));
}

TEST(RunExecCommand, AnswersTheRealOutputAndExitStatusWithTheEntrysEnvironment) {
  ExecReply entry{.command_prefix = {"sh"}, .run = true, .run_env = {{"EKCO_X", "from-env"}}};
  auto ok = runExecCommand(entry, {"sh", "-c", "echo \"$EKCO_X\"; echo err >&2; exit 3"});
  EXPECT_EQ(ok.stdout_data, "from-env\n");
  EXPECT_EQ(ok.stderr_data, "err\n");
  EXPECT_EQ(ok.exit_code, 3);
  auto missing = runExecCommand(entry, {"/nonexistent/ceph", "osd", "tree"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.stderr_data, ::testing::HasSubstr("kubesim exec"));
}

TEST(GenerateCluster, SpreadsPodsOverReadyNodes) {
  auto objects = generateCluster(3, 7);
  ASSERT_EQ(objects.size(), 10u);
  EXPECT_EQ(objects[0]["kind"], "Node");
  EXPECT_EQ(objects[0]["status"]["conditions"].back()["type"], "Ready");
  EXPECT_EQ(objects[0]["spec"]["taints"][0]["key"], "node-role.kubernetes.io/control-plane");
  EXPECT_EQ(objects[3]["spec"]["nodeName"], "node-0");
  EXPECT_EQ(objects[4]["spec"]["nodeName"], "node-1");
  EXPECT_EQ(objects[9]["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
}

}  // namespace
}  // namespace ekco::kubesim
