// kubesim's list, watch, deletion and eviction semantics as the real kubectl sees them (the
// commands in kubectl_test.cc are the everyday ones; these lean on the API's finer behaviour).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKubectl = "/usr/bin/kubectl";

class KubectlApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-kubectl-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::ifstream in(std::string(KUBESIM_TESTDATA_DIR) + "/cluster.yaml");
    std::ostringstream text;
    text << in.rdbuf();
    auto objects = parseObjects(text.str());
    ASSERT_TRUE(objects) << objects.error().message();
    ServerOptions options;
    options.out_dir = dir_.string();
    options.objects = *objects;
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    server_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  base::ProcessResult kubectl(std::vector<std::string> args, const std::string& stdin_data = "",
                              std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::vector<std::string> argv = {kKubectl, "--kubeconfig", server_->kubeconfigPath(),
                                     "--cache-dir", (dir_ / "cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    base::ProcessRequest request{.argv = argv,
                                 .inherit_env = true,
                                 .env = {{"HOME", dir_.string()}, {"KUBECONFIG", ""}},
                                 .stdin_data = stdin_data,
                                 .working_dir = "",
                                 .timeout = timeout,
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
};

json configMap(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"set", "x"}}}}},
          {"data", {{"k", "v"}}}};
}

TEST_F(KubectlApiTest, ChunkedGetPagesThroughEveryObject) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(server_->put(configMap("cm-" + std::to_string(i))));
  auto r = kubectl({"get", "configmaps", "-n", "default", "-l", "set=x", "--chunk-size=2", "-o",
                    "name", "-v=6"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data,
            "configmap/cm-0\nconfigmap/cm-1\nconfigmap/cm-2\nconfigmap/cm-3\nconfigmap/cm-4\n");
  EXPECT_THAT(r.stderr_data, HasSubstr("continue="));  // it did page
}

TEST_F(KubectlApiTest, FieldSelectorOnUnschedulableFalseMatchesNodesWithoutTheField) {
  auto r = kubectl({"get", "nodes", "--field-selector", "spec.unschedulable=false", "-o", "name"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_EQ(r.stdout_data, "node/node-a\nnode/node-b\n");
  ASSERT_EQ(kubectl({"cordon", "node-a"}).exit_code, 0);
  r = kubectl({"get", "nodes", "--field-selector", "spec.unschedulable=false", "-o", "name"});
  EXPECT_EQ(r.stdout_data, "node/node-b\n");
}

TEST_F(KubectlApiTest, UnsupportedFieldSelectorIsTheServersBadRequest) {
  auto r = kubectl({"get", "pods", "-A", "--field-selector", "spec.foo=bar"});
  EXPECT_EQ(r.exit_code, 1);
  // kubectl wraps the server's message: "Error from server (BadRequest): Unable to find
  // \"/v1, Resource=pods\" that match ...: field label not supported: spec.foo".
  EXPECT_THAT(r.stderr_data, HasSubstr("Error from server (BadRequest)"));
  EXPECT_THAT(r.stderr_data, HasSubstr(": field label not supported: spec.foo"));
}

TEST_F(KubectlApiTest, RawListWithResourceVersionMatchButNoVersionIsInvalid) {
  auto r = kubectl({"get", "--raw", "/api/v1/configmaps?resourceVersionMatch=Exact"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.stderr_data, HasSubstr("resourceVersionMatch is forbidden unless resourceVersion "
                                       "is provided"));
}

TEST_F(KubectlApiTest, RawExactListShowsThePast) {
  ASSERT_TRUE(server_->put(configMap("old")));
  std::string rv = std::to_string(server_->store().resourceVersion());
  ASSERT_TRUE(server_->store().remove("configmaps", "default", "old"));
  auto r = kubectl({"get", "--raw",
                    "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact&"
                    "resourceVersion=" +
                        rv});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("\"name\":\"old\""));
  auto now = kubectl({"get", "configmap", "old", "-n", "default"});
  EXPECT_EQ(now.exit_code, 1);
}

// Deployment web → ReplicaSet web-1 → Pod web-1-a (not scheduled: deleted at once), stored
// with fixed uids.
void putChain(Server& server) {
  auto ref = [](const char* kind, const char* name, const char* uid) {
    return json{{"apiVersion", "apps/v1"},
                {"kind", kind},
                {"name", name},
                {"uid", uid},
                {"controller", true},
                {"blockOwnerDeletion", true}};
  };
  // Valid workloads (a selector and a pod template): the collector's writes to them are
  // validated as any update.
  const json spec = {{"replicas", 1},
                     {"selector", {{"matchLabels", {{"app", "web"}}}}},
                     {"template",
                      {{"metadata", {{"labels", {{"app", "web"}}}}},
                       {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}}};
  ASSERT_TRUE(server.put({{"apiVersion", "apps/v1"},
                          {"kind", "Deployment"},
                          {"metadata", {{"name", "web"}, {"namespace", "default"}, {"uid", "d-1"}}},
                          {"spec", spec}}));
  ASSERT_TRUE(server.put({{"apiVersion", "apps/v1"},
                          {"kind", "ReplicaSet"},
                          {"metadata",
                           {{"name", "web-1"},
                            {"namespace", "default"},
                            {"uid", "rs-1"},
                            {"ownerReferences", {ref("Deployment", "web", "d-1")}}}},
                          {"spec", spec}}));
  ASSERT_TRUE(server.put({{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata",
                           {{"name", "web-1-a"},
                            {"namespace", "default"},
                            {"ownerReferences", {ref("ReplicaSet", "web-1", "rs-1")}}}},
                          {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}}));
}

TEST_F(KubectlApiTest, DeleteWithForegroundCascadeWaitsForTheWholeChain) {
  putChain(*server_);
  auto r = kubectl({"delete", "deployment", "web", "-n", "default", "--cascade=foreground"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_THAT(r.stdout_data, HasSubstr("deployment.apps \"web\" deleted"));
  // kubectl waited for the deployment to vanish, which the collector allows only after the
  // replicaset and the pod.
  EXPECT_FALSE(server_->get("deployments.apps", "default", "web"));
  EXPECT_FALSE(server_->get("replicasets.apps", "default", "web-1"));
  EXPECT_FALSE(server_->get("pods", "default", "web-1-a"));
}

TEST_F(KubectlApiTest, DeleteWithOrphanCascadeKeepsThePod) {
  putChain(*server_);
  auto r = kubectl({"delete", "replicaset", "web-1", "-n", "default", "--cascade=orphan"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  EXPECT_FALSE(server_->get("replicasets.apps", "default", "web-1"));
  auto pod = server_->get("pods", "default", "web-1-a");
  ASSERT_TRUE(pod);
  EXPECT_FALSE((*pod)["metadata"].contains("ownerReferences"));
  auto bad = kubectl({"delete", "--raw",
                      "/apis/apps/v1/namespaces/default/deployments/web?"
                      "propagationPolicy=Sideways"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.stderr_data, HasSubstr("Unsupported value: \"Sideways\""));
}

TEST_F(KubectlApiTest, DrainStopsAtTheDisruptionBudget) {
  for (const char* name : {"guarded-0", "guarded-1"}) {
    ASSERT_TRUE(server_->put(
        {{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", name}, {"namespace", "default"}, {"labels", {{"app", "guarded"}}}}},
         {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "c"}, {"image", "x"}}}}}},
         {"status",
          {{"phase", "Running"}, {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}}));
  }
  auto created = kubectl({"create", "-f", "-"}, R"({"apiVersion":"policy/v1",
      "kind":"PodDisruptionBudget","metadata":{"name":"guarded","namespace":"default"},
      "spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"guarded"}}}})");
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  // The simulated disruption controller observes it: one disruption allowed.
  base::ProcessResult allowed;
  for (int i = 0; i < 50; ++i) {
    allowed = kubectl({"get", "pdb", "guarded", "-n", "default", "-o",
                       "jsonpath={.status.observedGeneration}/{.status.disruptionsAllowed}"});
    if (allowed.stdout_data == "1/1") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(allowed.stdout_data, "1/1");
  // drain evicts one pod and then retries the other on 429 until its timeout.
  auto drain = kubectl({"drain", "node-a", "--pod-selector", "app=guarded", "--force",
                        "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=4s"});
  EXPECT_NE(drain.exit_code, 0);
  EXPECT_THAT(drain.stderr_data + drain.stdout_data,
              HasSubstr("Cannot evict pod as it would violate the pod's disruption budget."));
  int left = 0;
  for (const char* name : {"guarded-0", "guarded-1"}) {
    auto pod = server_->get("pods", "default", name);
    if (pod && !(*pod)["metadata"].contains("deletionTimestamp")) ++left;
  }
  EXPECT_EQ(left, 1);
}

TEST_F(KubectlApiTest, PatchMergesServicePortsByPort) {
  ASSERT_TRUE(server_->put({{"apiVersion", "v1"},
                            {"kind", "Service"},
                            {"metadata", {{"name", "web"}, {"namespace", "default"}}},
                            {"spec",
                             {{"ports",
                               {{{"name", "http"}, {"port", 80}, {"targetPort", 8080}},
                                {{"name", "https"}, {"port", 443}, {"targetPort", 8443}}}}}}}));
  auto r = kubectl({"patch", "service", "web", "-n", "default", "-p",
                    R"({"spec":{"ports":[{"port":80,"targetPort":9090}]}})"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_data;
  auto svc = server_->get("services", "default", "web");
  ASSERT_TRUE(svc);
  // protocol: TCP is the API's default for a port.
  EXPECT_EQ((*svc)["spec"]["ports"],
            json::parse(R"([{"name":"http","port":80,"protocol":"TCP","targetPort":9090},
                            {"name":"https","port":443,"protocol":"TCP","targetPort":8443}])"));
}

}  // namespace
}  // namespace ekco::kubesim
