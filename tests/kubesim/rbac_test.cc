// kubesim's bearer-token authentication, RBAC authorization and request log: the evaluator on
// its own, then over HTTPS, then with the real kubectl (`create -f`, `auth can-i`, a forbidden
// `get`).
#include "tests/kubesim/rbac.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/clock.h"
#include "base/process.h"
#include "tests/kubesim/server.h"
#include "tests/kubesim/test_client.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::TestClient;

constexpr const char* kKubectl = "/usr/bin/kubectl";
constexpr const char* kEkco = "system:serviceaccount:kurl:ekco";

RequestAttributes attrs(std::string method, std::string target, bool upgrade = false) {
  auto q = target.find('?');
  std::vector<std::pair<std::string, std::string>> query;
  if (q != std::string::npos) {
    std::string rest = target.substr(q + 1);
    target.resize(q);
    while (!rest.empty()) {
      auto amp = rest.find('&');
      std::string part = rest.substr(0, amp);
      auto eq = part.find('=');
      query.emplace_back(part.substr(0, eq), eq == std::string::npos ? "" : part.substr(eq + 1));
      if (amp == std::string::npos) break;
      rest.erase(0, amp + 1);
    }
  }
  return requestAttributes(method, target, query, upgrade);
}

RequestAttributes resourceAttrs(std::string verb, std::string group, std::string resource,
                                std::string ns, std::string name = "", std::string sub = "") {
  return RequestAttributes{.resource_request = true,
                           .verb = std::move(verb),
                           .api_group = std::move(group),
                           .api_version = "v1",
                           .resource = std::move(resource),
                           .subresource = std::move(sub),
                           .ns = std::move(ns),
                           .name = std::move(name),
                           .path = ""};
}

json clusterRole(const std::string& name, json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRole"},
          {"metadata", {{"name", name}}},
          {"rules", std::move(rules)}};
}

json role(const std::string& ns, const std::string& name, json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"rules", std::move(rules)}};
}

json binding(const std::string& kind, const std::string& ns, const std::string& name,
             const std::string& role_kind, const std::string& role_name, json subjects) {
  json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", kind},
          {"metadata", meta},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role_name}}},
          {"subjects", std::move(subjects)}};
}

json saSubject(const std::string& ns, const std::string& name) {
  json s = {{"kind", "ServiceAccount"}, {"name", name}};
  if (!ns.empty()) s["namespace"] = ns;
  return s;
}

UserInfo ekcoUser() { return tokenUserInfo(TokenUser{.token = "t", .user = kEkco, .groups = {}}); }

// --- request attributes ---

TEST(RequestAttributesTest, VerbsFollowKubeApiserver) {
  struct Case {
    std::string method, target, verb, resource, sub, ns, name;
  };
  const std::vector<Case> cases = {
      {"GET", "/api/v1/nodes", "list", "nodes", "", "", ""},
      {"GET", "/api/v1/nodes/n1", "get", "nodes", "", "", "n1"},
      {"HEAD", "/api/v1/nodes/n1", "get", "nodes", "", "", "n1"},
      {"GET", "/api/v1/pods?watch=true", "watch", "pods", "", "", ""},
      {"GET", "/api/v1/namespaces/kurl/pods?watch=1", "watch", "pods", "", "kurl", ""},
      {"GET", "/api/v1/watch/namespaces/kurl/pods", "watch", "pods", "", "kurl", ""},
      {"GET", "/api/v1/pods?fieldSelector=metadata.name%3Dx", "list", "pods", "", "", ""},
      {"GET", "/api/v1/namespaces/kurl/pods?fieldSelector=metadata.name=p1", "list", "pods", "",
       "kurl", "p1"},
      {"POST", "/api/v1/namespaces/kurl/pods", "create", "pods", "", "kurl", ""},
      {"PUT", "/api/v1/nodes/n1", "update", "nodes", "", "", "n1"},
      {"PATCH", "/api/v1/nodes/n1", "patch", "nodes", "", "", "n1"},
      {"DELETE", "/api/v1/nodes/n1", "delete", "nodes", "", "", "n1"},
      {"DELETE", "/api/v1/namespaces/kurl/pods", "deletecollection", "pods", "", "kurl", ""},
      {"PUT", "/api/v1/nodes/n1/status", "update", "nodes", "status", "", "n1"},
      {"POST", "/api/v1/namespaces/kurl/pods/p1/eviction", "create", "pods", "eviction", "kurl",
       "p1"},
      {"PATCH", "/apis/apps/v1/namespaces/kurl/deployments/d/scale", "patch", "deployments",
       "scale", "kurl", "d"},
      {"GET", "/api/v1/namespaces/kurl", "get", "namespaces", "", "kurl", "kurl"},
      {"GET", "/api/v1/namespaces", "list", "namespaces", "", "", ""},
      {"PUT", "/api/v1/namespaces/kurl/status", "update", "namespaces", "status", "kurl", "kurl"},
  };
  for (const Case& c : cases) {
    RequestAttributes a = attrs(c.method, c.target);
    SCOPED_TRACE(c.method + " " + c.target);
    EXPECT_TRUE(a.resource_request);
    EXPECT_EQ(a.verb, c.verb);
    EXPECT_EQ(a.resource, c.resource);
    EXPECT_EQ(a.subresource, c.sub);
    EXPECT_EQ(a.ns, c.ns);
    EXPECT_EQ(a.name, c.name);
  }
  EXPECT_EQ(attrs("GET", "/apis/apps/v1/deployments").api_group, "apps");
}

TEST(RequestAttributesTest, WebSocketExecIsCreateAndDiscoveryIsNonResource) {
  RequestAttributes exec =
      attrs("GET", "/api/v1/namespaces/rook-ceph/pods/osd/exec?command=ls", true);
  EXPECT_EQ(exec.verb, "create");
  EXPECT_EQ(exec.resource, "pods");
  EXPECT_EQ(exec.subresource, "exec");
  EXPECT_EQ(attrs("POST", "/api/v1/namespaces/rook-ceph/pods/osd/exec").verb, "create");
  for (const char* path : {"/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version",
                           "/openapi/v3", "/healthz", "/kubesim/v1/request-log"}) {
    RequestAttributes a = attrs("GET", path);
    EXPECT_FALSE(a.resource_request) << path;
    EXPECT_EQ(a.verb, "get") << path;
    EXPECT_EQ(a.path, path);
  }
}

// --- rules ---

TEST(RbacRuleTest, ResourceNamesMatchOnlyRequestsThatNameOne) {
  json rule = {{"apiGroups", {""}},
               {"resources", {"configmaps"}},
               {"resourceNames", {"kubeadm-config"}},
               {"verbs", {"get", "update", "list", "create"}}};
  EXPECT_TRUE(
      ruleAllows(rule, resourceAttrs("get", "", "configmaps", "kube-system", "kubeadm-config")));
  EXPECT_FALSE(ruleAllows(rule, resourceAttrs("get", "", "configmaps", "kube-system", "other")));
  // Without a name (create, list) a resourceNames rule never matches.
  EXPECT_FALSE(ruleAllows(rule, resourceAttrs("list", "", "configmaps", "kube-system")));
  EXPECT_FALSE(ruleAllows(rule, resourceAttrs("create", "", "configmaps", "kube-system")));
  // A list pinned to the name by a field selector does.
  EXPECT_TRUE(ruleAllows(rule, attrs("GET",
                                     "/api/v1/namespaces/kube-system/configmaps"
                                     "?fieldSelector=metadata.name=kubeadm-config")));
}

TEST(RbacRuleTest, SubresourcesNeedResSubOrStarSub) {
  json status_any = {{"apiGroups", {"*"}}, {"resources", {"*/status"}}, {"verbs", {"update"}}};
  EXPECT_TRUE(ruleAllows(status_any, resourceAttrs("update", "", "nodes", "", "n1", "status")));
  EXPECT_TRUE(
      ruleAllows(status_any, resourceAttrs("update", "apps", "deployments", "x", "d", "status")));
  EXPECT_FALSE(ruleAllows(status_any, resourceAttrs("update", "", "nodes", "", "n1")));
  EXPECT_FALSE(
      ruleAllows(status_any, resourceAttrs("update", "apps", "deployments", "x", "d", "scale")));

  json nodes = {{"apiGroups", {""}}, {"resources", {"nodes"}}, {"verbs", {"*"}}};
  EXPECT_TRUE(ruleAllows(nodes, resourceAttrs("delete", "", "nodes", "", "n1")));
  EXPECT_FALSE(ruleAllows(nodes, resourceAttrs("update", "", "nodes", "", "n1", "status")));
  EXPECT_FALSE(ruleAllows(nodes, resourceAttrs("get", "apps", "nodes", "", "n1")));

  json exec = {{"apiGroups", {""}}, {"resources", {"pods/exec"}}, {"verbs", {"create"}}};
  EXPECT_TRUE(ruleAllows(exec, resourceAttrs("create", "", "pods", "ns", "p", "exec")));
  EXPECT_FALSE(ruleAllows(exec, resourceAttrs("create", "", "pods", "ns", "p")));
  EXPECT_FALSE(ruleAllows(exec, resourceAttrs("get", "", "pods", "ns", "p", "exec")));

  json everything = {{"apiGroups", {"*"}}, {"resources", {"*"}}, {"verbs", {"*"}}};
  EXPECT_TRUE(
      ruleAllows(everything, resourceAttrs("patch", "apps", "deployments", "x", "d", "scale")));
  // A resource rule never matches a non-resource request and vice versa.
  EXPECT_FALSE(ruleAllows(everything, attrs("GET", "/metrics")));
  json metrics = {{"nonResourceURLs", {"/metrics", "/logs/*"}}, {"verbs", {"get"}}};
  EXPECT_TRUE(ruleAllows(metrics, attrs("GET", "/metrics")));
  EXPECT_TRUE(ruleAllows(metrics, attrs("GET", "/logs/a/b")));
  EXPECT_FALSE(ruleAllows(metrics, attrs("POST", "/metrics")));
  EXPECT_FALSE(ruleAllows(metrics, resourceAttrs("get", "", "metrics", "")));
}

// --- the authorizer ---

class AuthorizeTest : public ::testing::Test {
 protected:
  AuthorizeTest() {
    policy_.cluster_roles = {
        clusterRole("ekco", {{{"apiGroups", {""}},
                              {"resources", {"nodes"}},
                              {"verbs", {"get", "list", "watch", "patch", "delete"}}}}),
        clusterRole("pod-reader",
                    {{{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get", "list"}}}}),
        clusterRole("lease-writer", {{{"apiGroups", {"coordination.k8s.io"}},
                                      {"resources", {"leases"}},
                                      {"verbs", {"create", "update"}}}}),
    };
    policy_.cluster_role_bindings = {
        binding("ClusterRoleBinding", "", "ekco", "ClusterRole", "ekco",
                {saSubject("kurl", "ekco")}),
    };
    policy_.roles = {
        role("kurl", "leader",
             {{{"apiGroups", {"coordination.k8s.io"}},
               {"resources", {"leases"}},
               {"verbs", {"get", "list", "watch"}}}}),
    };
    policy_.role_bindings = {
        // A RoleBinding to a ClusterRole grants it in its own namespace only.
        binding("RoleBinding", "default", "read-pods", "ClusterRole", "pod-reader",
                {{{"kind", "Group"}, {"name", "system:serviceaccounts:kurl"}}}),
        // A ServiceAccount subject without a namespace: the binding's.
        binding("RoleBinding", "kurl", "leader", "Role", "leader", {saSubject("", "ekco")}),
        // Bindings in another namespace grant nothing in kurl.
        binding("RoleBinding", "other", "lease-writer", "ClusterRole", "lease-writer",
                {saSubject("kurl", "ekco")}),
        binding("RoleBinding", "kurl", "someone-else", "ClusterRole", "lease-writer",
                {{{"kind", "User"}, {"name", "alice"}}}),
    };
  }
  RbacPolicy policy_;
};

TEST_F(AuthorizeTest, ClusterRoleBindingGrantsItsRulesCluterWide) {
  Decision d = authorize(policy_, ekcoUser(), resourceAttrs("delete", "", "nodes", "", "n1"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason,
            "RBAC: allowed by ClusterRoleBinding \"ekco\" of ClusterRole \"ekco\" to "
            "ServiceAccount \"ekco/kurl\"");
  EXPECT_TRUE(authorize(policy_, ekcoUser(), resourceAttrs("list", "", "nodes", "")).allowed);
  EXPECT_FALSE(
      authorize(policy_, ekcoUser(), resourceAttrs("update", "", "nodes", "", "n1")).allowed);
  EXPECT_FALSE(
      authorize(policy_, ekcoUser(), resourceAttrs("patch", "", "nodes", "", "n1", "status"))
          .allowed);
}

TEST_F(AuthorizeTest, RoleBindingToClusterRoleIsLimitedToItsNamespace) {
  // Via the group system:serviceaccounts:kurl.
  Decision d = authorize(policy_, ekcoUser(), resourceAttrs("list", "", "pods", "default"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason,
            "RBAC: allowed by RoleBinding \"read-pods/default\" of ClusterRole \"pod-reader\" to "
            "Group \"system:serviceaccounts:kurl\"");
  EXPECT_FALSE(authorize(policy_, ekcoUser(), resourceAttrs("list", "", "pods", "kurl")).allowed);
  EXPECT_FALSE(authorize(policy_, ekcoUser(), resourceAttrs("list", "", "pods", "")).allowed);
  // The group does not cover other service accounts' namespaces.
  UserInfo other = tokenUserInfo(
      TokenUser{.token = "x", .user = "system:serviceaccount:other:sa", .groups = {}});
  EXPECT_FALSE(authorize(policy_, other, resourceAttrs("list", "", "pods", "default")).allowed);
}

TEST_F(AuthorizeTest, RoleBindingServiceAccountSubjectDefaultsToTheBindingsNamespace) {
  Decision d = authorize(policy_, ekcoUser(),
                         resourceAttrs("get", "coordination.k8s.io", "leases", "kurl", "l"));
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.reason,
            "RBAC: allowed by RoleBinding \"leader/kurl\" of Role \"leader\" to ServiceAccount "
            "\"ekco/kurl\"");
  // Role "leader" only reads; the lease-writer binding is in "other" and for alice.
  EXPECT_FALSE(authorize(policy_, ekcoUser(),
                         resourceAttrs("update", "coordination.k8s.io", "leases", "kurl", "l"))
                   .allowed);
  EXPECT_TRUE(authorize(policy_, ekcoUser(),
                        resourceAttrs("update", "coordination.k8s.io", "leases", "other", "l"))
                  .allowed);
  UserInfo alice{.name = "alice", .groups = {"system:authenticated"}};
  EXPECT_TRUE(
      authorize(policy_, alice, resourceAttrs("create", "coordination.k8s.io", "leases", "kurl"))
          .allowed);
  EXPECT_FALSE(authorize(policy_, alice, resourceAttrs("get", "", "nodes", "", "n1")).allowed);
}

TEST_F(AuthorizeTest, MissingRolesAreTheDenialReason) {
  policy_.role_bindings.push_back(
      binding("RoleBinding", "kurl", "dangling", "Role", "gone", {saSubject("kurl", "ekco")}));
  Decision d = authorize(policy_, ekcoUser(), resourceAttrs("get", "", "secrets", "kurl", "s"));
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "RBAC: role.rbac.authorization.k8s.io \"gone\" not found");
  policy_.cluster_role_bindings.push_back(binding(
      "ClusterRoleBinding", "", "dangling2", "ClusterRole", "gone2", {saSubject("kurl", "ekco")}));
  d = authorize(policy_, ekcoUser(), resourceAttrs("get", "", "secrets", "kurl", "s"));
  EXPECT_EQ(d.reason,
            "RBAC: [clusterrole.rbac.authorization.k8s.io \"gone2\" not found, "
            "role.rbac.authorization.k8s.io \"gone\" not found]");
}

TEST_F(AuthorizeTest, DiscoveryAndSelfReviewsForEveryAuthenticatedUserMastersBypass) {
  for (const char* path : {"/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3",
                           "/openapi/v3/api/v1", "/healthz", "/livez", "/readyz"}) {
    EXPECT_TRUE(authorize(policy_, ekcoUser(), attrs("GET", path)).allowed) << path;
  }
  EXPECT_FALSE(authorize(policy_, ekcoUser(), attrs("GET", "/metrics")).allowed);
  EXPECT_FALSE(authorize(policy_, ekcoUser(), attrs("POST", "/api")).allowed);
  EXPECT_TRUE(authorize(policy_, ekcoUser(), attrs("POST", "/kubesim/v1/whatever")).allowed);
  EXPECT_TRUE(authorize(policy_, ekcoUser(),
                        attrs("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"))
                  .allowed);
  UserInfo admin{.name = "kubernetes-admin", .groups = {"system:masters", "system:authenticated"}};
  EXPECT_TRUE(
      authorize(RbacPolicy{}, admin, resourceAttrs("delete", "", "nodes", "", "x")).allowed);
}

TEST(RbacMessageTest, ForbiddenMessagesAreKubeApiserversText) {
  UserInfo user = ekcoUser();
  EXPECT_EQ(forbiddenMessage(user, resourceAttrs("delete", "", "nodes", "", "x"), ""),
            "nodes \"x\" is forbidden: User \"system:serviceaccount:kurl:ekco\" cannot delete "
            "resource \"nodes\" in API group \"\" at the cluster scope");
  EXPECT_EQ(forbiddenMessage(user, resourceAttrs("list", "", "pods", "kurl"), ""),
            "pods is forbidden: User \"system:serviceaccount:kurl:ekco\" cannot list resource "
            "\"pods\" in API group \"\" in the namespace \"kurl\"");
  EXPECT_EQ(forbiddenMessage(user, resourceAttrs("create", "", "pods", "kurl", "p", "exec"), ""),
            "pods \"p\" is forbidden: User \"system:serviceaccount:kurl:ekco\" cannot create "
            "resource \"pods/exec\" in API group \"\" in the namespace \"kurl\"");
  EXPECT_EQ(
      forbiddenMessage(user, resourceAttrs("get", "coordination.k8s.io", "leases", "kurl", "l"),
                       "RBAC: role.rbac.authorization.k8s.io \"r\" not found"),
      "leases.coordination.k8s.io \"l\" is forbidden: User "
      "\"system:serviceaccount:kurl:ekco\" cannot get resource \"leases\" in API group "
      "\"coordination.k8s.io\" in the namespace \"kurl\": RBAC: "
      "role.rbac.authorization.k8s.io \"r\" not found");
  EXPECT_EQ(forbiddenMessage(user, attrs("GET", "/metrics"), ""),
            "forbidden: User \"system:serviceaccount:kurl:ekco\" cannot get path \"/metrics\"");
  json status = forbiddenStatus(user, resourceAttrs("delete", "", "nodes", "", "x"), "");
  EXPECT_EQ(status["code"], 403);
  EXPECT_EQ(status["reason"], "Forbidden");
  EXPECT_EQ(status["details"], json({{"name", "x"}, {"kind", "nodes"}}));
}

TEST(RbacUserTest, ServiceAccountTokensGetTheServiceAccountGroups) {
  UserInfo sa = ekcoUser();
  EXPECT_EQ(sa.name, kEkco);
  EXPECT_EQ(sa.groups,
            (std::vector<std::string>{"system:serviceaccounts", "system:serviceaccounts:kurl",
                                      "system:authenticated"}));
  UserInfo bob = tokenUserInfo(TokenUser{.token = "b", .user = "bob", .groups = {"dev"}});
  EXPECT_EQ(bob.groups, (std::vector<std::string>{"dev", "system:authenticated"}));
  EXPECT_FALSE(bob.isMaster());
}

TEST_F(AuthorizeTest, SelfSubjectAccessReviewAnswersFromTheSameEvaluator) {
  json review = {
      {"apiVersion", "authorization.k8s.io/v1"},
      {"kind", "SelfSubjectAccessReview"},
      {"spec",
       {{"resourceAttributes", {{"verb", "delete"}, {"resource", "nodes"}, {"name", "n1"}}}}}};
  Reply r = selfSubjectAccessReview(policy_, ekcoUser(), review);
  EXPECT_EQ(r.code, 201);
  EXPECT_EQ(r.body["status"]["allowed"], true);
  review["spec"]["resourceAttributes"]["verb"] = "update";
  r = selfSubjectAccessReview(policy_, ekcoUser(), review);
  EXPECT_EQ(r.body["status"]["allowed"], false);
  EXPECT_EQ(r.body["spec"], review["spec"]);
  r = selfSubjectAccessReview(
      policy_, ekcoUser(),
      {{"spec", {{"nonResourceAttributes", {{"verb", "get"}, {"path", "/version"}}}}}});
  EXPECT_EQ(r.body["status"]["allowed"], true);
  EXPECT_EQ(selfSubjectAccessReview(policy_, ekcoUser(), {{"spec", json::object()}}).code, 422);
}

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

}  // namespace
}  // namespace ekco::kubesim
