// Server-side apply, client-side apply's $retainKeys and Events as one set, proven with the real
// kubectl: `apply --server-side` creates, updates, reports conflicts and forces them; managed
// fields are shown; `kubectl apply` switches a Deployment's strategy; `kubectl get events` and
// `kubectl events` see an Event created through events.k8s.io.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

using KubectlApplyTest = testing::KubectlFixture;

constexpr const char* kConfigMap = R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: default
  labels:
    app: demo
data:
  a: "1"
  b: "2"
)";

json managerEntry(const json& object, const std::string& manager) {
  for (const json& e : object["metadata"].value("managedFields", json::array())) {
    if (e.value("manager", "") == manager) return e;
  }
  return json();
}

TEST_F(KubectlApplyTest, ServerSideApplyCreatesWithAnApplyEntryAndRemovesFieldsItStopsApplying) {
  start();
  auto created = kubectl({"apply", "--server-side", "-f", "-"}, kConfigMap);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  EXPECT_THAT(created.stdout_data, HasSubstr("configmap/settings serverside-applied"));
  auto cm = server_->get("configmaps", "default", "settings");
  ASSERT_TRUE(cm);
  json entry = managerEntry(*cm, "kubectl");
  ASSERT_FALSE(entry.is_null()) << cm->dump();
  EXPECT_EQ(entry["operation"], "Apply");
  EXPECT_EQ(entry["apiVersion"], "v1");
  EXPECT_EQ(entry["fieldsType"], "FieldsV1");
  EXPECT_EQ(
      entry["fieldsV1"],
      json::parse(R"({"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:app":{}}}})"));

  // kubectl hides managedFields unless asked.
  auto plain = kubectl({"get", "configmap", "settings", "-o", "yaml"});
  EXPECT_THAT(plain.stdout_data, Not(HasSubstr("managedFields")));
  auto shown = kubectl({"get", "configmap", "settings", "-o", "yaml", "--show-managed-fields"});
  EXPECT_THAT(shown.stdout_data, HasSubstr("managedFields"));
  EXPECT_THAT(shown.stdout_data, HasSubstr("operation: Apply"));
  EXPECT_THAT(shown.stdout_data, HasSubstr("f:a: {}"));

  // Applying without `b` removes it: nobody else owns it.
  std::string without_b = kConfigMap;
  without_b.erase(without_b.find("  b: \"2\"\n"));
  auto reapplied = kubectl({"apply", "--server-side", "-f", "-"}, without_b);
  ASSERT_EQ(reapplied.exit_code, 0) << reapplied.stderr_data;
  cm = server_->get("configmaps", "default", "settings");
  EXPECT_EQ((*cm)["data"], json({{"a", "1"}}));
}

TEST_F(KubectlApplyTest, ServerSideApplyConflictsWithAnotherManagerUntilForced) {
  start();
  auto created = kubectl({"create", "-f", "-"}, kConfigMap);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  auto cm = server_->get("configmaps", "default", "settings");
  json creator = managerEntry(*cm, "kubectl-create");
  ASSERT_FALSE(creator.is_null()) << cm->dump();
  EXPECT_EQ(creator["operation"], "Update");
  // An Update entry marks the maps it added (`.`), as kube-apiserver's does.
  EXPECT_EQ(creator["fieldsV1"], json::parse(R"({"f:data":{".":{},"f:a":{},"f:b":{}},
                                   "f:metadata":{"f:labels":{".":{},"f:app":{}}}})"));

  std::string changed = kConfigMap;
  changed.replace(changed.find("a: \"1\""), 6, "a: \"9\"");
  auto conflict = kubectl({"apply", "--server-side", "-f", "-"}, changed);
  EXPECT_NE(conflict.exit_code, 0);
  EXPECT_THAT(conflict.stderr_data,
              HasSubstr("Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: "
                        ".data.a"));
  EXPECT_EQ((*server_->get("configmaps", "default", "settings"))["data"]["a"], "1");

  // Same values are shared, not conflicting; --force-conflicts takes `a` over.
  auto forced = kubectl({"apply", "--server-side", "--force-conflicts", "-f", "-"}, changed);
  ASSERT_EQ(forced.exit_code, 0) << forced.stderr_data;
  cm = server_->get("configmaps", "default", "settings");
  EXPECT_EQ((*cm)["data"]["a"], "9");
  EXPECT_EQ(managerEntry(*cm, "kubectl-create")["fieldsV1"],
            json::parse(R"({"f:data":{".":{},"f:b":{}},"f:metadata":{"f:labels":{".":{},
                                                                                "f:app":{}}}})"));
  EXPECT_EQ(
      managerEntry(*cm, "kubectl")["fieldsV1"],
      json::parse(R"({"f:data":{"f:a":{},"f:b":{}},"f:metadata":{"f:labels":{"f:app":{}}}})"));
}

TEST_F(KubectlApplyTest, ServerSideApplyOfADeploymentKeysContainersByName) {
  start();
  const std::string deployment = R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1
        ports:
        - containerPort: 80
)";
  auto applied =
      kubectl({"apply", "--server-side", "--field-manager", "deployer", "-f", "-"}, deployment);
  ASSERT_EQ(applied.exit_code, 0) << applied.stderr_data;
  auto d = server_->get("deployments.apps", "default", "web");
  ASSERT_TRUE(d);
  json fields = managerEntry(*d, "deployer")["fieldsV1"];
  EXPECT_EQ(fields["f:spec"]["f:selector"], json::object());  // LabelSelector is atomic
  const json& container =
      fields["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"app\"}"];
  EXPECT_EQ(container, json::parse(R"({".":{},"f:image":{},"f:name":{},"f:ports":{
      "k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{}}}})"))
      << fields.dump();
  // A second manager changing spec.replicas through a patch takes it over.
  auto patched = kubectl({"patch", "deployment", "web", "-p", R"({"spec":{"replicas":3}})"});
  ASSERT_EQ(patched.exit_code, 0) << patched.stderr_data;
  auto conflict =
      kubectl({"apply", "--server-side", "--field-manager", "deployer", "-f", "-"}, deployment);
  EXPECT_NE(conflict.exit_code, 0);
  EXPECT_THAT(conflict.stderr_data, HasSubstr("Apply failed with 1 conflict: conflict with "
                                              "\"kubectl-patch\" using apps/v1: .spec.replicas"));
}

TEST_F(KubectlApplyTest, ClientSideApplySwitchingToRecreateClearsRollingUpdateByRetainKeys) {
  start();
  std::string deployment = R"(apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  strategy:
    type: RollingUpdate
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: app
        image: nginx:1
)";
  auto created = kubectl({"apply", "-f", "-"}, deployment);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  auto d = server_->get("deployments.apps", "default", "web");
  ASSERT_TRUE((*d)["spec"]["strategy"].contains("rollingUpdate"));  // defaulted

  deployment.replace(deployment.find("type: RollingUpdate"), 19, "type: Recreate");
  auto switched = kubectl({"apply", "-f", "-"}, deployment);
  ASSERT_EQ(switched.exit_code, 0) << switched.stderr_data;
  EXPECT_THAT(switched.stdout_data, HasSubstr("deployment.apps/web configured"));
  d = server_->get("deployments.apps", "default", "web");
  EXPECT_EQ((*d)["spec"]["strategy"], json({{"type", "Recreate"}}));
  // The client-side apply's Update entry.
  EXPECT_FALSE(managerEntry(*d, "kubectl-client-side-apply").is_null()) << d->dump();
}

TEST_F(KubectlApplyTest, GetEventsAndKubectlEventsShowAnEventCreatedThroughEventsK8sIo) {
  start();
  const std::string event = R"(apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: web.1
  namespace: default
eventTime: "2023-11-14T22:13:20.000000Z"
reportingController: example.com/deployer
reportingInstance: deployer-1
action: Rolling
reason: Rolled
note: rolled out web
type: Normal
regarding:
  kind: Deployment
  apiVersion: apps/v1
  name: web
  namespace: default
)";
  auto created = kubectl({"create", "-f", "-"}, event);
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  auto core = server_->get("events", "default", "web.1");
  ASSERT_TRUE(core);
  EXPECT_EQ((*core)["message"], "rolled out web");
  EXPECT_EQ((*core)["involvedObject"]["name"], "web");
  EXPECT_EQ((*core)["reportingComponent"], "example.com/deployer");

  auto get = kubectl({"get", "events", "-n", "default"});
  ASSERT_EQ(get.exit_code, 0) << get.stderr_data;
  EXPECT_THAT(get.stdout_data, HasSubstr("LAST SEEN"));
  EXPECT_THAT(get.stdout_data, HasSubstr("deployment/web"));
  EXPECT_THAT(get.stdout_data, HasSubstr("rolled out web"));
  auto events = kubectl({"events", "-n", "default", "--for", "deployment/web"});
  ASSERT_EQ(events.exit_code, 0) << events.stderr_data;
  EXPECT_THAT(events.stdout_data, HasSubstr("Rolled"));
  EXPECT_THAT(events.stdout_data, HasSubstr("rolled out web"));

  auto view = kubectl({"get", "events.events.k8s.io", "web.1", "-n", "default", "-o", "json"});
  ASSERT_EQ(view.exit_code, 0) << view.stderr_data;
  json v = json::parse(view.stdout_data);
  EXPECT_EQ(v["apiVersion"], "events.k8s.io/v1");
  EXPECT_EQ(v["note"], "rolled out web");
  EXPECT_EQ(v["regarding"]["name"], "web");
  auto deleted = kubectl({"delete", "events.events.k8s.io", "web.1", "-n", "default"});
  ASSERT_EQ(deleted.exit_code, 0) << deleted.stderr_data;
  EXPECT_FALSE(server_->get("events", "default", "web.1"));
}

}  // namespace
}  // namespace ekco::kubesim
