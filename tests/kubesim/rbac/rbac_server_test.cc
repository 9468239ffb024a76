// kubesim's bearer-token authentication, RBAC authorization and request log over HTTPS, then
// with the real kubectl (`create -f`, `auth can-i`, a forbidden `get`). (rbac_test.cc: the
// evaluator on its own.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "base/os/process.h"
#include "tests/kubesim/api_tests/test_client.h"
#include "tests/kubesim/rbac/rbac.h"
#include "tests/kubesim/rbac/rbac_test_objects.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::binding;
using testing::clusterRole;
using ::testing::HasSubstr;
using testing::kEkco;
using testing::role;
using testing::saSubject;
using testing::TestClient;

constexpr const char* kKubectl = "/usr/bin/kubectl";

// --- over HTTPS ---

class RbacServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kubesim-rbac-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start(ServerOptions options = {}) {
    options.out_dir = dir_.string();
    options.clock = &clock_;
    options.tokens.push_back(TokenUser{.token = "ekco-token", .user = kEkco, .groups = {}});
    options.objects.push_back(
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", "node-a"}}},
         {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
    options.objects.push_back(
        {{"apiVersion", "v1"},
         {"kind", "Pod"},
         {"metadata", {{"name", "osd"}, {"namespace", "rook-ceph"}}},
         {"spec", {{"nodeName", "node-a"}, {"containers", {{{"name", "osd"}, {"image", "x"}}}}}}});
    options.objects.push_back(clusterRole(
        "ekco",
        {{{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"get", "list", "watch"}}},
         {{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"list"}}},
         {{"apiGroups", {""}}, {"resources", {"pods/exec"}}, {"verbs", {"create"}}}}));
    options.objects.push_back(binding("ClusterRoleBinding", "", "ekco", "ClusterRole", "ekco",
                                      {saSubject("kurl", "ekco")}));
    options.objects.push_back(namespaceObject("kurl"));  // where ekco runs
    auto server = Server::start(std::move(options));
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    admin_ = std::make_unique<TestClient>(*server_);
    ekco_ = std::make_unique<TestClient>(*server_, "ekco-token");
  }

  base::ManualClock clock_;
  std::filesystem::path dir_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<TestClient> admin_;
  std::unique_ptr<TestClient> ekco_;
};

TEST_F(RbacServerTest, TokenUserIsForbiddenAllowedOrUnauthorized) {
  start();
  auto denied = ekco_->request("DELETE", "/api/v1/nodes/node-a");
  EXPECT_EQ(denied.status, 403);
  json status = denied.json();
  EXPECT_EQ(status["kind"], "Status");
  EXPECT_EQ(status["reason"], "Forbidden");
  EXPECT_EQ(status["message"],
            "nodes \"node-a\" is forbidden: User \"system:serviceaccount:kurl:ekco\" cannot "
            "delete resource \"nodes\" in API group \"\" at the cluster scope");
  EXPECT_TRUE(server_->get("nodes", "", "node-a"));

  auto namespaced = ekco_->get("/api/v1/namespaces/kurl/configmaps");
  EXPECT_EQ(namespaced.status, 403);
  EXPECT_EQ(namespaced.json()["message"],
            "configmaps is forbidden: User \"system:serviceaccount:kurl:ekco\" cannot list "
            "resource \"configmaps\" in API group \"\" in the namespace \"kurl\"");

  auto allowed = ekco_->get("/api/v1/nodes");
  EXPECT_EQ(allowed.status, 200);
  EXPECT_EQ(allowed.json()["items"].size(), 1u);
  EXPECT_EQ(ekco_->get("/api/v1/namespaces/rook-ceph/pods").status, 200);
  EXPECT_EQ(ekco_->get("/api/v1/namespaces/rook-ceph/pods/osd").status, 403);
  EXPECT_EQ(ekco_->get("/apis").status, 200);
  EXPECT_EQ(ekco_->get("/version").status, 200);
  EXPECT_EQ(ekco_->get("/kubesim/v1/exec-log").status, 200);

  TestClient stranger(*server_, "wrong-token");
  auto unauthorized = stranger.get("/api/v1/nodes");
  EXPECT_EQ(unauthorized.status, 401);
  EXPECT_EQ(unauthorized.json()["reason"], "Unauthorized");
  EXPECT_EQ(unauthorized.json()["message"], "Unauthorized");

  // The admin certificate keeps full access; RBAC objects change decisions at once.
  EXPECT_EQ(
      admin_
          ->post("/apis/rbac.authorization.k8s.io/v1/namespaces/kurl/roles",
                 role("kurl", "cm",
                      {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"list"}}}}))
          .status,
      201);
  EXPECT_EQ(
      admin_
          ->post("/apis/rbac.authorization.k8s.io/v1/namespaces/kurl/rolebindings",
                 binding("RoleBinding", "kurl", "cm", "Role", "cm", {saSubject("kurl", "ekco")}))
          .status,
      201);
  EXPECT_EQ(ekco_->get("/api/v1/namespaces/kurl/configmaps").status, 200);
  EXPECT_EQ(ekco_->get("/api/v1/namespaces/default/configmaps").status, 403);
}

TEST_F(RbacServerTest, AnonymousRequestsAreAdminUnlessDisabled) {
  ServerOptions options;
  options.anonymous_admin = false;
  start(std::move(options));
  // TestClient with an empty token sends "Bearer " (no token): anonymous.
  TestClient anonymous(*server_, "");
  auto r = anonymous.get("/api/v1/nodes");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(r.json()["message"],
            "nodes is forbidden: User \"system:anonymous\" cannot list resource \"nodes\" in API "
            "group \"\" at the cluster scope");
}

TEST_F(RbacServerTest, RequestLogRecordsVerbsSubresourcesAndDenials) {
  start();
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "c"}, {"namespace", "kurl"}}},
             {"data", {{"k", "v"}}}};
  server_->clearRequestLog();
  ASSERT_EQ(admin_->post("/api/v1/namespaces/kurl/configmaps", cm).status, 201);
  auto got = admin_->get("/api/v1/namespaces/kurl/configmaps/c");
  ASSERT_EQ(got.status, 200);
  ASSERT_EQ(admin_->put("/api/v1/namespaces/kurl/configmaps/c", got.json()).status, 200);
  ASSERT_EQ(admin_
                ->request("PATCH", "/api/v1/namespaces/kurl/configmaps/c", R"({"data":{"k":"w"}})",
                          "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(admin_->get("/api/v1/namespaces/kurl/configmaps").status, 200);
  admin_->watch(
      "/api/v1/namespaces/kurl/configmaps?watch=true",
      [](const std::vector<json>& e) { return !e.empty(); }, std::chrono::seconds(5));
  ASSERT_EQ(admin_->request("DELETE", "/api/v1/namespaces/kurl/configmaps/c").status, 200);
  ASSERT_EQ(admin_->request("DELETE", "/api/v1/namespaces/kurl/configmaps").status, 200);
  ASSERT_EQ(admin_
                ->request("PATCH", "/api/v1/nodes/node-a/status", R"({"status":{"phase":"x"}})",
                          "application/merge-patch+json")
                .status,
            200);
  ASSERT_EQ(ekco_->request("DELETE", "/api/v1/nodes/node-a").status, 403);
  ASSERT_EQ(ekco_->get("/api").status, 200);
  auto exec = ekco_->exec("/api/v1/namespaces/rook-ceph/pods/osd/exec?command=ls&stdout=true",
                          "v5.channel.k8s.io");
  EXPECT_EQ(exec.status["status"], "Success");

  std::vector<RequestRecord> log = server_->requestLog();
  ASSERT_EQ(log.size(), 12u);
  std::vector<std::string> verbs;
  for (const RequestRecord& r : log) verbs.push_back(r.verb);
  EXPECT_EQ(verbs,
            (std::vector<std::string>{"create", "get", "update", "patch", "list", "watch", "delete",
                                      "deletecollection", "patch", "delete", "get", "create"}));
  EXPECT_EQ(log[0].user, "kubernetes-admin");
  EXPECT_EQ(log[0].resource, "configmaps");
  EXPECT_EQ(log[0].ns, "kurl");
  EXPECT_EQ(log[0].name, "");
  EXPECT_EQ(log[0].code, 201);
  EXPECT_EQ(log[1].name, "c");
  EXPECT_EQ(log[1].path, "/api/v1/namespaces/kurl/configmaps/c");
  EXPECT_EQ(log[5].code, 200);
  EXPECT_EQ(log[8].resource, "nodes");
  EXPECT_EQ(log[8].subresource, "status");
  EXPECT_EQ(log[9].user, kEkco);
  EXPECT_EQ(log[9].code, 403);
  EXPECT_FALSE(log[9].allowed);
  EXPECT_TRUE(log[10].allowed);
  EXPECT_EQ(log[10].path, "/api");
  EXPECT_EQ(log[11].subresource, "exec");
  EXPECT_EQ(log[11].code, 101);

  auto served = admin_->get("/kubesim/v1/request-log");
  ASSERT_EQ(served.status, 200);
  json list = served.json();
  ASSERT_EQ(list.size(), 12u);
  EXPECT_EQ(list[9], json({{"user", kEkco},
                           {"verb", "delete"},
                           {"apiGroup", ""},
                           {"resource", "nodes"},
                           {"subresource", ""},
                           {"namespace", ""},
                           {"name", "node-a"},
                           {"path", "/api/v1/nodes/node-a"},
                           {"code", 403},
                           {"allowed", false}}));
  EXPECT_EQ(admin_->request("DELETE", "/kubesim/v1/request-log").status, 200);
  EXPECT_EQ(server_->requestLog().size(), 1u);  // the DELETE itself
}

TEST_F(RbacServerTest, RequestLogKeepsTheMostRecentRecords) {
  ServerOptions options;
  options.request_log_limit = 3;
  start(std::move(options));
  for (int i = 0; i < 5; ++i) admin_->get("/api/v1/nodes/node-" + std::to_string(i));
  auto log = server_->requestLog();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].name, "node-2");
  EXPECT_EQ(log[2].name, "node-4");
  EXPECT_EQ(log[2].code, 404);
}

TEST_F(RbacServerTest, SelfSubjectAccessReviewOverHttps) {
  start();
  auto discovery = ekco_->get("/apis/authorization.k8s.io/v1");
  ASSERT_EQ(discovery.status, 200);
  EXPECT_EQ(discovery.json()["resources"][0]["verbs"], json({"create"}));
  json review = {{"apiVersion", "authorization.k8s.io/v1"},
                 {"kind", "SelfSubjectAccessReview"},
                 {"spec", {{"resourceAttributes", {{"verb", "list"}, {"resource", "nodes"}}}}}};
  auto r = ekco_->post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review);
  ASSERT_EQ(r.status, 201);
  EXPECT_EQ(r.json()["status"]["allowed"], true);
  review["spec"]["resourceAttributes"]["verb"] = "delete";
  r = ekco_->post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review);
  EXPECT_EQ(r.json()["status"]["allowed"], false);
  r = admin_->post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review);
  EXPECT_EQ(r.json()["status"]["allowed"], true);
  EXPECT_EQ(ekco_->get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status, 403);
  EXPECT_EQ(admin_->get("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").status, 405);
}

TEST_F(RbacServerTest, WriteTokenKubeconfigNamesTheTokenUser) {
  start();
  std::string path = (dir_ / "ekco.kubeconfig").string();
  ASSERT_TRUE(server_->writeTokenKubeconfig(path, "ekco-token"));
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("token: \"ekco-token\""));
  EXPECT_THAT(text, HasSubstr("server: " + server_->url()));
  EXPECT_THAT(text, HasSubstr("name: \"system:serviceaccount:kurl:ekco\""));
}

// --- the real kubectl ---

class RbacKubectlTest : public RbacServerTest {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kKubectl)) GTEST_SKIP() << kKubectl << " is not installed";
    RbacServerTest::SetUp();
    start();
    token_kubeconfig_ = (dir_ / "ekco.kubeconfig").string();
    ASSERT_TRUE(server_->writeTokenKubeconfig(token_kubeconfig_, "ekco-token"));
  }

  base::ProcessResult kubectl(const std::string& kubeconfig, std::vector<std::string> args) {
    std::vector<std::string> argv = {kKubectl, "--kubeconfig", kubeconfig, "--cache-dir",
                                     (dir_ / "cache").string()};
    argv.insert(argv.end(), args.begin(), args.end());
    base::ProcessRequest request{.argv = argv,
                                 .inherit_env = true,
                                 .env = {{"HOME", dir_.string()}, {"KUBECONFIG", ""}},
                                 .stdin_data = "",
                                 .working_dir = "",
                                 .timeout = std::chrono::seconds(20),
                                 .kill_grace = std::chrono::milliseconds(0)};
    auto result = runner_.run(request);
    EXPECT_TRUE(result) << result.error().message();
    return result ? *result : base::ProcessResult{};
  }

  base::SystemClock system_clock_;
  base::BoostProcessRunner runner_{system_clock_};
  std::string token_kubeconfig_;
};

TEST_F(RbacKubectlTest, CreateRoleThenCanIAnswersYesAndNoAndGetNodesIsForbidden) {
  std::string yaml = (dir_ / "rbac.yaml").string();
  {
    std::ofstream out(yaml);
    out << R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: lease
  namespace: kurl
rules:
  - apiGroups: [coordination.k8s.io]
    resources: [leases]
    verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: lease
  namespace: kurl
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: lease
subjects:
  - kind: ServiceAccount
    name: ekco
    namespace: kurl
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: ekco
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: nothing
subjects:
  - kind: ServiceAccount
    name: ekco
    namespace: kurl
)";
  }
  // The fixture's ClusterRoleBinding "ekco" is replaced by one to a ClusterRole that does not
  // exist: `get nodes` is forbidden, with RBAC's reason.
  server_->remove("clusterrolebindings.rbac.authorization.k8s.io", "", "ekco");
  auto created = kubectl(server_->kubeconfigPath(), {"create", "-f", yaml});
  ASSERT_EQ(created.exit_code, 0) << created.stderr_data;
  EXPECT_THAT(created.stdout_data, HasSubstr("role.rbac.authorization.k8s.io/lease created"));
  EXPECT_THAT(created.stdout_data,
              HasSubstr("rolebinding.rbac.authorization.k8s.io/lease created"));
  EXPECT_TRUE(server_->get("roles.rbac.authorization.k8s.io", "kurl", "lease"));

  auto yes = kubectl(token_kubeconfig_, {"auth", "can-i", "update", "leases", "-n", "kurl"});
  EXPECT_EQ(yes.exit_code, 0) << yes.stderr_data;
  EXPECT_EQ(yes.stdout_data, "yes\n");
  auto no = kubectl(token_kubeconfig_, {"auth", "can-i", "delete", "leases", "-n", "kurl"});
  EXPECT_EQ(no.exit_code, 1) << no.stderr_data;
  EXPECT_THAT(no.stdout_data, ::testing::StartsWith("no"));
  auto other_ns = kubectl(token_kubeconfig_, {"auth", "can-i", "get", "leases", "-n", "default"});
  EXPECT_EQ(other_ns.exit_code, 1);

  auto forbidden = kubectl(token_kubeconfig_, {"get", "nodes"});
  EXPECT_EQ(forbidden.exit_code, 1);
  EXPECT_THAT(forbidden.stderr_data,
              HasSubstr("Error from server (Forbidden): nodes is forbidden: User "
                        "\"system:serviceaccount:kurl:ekco\" cannot list resource \"nodes\" in "
                        "API group \"\" at the cluster scope: RBAC: "
                        "clusterrole.rbac.authorization.k8s.io \"nothing\" not found"));
  bool logged = false;
  for (const RequestRecord& r : server_->requestLog()) {
    if (r.user == kEkco && r.resource == "nodes" && r.verb == "list" && r.code == 403)
      logged = true;
  }
  EXPECT_TRUE(logged);
}

TEST_F(RbacKubectlTest, TokenUserRunsAllowedCommands) {
  auto nodes = kubectl(token_kubeconfig_, {"get", "nodes"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.stderr_data;
  EXPECT_THAT(nodes.stdout_data, HasSubstr("node-a"));
  // (`can-i create pods/exec` would ask about the pod named "exec".)
  auto can_exec = kubectl(token_kubeconfig_,
                          {"auth", "can-i", "create", "pods", "--subresource", "exec", "-n", "x"});
  EXPECT_EQ(can_exec.exit_code, 0) << can_exec.stderr_data << can_exec.stdout_data;
  auto cannot_evict = kubectl(token_kubeconfig_, {"auth", "can-i", "create", "pods",
                                                  "--subresource", "eviction", "-n", "x"});
  EXPECT_EQ(cannot_evict.exit_code, 1) << cannot_evict.stderr_data << cannot_evict.stdout_data;
  // kubectl exec reads the pod first: get pods is needed too.
  auto denied = kubectl(token_kubeconfig_, {"exec", "-n", "rook-ceph", "osd", "--", "ls"});
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_THAT(denied.stderr_data,
              HasSubstr("Error from server (Forbidden): pods \"osd\" is forbidden: User "
                        "\"system:serviceaccount:kurl:ekco\" cannot get resource \"pods\""));
  ASSERT_TRUE(
      server_->put(role("rook-ceph", "get-pods",
                        {{{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get"}}}})));
  ASSERT_TRUE(server_->put(binding("RoleBinding", "rook-ceph", "get-pods", "Role", "get-pods",
                                   {saSubject("kurl", "ekco")})));
  auto exec = kubectl(token_kubeconfig_, {"exec", "-n", "rook-ceph", "osd", "--", "ls"});
  EXPECT_EQ(exec.exit_code, 0) << exec.stderr_data;
  bool exec_logged = false;
  for (const RequestRecord& r : server_->requestLog()) {
    if (r.user == kEkco && r.subresource == "exec" && r.verb == "create" && r.code == 101) {
      exec_logged = true;
    }
  }
  EXPECT_TRUE(exec_logged);
  auto drain = kubectl(token_kubeconfig_, {"drain", "node-a", "--force"});
  EXPECT_NE(drain.exit_code, 0);
  EXPECT_THAT(drain.stderr_data,
              HasSubstr("cannot create resource \"pods/eviction\" in API group \"\" in the "
                        "namespace \"rook-ceph\""));
}

TEST_F(RbacKubectlTest, CanIAsAServiceAccountAnswersForItAndNeedsImpersonate) {
  // The admin (system:masters) asks for the ServiceAccount: kubectl sends Impersonate-User and
  // the SelfSubjectAccessReview is answered for kurl/ekco, not for the admin.
  const std::string admin = server_->kubeconfigPath();
  const std::string as = "--as=system:serviceaccount:kurl:ekco";
  EXPECT_EQ(kubectl(admin, {"auth", "can-i", "list", "nodes", as}).stdout_data, "yes\n");
  EXPECT_EQ(kubectl(admin, {"auth", "can-i", "delete", "nodes", as}).stdout_data, "no\n");
  EXPECT_EQ(kubectl(admin, {"auth", "can-i", "delete", "nodes"}).stdout_data, "yes\n");
  // Every request is served as the impersonated user: a forbidden get reads as its.
  auto get = kubectl(admin, {"get", "configmaps", "-n", "kurl", as});
  EXPECT_NE(get.exit_code, 0);
  EXPECT_THAT(get.stderr_data, HasSubstr("User \"system:serviceaccount:kurl:ekco\" cannot list "
                                         "resource \"configmaps\""));

  // The ServiceAccount itself may not impersonate anyone.
  auto refused = kubectl(token_kubeconfig_, {"auth", "can-i", "list", "nodes",
                                             "--as=system:serviceaccount:kurl:other"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.stderr_data,
              HasSubstr("serviceaccounts \"other\" is forbidden: User "
                        "\"system:serviceaccount:kurl:ekco\" cannot impersonate resource "
                        "\"serviceaccounts\" in API group \"\" in the namespace \"kurl\""));
}

}  // namespace
}  // namespace ekco::kubesim
