// kubesim's RBAC authorization: the evaluator on its own (request attributes, rules, the
// authorizer, messages). (rbac_server_test.cc: authentication, authorization and the request log
// over HTTPS and with the real kubectl.)
#include "tests/kubesim/rbac/rbac.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/kubesim/rbac/rbac_test_objects.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;
using testing::binding;
using testing::clusterRole;
using ::testing::HasSubstr;
using testing::kEkco;
using testing::role;
using testing::saSubject;

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

// --- impersonation (kubectl --as) ---

TEST(ImpersonateTest, AServiceAccountIsImpersonatedWithItsGroupsOnlyWhereTheRequesterMay) {
  // Bob may impersonate the ServiceAccount kurl/ekco-node, nothing else.
  RbacPolicy policy{.roles = {role("kurl", "as-node",
                                   {{{"apiGroups", {""}},
                                     {"resources", {"serviceaccounts"}},
                                     {"resourceNames", {"ekco-node"}},
                                     {"verbs", {"impersonate"}}}})},
                    .role_bindings = {binding("RoleBinding", "kurl", "as-node", "Role", "as-node",
                                              {{{"kind", "User"}, {"name", "bob"}}})}};
  auto policy_for = [&](const std::string&) { return policy; };
  const UserInfo bob = tokenUserInfo(TokenUser{.token = "b", .user = "bob", .groups = {}});

  Impersonation as_node =
      impersonate(bob, {.user = "system:serviceaccount:kurl:ekco-node"}, policy_for);
  ASSERT_TRUE(as_node.user);
  EXPECT_FALSE(as_node.refused);
  EXPECT_EQ(as_node.user->name, "system:serviceaccount:kurl:ekco-node");
  EXPECT_EQ(as_node.user->groups,
            (std::vector<std::string>{"system:serviceaccounts", "system:serviceaccounts:kurl",
                                      "system:authenticated"}));

  Impersonation as_ekco = impersonate(bob, {.user = "system:serviceaccount:kurl:ekco"}, policy_for);
  EXPECT_FALSE(as_ekco.user);
  ASSERT_TRUE(as_ekco.refused);
  EXPECT_EQ(as_ekco.refused->code, 403);
  EXPECT_EQ(as_ekco.refused->body["message"],
            "serviceaccounts \"ekco\" is forbidden: User \"bob\" cannot impersonate resource "
            "\"serviceaccounts\" in API group \"\" in the namespace \"kurl\"");

  // Asking for a group too needs `impersonate groups` as well.
  Impersonation with_group = impersonate(
      bob, {.user = "system:serviceaccount:kurl:ekco-node", .groups = {"system:masters"}},
      policy_for);
  ASSERT_TRUE(with_group.refused);
  EXPECT_EQ(with_group.refused->body["message"],
            "groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource "
            "\"groups\" in API group \"\" at the cluster scope");

  // A user name that is not a ServiceAccount's is a user (resource "users").
  Impersonation as_alice = impersonate(bob, {.user = "alice"}, policy_for);
  ASSERT_TRUE(as_alice.refused);
  EXPECT_THAT(as_alice.refused->body["message"].get<std::string>(),
              HasSubstr("users \"alice\" is forbidden: User \"bob\" cannot impersonate resource "
                        "\"users\""));
}

TEST(ImpersonateTest, AMasterMayImpersonateAnyoneWithTheGroupsAsked) {
  const UserInfo admin{.name = "admin", .groups = {"system:masters", "system:authenticated"}};
  auto none = [](const std::string&) { return RbacPolicy{}; };
  Impersonation as_user = impersonate(admin, {.user = "alice", .groups = {"dev"}}, none);
  ASSERT_TRUE(as_user.user);
  EXPECT_EQ(as_user.user->name, "alice");
  EXPECT_EQ(as_user.user->groups, (std::vector<std::string>{"dev", "system:authenticated"}));
  EXPECT_FALSE(as_user.user->isMaster());
  // Groups given for a ServiceAccount replace its own.
  Impersonation sa_groups =
      impersonate(admin, {.user = "system:serviceaccount:kurl:ekco-node", .groups = {"x"}}, none);
  ASSERT_TRUE(sa_groups.user);
  EXPECT_EQ(sa_groups.user->groups, (std::vector<std::string>{"x", "system:authenticated"}));
  Impersonation anonymous = impersonate(admin, {.user = "system:anonymous"}, none);
  ASSERT_TRUE(anonymous.user);
  EXPECT_EQ(anonymous.user->groups, (std::vector<std::string>{"system:unauthenticated"}));
  // Groups without a user: kube-apiserver's 500.
  Impersonation no_user = impersonate(admin, {.groups = {"system:masters"}}, none);
  ASSERT_TRUE(no_user.refused);
  EXPECT_EQ(no_user.refused->code, 500);
  EXPECT_THAT(no_user.refused->body["message"].get<std::string>(),
              HasSubstr("without impersonating a user"));
}

}  // namespace
}  // namespace ekco::kubesim
