// Authentication identities, request attributes and a Kubernetes RBAC authorizer for the test API
// server. The evaluation follows kube-apiserver's RBAC authorizer: ClusterRoleBindings grant
// their ClusterRole's rules everywhere, RoleBindings grant their Role's (same namespace) or
// ClusterRole's rules in the binding's namespace only; the first rule that allows decides.
// Request attributes (verb, API group, resource, subresource, namespace, name) are derived from
// the HTTP request as kube-apiserver's RequestInfoFactory does. Denials carry the real
// Forbidden message.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/kubesim/store/store.h"

namespace ekco::kubesim {

// A bearer token the server accepts, and who it is.
struct TokenUser {
  std::string token{};
  std::string user{};
  std::vector<std::string> groups{};
};

struct UserInfo {
  std::string name{};
  std::vector<std::string> groups{};

  bool inGroup(std::string_view group) const;
  bool isMaster() const { return inGroup("system:masters"); }
};

// The authenticated user for a token entry: its groups plus, for
// "system:serviceaccount:NS:NAME", system:serviceaccounts and system:serviceaccounts:NS, and
// system:authenticated for everyone.
UserInfo tokenUserInfo(const TokenUser& token);

// What kube-apiserver's authorizer sees of a request.
struct RequestAttributes {
  bool resource_request = false;
  std::string verb{};  // get list watch create update patch delete deletecollection; or the
                       // lower-case HTTP method for non-resource requests
  std::string api_group{};
  std::string api_version{};
  std::string resource{};
  std::string subresource{};
  std::string ns{};
  std::string name{};
  std::string path{};  // the URL path (no query)
};

// The attributes of an HTTP request. `path` is percent-decoded, `query` the decoded query pairs.
// GET on pods/exec, pods/attach or pods/portforward as a WebSocket upgrade is verb "create", as
// kube-apiserver authorizes it since 1.31 (AuthorizePodWebsocketUpgradeCreatePermission).
RequestAttributes requestAttributes(std::string_view method, std::string_view path,
                                    const std::vector<std::pair<std::string, std::string>>& query,
                                    bool websocket_upgrade);

// The RBAC objects an evaluation looks at (as stored: JSON objects). Role bindings and roles
// outside the request's namespace are ignored, so callers may pass only that namespace's.
struct RbacPolicy {
  std::vector<nlohmann::json> cluster_roles{};
  std::vector<nlohmann::json> cluster_role_bindings{};
  std::vector<nlohmann::json> roles{};
  std::vector<nlohmann::json> role_bindings{};
};

struct Decision {
  bool allowed = false;
  // Allowed: `RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "z"`; denied:
  // "" or `RBAC: role.rbac.authorization.k8s.io "x" not found` (bindings to missing roles).
  std::string reason{};
};

// One PolicyRule (JSON) against the attributes, as RBAC's RuleAllows.
bool ruleAllows(const nlohmann::json& rule, const RequestAttributes& attrs);

// The RBAC decision for a user. Members of system:masters are always allowed. Every user in
// system:authenticated also gets what kube-apiserver's default policy grants it
// (system:discovery, system:public-info-viewer, system:basic-user): GET on /api, /api/*, /apis,
// /apis/*, /version, /version/, /openapi, /openapi/*, /healthz, /livez, /readyz (and their
// sub-paths), and create on selfsubjectaccessreviews / selfsubjectrulesreviews
// (authorization.k8s.io) and selfsubjectreviews (authentication.k8s.io). kubesim's own
// /kubesim/* test endpoints are allowed for everyone (any verb).
Decision authorize(const RbacPolicy& policy, const UserInfo& user, const RequestAttributes& attrs);

// The message kube-apiserver's 403 carries, e.g.
//   nodes "x" is forbidden: User "u" cannot delete resource "nodes" in API group "" at the
//   cluster scope
// with ": <reason>" appended when the reason is not empty.
std::string forbiddenMessage(const UserInfo& user, const RequestAttributes& attrs,
                             std::string_view reason);
// The 403 Status body (reason Forbidden, details group/kind/name).
nlohmann::json forbiddenStatus(const UserInfo& user, const RequestAttributes& attrs,
                               std::string_view reason);

// What a request asks to act as (kube-apiserver's impersonation headers): Impersonate-User (the
// first one), every Impersonate-Group, Impersonate-Uid, and each Impersonate-Extra-<key> value
// (the key lower-cased and percent-decoded).
struct ImpersonationHeaders {
  std::string user{};
  std::vector<std::string> groups{};
  std::string uid{};
  std::vector<std::pair<std::string, std::string>> extras{};  // (key, value)

  bool empty() const { return user.empty() && groups.empty() && uid.empty() && extras.empty(); }
};

// The user a request with impersonation headers runs as, or its refusal.
struct Impersonation {
  std::optional<UserInfo> user{};  // set when allowed
  std::optional<Reply> refused{};  // set when refused (403, or 500 for headers without a user)
};

// kube-apiserver's WithImpersonation filter (k8s.io/apiserver/pkg/endpoints/filters): the
// requester must be allowed the verb "impersonate" on each thing it asks for, in this order:
// the user (resource "serviceaccounts" in its namespace, named, when the name is
// "system:serviceaccount:NS:NAME"; otherwise "users", named), each group ("groups"), each extra
// value (group authentication.k8s.io, "userextras", subresource the key) and the uid
// (authentication.k8s.io "uids"); the first refusal is the 403 (`serviceaccounts "x" is
// forbidden: User "u" cannot impersonate resource "serviceaccounts" in API group "" in the
// namespace "kurl"`). Groups, an extra or a uid without a user is a 500, as there. The new user
// has the requested name and groups; a service account without requested groups gets
// system:serviceaccounts and system:serviceaccounts:NS; everyone but system:anonymous gets
// system:authenticated unless system:authenticated or system:unauthenticated was requested
// (system:anonymous gets system:unauthenticated). kubesim's users carry no uid or extra, so
// those are authorized and then dropped. `policy_for(ns)` gives the RBAC objects for a
// namespace; members of system:masters may impersonate anyone.
Impersonation impersonate(const UserInfo& requester, const ImpersonationHeaders& headers,
                          const std::function<RbacPolicy(const std::string& ns)>& policy_for);

// Answers a SelfSubjectAccessReview body (authorization.k8s.io/v1) for `user`: 201 with the
// review and status.allowed / status.reason, or 422 Invalid when the spec has neither or both of
// resourceAttributes and nonResourceAttributes.
Reply selfSubjectAccessReview(const RbacPolicy& policy, const UserInfo& user,
                              const nlohmann::json& review);
// kubectl (client-go's typed client) sends the review as Kubernetes protobuf ("k8s\0" +
// runtime.Unknown); this decodes the spec into the JSON form. nullopt if malformed.
std::optional<nlohmann::json> decodeSelfSubjectAccessReviewProtobuf(std::string_view body);

}  // namespace ekco::kubesim
