// kubectl's typed commands send protobuf bodies (protobuf.h); proven with the real kubectl.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/kubectl_tests/kubectl_support.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using KubectlProtobufTest = testing::KubectlFixture;

TEST_F(KubectlProtobufTest, TypedCreateCommandsWork) {
  start({{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "default"}}}}});
  auto ns = kubectl({"create", "namespace", "team-a"});
  ASSERT_EQ(ns.exit_code, 0) << ns.stderr_data;
  EXPECT_EQ(ns.stdout_data, "namespace/team-a created\n");
  EXPECT_TRUE(server_->get("namespaces", "", "team-a"));

  auto cm = kubectl({"create", "configmap", "settings", "-n", "team-a", "--from-literal=mode=fast",
                     "--from-literal=level=3"});
  ASSERT_EQ(cm.exit_code, 0) << cm.stderr_data;
  auto stored = server_->get("configmaps", "team-a", "settings");
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)["data"], json({{"mode", "fast"}, {"level", "3"}}));

  auto secret = kubectl(
      {"create", "secret", "generic", "creds", "-n", "team-a", "--from-literal=password=s3cret"});
  ASSERT_EQ(secret.exit_code, 0) << secret.stderr_data;
  auto s = server_->get("secrets", "team-a", "creds");
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)["data"], json({{"password", "czNjcmV0"}}));

  auto sa = kubectl({"create", "serviceaccount", "robot", "-n", "team-a"});
  EXPECT_EQ(sa.exit_code, 0) << sa.stderr_data;
  auto deploy = kubectl({"create", "deployment", "web", "-n", "team-a", "--image=nginx:1.27",
                         "--replicas=2", "--port=8080"});
  ASSERT_EQ(deploy.exit_code, 0) << deploy.stderr_data;
  auto d = server_->get("deployments.apps", "team-a", "web");
  ASSERT_TRUE(d);
  EXPECT_EQ((*d)["spec"]["replicas"], 2);
  EXPECT_EQ((*d)["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"], 8080);
  EXPECT_EQ((*d)["spec"]["selector"]["matchLabels"], json({{"app", "web"}}));
  auto role =
      kubectl({"create", "role", "reader", "-n", "team-a", "--verb=get,list", "--resource=pods"});
  EXPECT_EQ(role.exit_code, 0) << role.stderr_data;
  auto r = server_->get("roles.rbac.authorization.k8s.io", "team-a", "reader");
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)["rules"][0]["verbs"], json({"get", "list"}));
}

TEST_F(KubectlProtobufTest, DrainEvictsWithProtobufEvictionsAndDeleteOptions) {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", "node-a"}}},
               {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "web"}, {"namespace", "default"}}},
      {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "main"}, {"image", "app:1"}}}}}},
      {"status", {{"phase", "Running"}}}};
  start({{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "default"}}}},
         node,
         pod});
  // drain evicts through the typed policy/v1 client: a protobuf Eviction whose DeleteOptions
  // carry the grace period.
  auto drained = kubectl({"drain", "node-a", "--force", "--grace-period=0", "--timeout=20s"});
  EXPECT_EQ(drained.exit_code, 0) << drained.stderr_data;
  EXPECT_THAT(drained.stdout_data, HasSubstr("pod/web evicted"));
  EXPECT_FALSE(server_->get("pods", "default", "web"));
  auto cordoned = server_->get("nodes", "", "node-a");
  ASSERT_TRUE(cordoned);
  EXPECT_EQ((*cordoned)["spec"]["unschedulable"], true);
}

}  // namespace
}  // namespace ekco::kubesim
