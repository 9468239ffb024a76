#include "tests/kubesim/rbac/rbac.h"

#include <algorithm>
#include <cstdint>

namespace ekco::kubesim {

using nlohmann::json;

namespace {

constexpr std::string_view kServiceAccountPrefix = "system:serviceaccount:";

std::string lowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::vector<std::string> splitPath(std::string_view path) {
  std::vector<std::string> out;
  while (!path.empty()) {
    auto slash = path.find('/');
    if (slash != 0) out.emplace_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return out;
}

const std::string* queryParam(const std::vector<std::pair<std::string, std::string>>& query,
                              std::string_view key) {
  for (const auto& [k, v] : query) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Go's strconv.ParseBool, as the watch query parameter is decoded.
bool parseBool(const std::string* v) {
  if (v == nullptr) return false;
  return *v == "1" || *v == "t" || *v == "T" || *v == "true" || *v == "TRUE" || *v == "True";
}

// The name a field selector pins with metadata.name=X / metadata.name==X (RequiresExactMatch).
std::string exactNameFromFieldSelector(const std::string* selector) {
  if (selector == nullptr) return {};
  std::string_view rest(*selector);
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view term = rest.substr(0, comma);
    for (std::string_view op : {"==", "="}) {
      std::string prefix = "metadata.name" + std::string(op);
      if (term.substr(0, prefix.size()) == prefix) {
        std::string_view name = term.substr(prefix.size());
        // A valid path segment name (path.IsValidPathSegmentName).
        if (name.empty() || name == "." || name == ".." ||
            name.find_first_of("/%") != std::string_view::npos) {
          return {};
        }
        return std::string(name);
      }
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return {};
}

bool contains(const json& list, std::string_view value) {
  if (!list.is_array()) return false;
  for (const json& v : list) {
    if (v.is_string() && v.get_ref<const std::string&>() == value) return true;
  }
  return false;
}

bool verbMatches(const json& rule, std::string_view verb) {
  const json& verbs = rule.value("verbs", json::array());
  return contains(verbs, "*") || contains(verbs, verb);
}

bool apiGroupMatches(const json& rule, std::string_view group) {
  const json& groups = rule.value("apiGroups", json::array());
  return contains(groups, "*") || contains(groups, group);
}

bool resourceMatches(const json& rule, const std::string& combined, std::string_view sub) {
  const json& resources = rule.value("resources", json::array());
  if (!resources.is_array()) return false;
  for (const json& r : resources) {
    if (!r.is_string()) continue;
    const std::string& res = r.get_ref<const std::string&>();
    if (res == "*" || res == combined) return true;
    if (!sub.empty() && res.size() == sub.size() + 2 && res.compare(0, 2, "*/") == 0 &&
        res.compare(2, std::string::npos, sub) == 0) {
      return true;
    }
  }
  return false;
}

bool resourceNameMatches(const json& rule, std::string_view name) {
  const json& names = rule.value("resourceNames", json::array());
  if (!names.is_array() || names.empty()) return true;
  return contains(names, name);
}

bool nonResourceURLMatches(const json& rule, std::string_view path) {
  const json& urls = rule.value("nonResourceURLs", json::array());
  if (!urls.is_array()) return false;
  for (const json& u : urls) {
    if (!u.is_string()) continue;
    std::string_view url = u.get_ref<const std::string&>();
    if (url == "*" || url == path) return true;
    if (!url.empty() && url.back() == '*') {
      // strings.TrimRight(url, "*"); npos + 1 == 0 for an all-'*' URL.
      std::string_view prefix = url.substr(0, url.find_last_not_of('*') + 1);
      if (path.substr(0, prefix.size()) == prefix) return true;
    }
  }
  return false;
}

std::string str(const json& obj, const char* a, const char* b = nullptr) {
  if (!obj.is_object()) return {};
  auto it = obj.find(a);
  if (it == obj.end()) return {};
  if (b != nullptr) {
    if (!it->is_object()) return {};
    auto jt = it->find(b);
    if (jt == it->end() || !jt->is_string()) return {};
    return jt->get<std::string>();
  }
  return it->is_string() ? it->get<std::string>() : std::string();
}

// The first subject of `binding` that names the user (RBAC's appliesTo), or null.
// `binding_ns` is "" for ClusterRoleBindings; a ServiceAccount subject without a namespace
// means the binding's namespace.
const json* matchingSubject(const json& binding, const UserInfo& user,
                            const std::string& binding_ns) {
  auto subjects = binding.find("subjects");
  if (subjects == binding.end() || !subjects->is_array()) return nullptr;
  for (const json& s : *subjects) {
    const std::string kind = str(s, "kind");
    const std::string name = str(s, "name");
    if (kind == "User") {
      if (user.name == name) return &s;
    } else if (kind == "Group") {
      if (user.inGroup(name)) return &s;
    } else if (kind == "ServiceAccount") {
      std::string ns = str(s, "namespace");
      if (ns.empty()) ns = binding_ns;
      if (ns.empty()) continue;
      if (user.name == std::string(kServiceAccountPrefix) + ns + ":" + name) return &s;
    }
  }
  return nullptr;
}

std::string describeSubject(const json& s, const std::string& binding_ns) {
  const std::string kind = str(s, "kind");
  std::string name = str(s, "name");
  if (kind == "ServiceAccount") {
    std::string ns = str(s, "namespace");
    name += "/" + (ns.empty() ? binding_ns : ns);
  }
  return kind + " \"" + name + "\"";
}

const json* findNamed(const std::vector<json>& objects, const std::string& name,
                      const std::string* ns) {
  for (const json& o : objects) {
    if (str(o, "metadata", "name") != name) continue;
    if (ns != nullptr && str(o, "metadata", "namespace") != *ns) continue;
    return &o;
  }
  return nullptr;
}

// The rules kube-apiserver's default policy grants every authenticated user, plus kubesim's
// own test endpoints.
const json& authenticatedRules() {
  static const json rules = json::array({
      {{"nonResourceURLs",
        {"/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/openapi", "/openapi/*",
         "/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*"}},
       {"verbs", {"get"}}},
      {{"apiGroups", {"authorization.k8s.io"}},
       {"resources", {"selfsubjectaccessreviews", "selfsubjectrulesreviews"}},
       {"verbs", {"create"}}},
      {{"apiGroups", {"authentication.k8s.io"}},
       {"resources", {"selfsubjectreviews"}},
       {"verbs", {"create"}}},
  });
  return rules;
}

// A protobuf message's fields: (number, wire type, varint value or bytes). nullopt if malformed.
struct ProtoField {
  std::uint64_t number = 0;
  int wire_type = 0;
  std::uint64_t varint = 0;
  std::string_view bytes{};
};

std::optional<std::uint64_t> readVarint(std::string_view& in) {
  std::uint64_t v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  return std::nullopt;
}

std::optional<std::vector<ProtoField>> protoFields(std::string_view in) {
  std::vector<ProtoField> out;
  while (!in.empty()) {
    auto key = readVarint(in);
    if (!key) return std::nullopt;
    ProtoField f{
        .number = *key >> 3, .wire_type = static_cast<int>(*key & 7), .varint = 0, .bytes = {}};
    if (f.wire_type == 0) {
      auto v = readVarint(in);
      if (!v) return std::nullopt;
      f.varint = *v;
    } else if (f.wire_type == 2) {
      auto len = readVarint(in);
      if (!len || *len > in.size()) return std::nullopt;
      f.bytes = in.substr(0, *len);
      in.remove_prefix(*len);
    } else if (f.wire_type == 1 || f.wire_type == 5) {
      std::size_t n = f.wire_type == 1 ? 8 : 4;
      if (in.size() < n) return std::nullopt;
      in.remove_prefix(n);
    } else {
      return std::nullopt;
    }
    out.push_back(f);
  }
  return out;
}

}  // namespace

std::optional<json> decodeSelfSubjectAccessReviewProtobuf(std::string_view body) {
  constexpr std::string_view kMagic("k8s\0", 4);
  if (body.substr(0, kMagic.size()) != kMagic) return std::nullopt;
  auto unknown = protoFields(body.substr(kMagic.size()));
  if (!unknown) return std::nullopt;
  std::string_view raw;
  for (const ProtoField& f : *unknown) {
    if (f.number == 2 && f.wire_type == 2) raw = f.bytes;  // runtime.Unknown.raw
  }
  auto review = protoFields(raw);
  if (!review) return std::nullopt;
  json spec = json::object();
  for (const ProtoField& f : *review) {
    if (f.number != 2 || f.wire_type != 2) continue;  // SelfSubjectAccessReview.spec
    auto spec_fields = protoFields(f.bytes);
    if (!spec_fields) return std::nullopt;
    for (const ProtoField& s : *spec_fields) {
      if (s.wire_type != 2 || (s.number != 1 && s.number != 2)) continue;
      auto attrs = protoFields(s.bytes);
      if (!attrs) return std::nullopt;
      // ResourceAttributes: namespace verb group version resource subresource name;
      // NonResourceAttributes: path verb.
      static const std::vector<const char*> kResource = {
          "namespace", "verb", "group", "version", "resource", "subresource", "name"};
      static const std::vector<const char*> kNonResource = {"path", "verb"};
      const auto& names = s.number == 1 ? kResource : kNonResource;
      json out = json::object();
      for (const ProtoField& a : *attrs) {
        if (a.wire_type == 2 && a.number >= 1 && a.number <= names.size()) {
          out[names[a.number - 1]] = std::string(a.bytes);
        }
      }
      spec[s.number == 1 ? "resourceAttributes" : "nonResourceAttributes"] = out;
    }
  }
  return json{{"apiVersion", "authorization.k8s.io/v1"},
              {"kind", "SelfSubjectAccessReview"},
              {"metadata", json::object()},
              {"spec", spec}};
}

bool UserInfo::inGroup(std::string_view group) const {
  return std::find(groups.begin(), groups.end(), group) != groups.end();
}

UserInfo tokenUserInfo(const TokenUser& token) {
  UserInfo info{.name = token.user, .groups = token.groups};
  auto add = [&](std::string group) {
    if (!info.inGroup(group)) info.groups.push_back(std::move(group));
  };
  std::string_view name(token.user);
  if (name.substr(0, kServiceAccountPrefix.size()) == kServiceAccountPrefix) {
    std::string_view rest = name.substr(kServiceAccountPrefix.size());
    auto colon = rest.find(':');
    if (colon != std::string_view::npos && colon > 0 && colon + 1 < rest.size()) {
      add("system:serviceaccounts");
      add("system:serviceaccounts:" + std::string(rest.substr(0, colon)));
    }
  }
  add("system:authenticated");
  return info;
}

RequestAttributes requestAttributes(std::string_view method, std::string_view path,
                                    const std::vector<std::pair<std::string, std::string>>& query,
                                    bool websocket_upgrade) {
  RequestAttributes a;
  a.path = std::string(path);
  a.verb = lowerAscii(method);
  std::vector<std::string> parts = splitPath(path);
  if (parts.size() < 3 || (parts[0] != "api" && parts[0] != "apis")) return a;
  std::size_t i = 1;
  if (parts[0] == "apis") {
    if (parts.size() < 4) return a;
    a.api_group = parts[1];
    i = 2;
  }
  a.resource_request = true;
  a.api_version = parts[i++];
  if (parts[i] == "watch") {
    if (parts.size() < i + 2) {
      // kube-apiserver rejects this; treat as a non-resource request.
      a.resource_request = false;
      a.api_group.clear();
      a.api_version.clear();
      return a;
    }
    a.verb = "watch";
    ++i;
  } else if (method == "POST") {
    a.verb = "create";
  } else if (method == "GET" || method == "HEAD") {
    a.verb = "get";
  } else if (method == "PUT") {
    a.verb = "update";
  } else if (method == "PATCH") {
    a.verb = "patch";
  } else if (method == "DELETE") {
    a.verb = "delete";
  } else {
    a.verb.clear();
  }
  if (parts[i] == "namespaces") {
    if (parts.size() > i + 1) {
      a.ns = parts[i + 1];
      if (parts.size() > i + 2 && parts[i + 2] != "status" && parts[i + 2] != "finalize") {
        i += 2;
      }
    }
  }
  // resource/name/subresource/...
  if (parts.size() > i) a.resource = parts[i];
  if (parts.size() > i + 1) a.name = parts[i + 1];
  if (parts.size() > i + 2) a.subresource = parts[i + 2];
  if (a.name.empty() && a.verb == "get") {
    a.verb = parseBool(queryParam(query, "watch")) ? "watch" : "list";
  }
  if (a.name.empty() && (a.verb == "list" || a.verb == "watch")) {
    a.name = exactNameFromFieldSelector(queryParam(query, "fieldSelector"));
  }
  if (a.name.empty() && a.verb == "delete") a.verb = "deletecollection";
  if (websocket_upgrade && a.verb == "get" && a.api_group.empty() && a.resource == "pods" &&
      (a.subresource == "exec" || a.subresource == "attach" || a.subresource == "portforward")) {
    a.verb = "create";
  }
  return a;
}

bool ruleAllows(const json& rule, const RequestAttributes& attrs) {
  if (!rule.is_object()) return false;
  if (attrs.resource_request) {
    std::string combined = attrs.resource;
    if (!attrs.subresource.empty()) combined += "/" + attrs.subresource;
    return verbMatches(rule, attrs.verb) && apiGroupMatches(rule, attrs.api_group) &&
           resourceMatches(rule, combined, attrs.subresource) &&
           resourceNameMatches(rule, attrs.name);
  }
  return verbMatches(rule, attrs.verb) && nonResourceURLMatches(rule, attrs.path);
}

// kube-apiserver's RBAC order (masters, discovery, ClusterRoleBindings, RoleBindings, then the
// denial with its aggregated errors) in one piece, so it can be checked against the original.
Decision authorize(const RbacPolicy& policy, const UserInfo& user, const RequestAttributes& attrs) {
  if (user.isMaster()) return Decision{.allowed = true, .reason = ""};
  if (!attrs.resource_request &&
      (attrs.path == "/kubesim" || attrs.path.compare(0, 9, "/kubesim/") == 0)) {
    return Decision{.allowed = true, .reason = ""};
  }
  if (user.inGroup("system:authenticated")) {
    for (const json& rule : authenticatedRules()) {
      if (ruleAllows(rule, attrs)) return Decision{.allowed = true, .reason = ""};
    }
  }
  std::vector<std::string> errors;
  auto rulesAllow = [&](const json* role) {
    const json& rules = role->value("rules", json::array());
    if (!rules.is_array()) return false;
    return std::any_of(rules.begin(), rules.end(),
                       [&](const json& rule) { return ruleAllows(rule, attrs); });
  };
  for (const json& binding : policy.cluster_role_bindings) {
    const json* subject = matchingSubject(binding, user, "");
    if (subject == nullptr) continue;
    const std::string role_kind = str(binding, "roleRef", "kind");
    const std::string role_name = str(binding, "roleRef", "name");
    if (role_kind != "ClusterRole") {
      errors.push_back("invalid ClusterRoleBinding roleRef kind \"" + role_kind + "\"");
      continue;
    }
    const json* role = findNamed(policy.cluster_roles, role_name, nullptr);
    if (role == nullptr) {
      errors.push_back("clusterrole.rbac.authorization.k8s.io \"" + role_name + "\" not found");
      continue;
    }
    if (rulesAllow(role)) {
      return Decision{.allowed = true,
                      .reason = "RBAC: allowed by ClusterRoleBinding \"" +
                                str(binding, "metadata", "name") + "\" of ClusterRole \"" +
                                role_name + "\" to " + describeSubject(*subject, "")};
    }
  }
  if (!attrs.ns.empty()) {
    for (const json& binding : policy.role_bindings) {
      const std::string binding_ns = str(binding, "metadata", "namespace");
      if (binding_ns != attrs.ns) continue;
      const json* subject = matchingSubject(binding, user, binding_ns);
      if (subject == nullptr) continue;
      const std::string role_kind = str(binding, "roleRef", "kind");
      const std::string role_name = str(binding, "roleRef", "name");
      const json* role = nullptr;
      if (role_kind == "ClusterRole") {
        role = findNamed(policy.cluster_roles, role_name, nullptr);
        if (role == nullptr) {
          errors.push_back("clusterrole.rbac.authorization.k8s.io \"" + role_name + "\" not found");
          continue;
        }
      } else if (role_kind == "Role") {
        role = findNamed(policy.roles, role_name, &binding_ns);
        if (role == nullptr) {
          errors.push_back("role.rbac.authorization.k8s.io \"" + role_name + "\" not found");
          continue;
        }
      } else {
        errors.push_back("unsupported role reference kind: \"" + role_kind + "\"");
        continue;
      }
      if (rulesAllow(role)) {
        return Decision{.allowed = true,
                        .reason = "RBAC: allowed by RoleBinding \"" +
                                  str(binding, "metadata", "name") + "/" + binding_ns + "\" of " +
                                  role_kind + " \"" + role_name + "\" to " +
                                  describeSubject(*subject, binding_ns)};
      }
    }
  }
  Decision denied;
  if (errors.size() == 1) {
    denied.reason = "RBAC: " + errors[0];
  } else if (errors.size() > 1) {
    // utilerrors.NewAggregate's message: "[a, b]".
    denied.reason = "RBAC: [";
    for (std::size_t i = 0; i < errors.size(); ++i) {
      if (i > 0) denied.reason += ", ";
      denied.reason += errors[i];
    }
    denied.reason += "]";
  }
  return denied;
}

std::string forbiddenMessage(const UserInfo& user, const RequestAttributes& attrs,
                             std::string_view reason) {
  std::string msg = "User \"" + user.name + "\" cannot " + attrs.verb;
  if (!attrs.resource_request) {
    msg += " path \"" + attrs.path + "\"";
  } else {
    std::string resource = attrs.resource;
    if (!attrs.subresource.empty()) resource += "/" + attrs.subresource;
    msg += " resource \"" + resource + "\" in API group \"" + attrs.api_group + "\"";
    msg += attrs.ns.empty() ? " at the cluster scope" : " in the namespace \"" + attrs.ns + "\"";
  }
  if (!reason.empty()) msg += ": " + std::string(reason);
  // apierrors.NewForbidden: the qualified resource ("pods", "leases.coordination.k8s.io") and
  // the name, when there are.
  std::string qualified = attrs.resource;
  if (!qualified.empty() && !attrs.api_group.empty()) qualified += "." + attrs.api_group;
  if (attrs.resource.empty() && attrs.api_group.empty()) return "forbidden: " + msg;
  if (attrs.name.empty()) return qualified + " is forbidden: " + msg;
  return qualified + " \"" + attrs.name + "\" is forbidden: " + msg;
}

json forbiddenStatus(const UserInfo& user, const RequestAttributes& attrs,
                     std::string_view reason) {
  json details = json::object();
  if (!attrs.name.empty()) details["name"] = attrs.name;
  if (!attrs.api_group.empty()) details["group"] = attrs.api_group;
  if (!attrs.resource.empty()) details["kind"] = attrs.resource;
  json body = {{"kind", "Status"},
               {"apiVersion", "v1"},
               {"metadata", json::object()},
               {"status", "Failure"},
               {"message", forbiddenMessage(user, attrs, reason)},
               {"reason", "Forbidden"},
               {"details", details},
               {"code", 403}};
  return body;
}

Reply selfSubjectAccessReview(const RbacPolicy& policy, const UserInfo& user, const json& review) {
  const json spec = review.is_object() ? review.value("spec", json::object()) : json::object();
  const json resource = spec.is_object() ? spec.value("resourceAttributes", json()) : json();
  const json non_resource = spec.is_object() ? spec.value("nonResourceAttributes", json()) : json();
  const bool has_resource = resource.is_object();
  const bool has_non_resource = non_resource.is_object();
  if (has_resource == has_non_resource) {
    return statusReply(422, "Invalid",
                       std::string("SelfSubjectAccessReview.authorization.k8s.io \"\" is "
                                   "invalid: spec.resourceAttributes: Invalid value: ") +
                           (has_resource ? "\"both\"" : "\"null\"") +
                           ": exactly one of nonResourceAttributes or resourceAttributes must "
                           "be specified");
  }
  RequestAttributes attrs;
  if (has_resource) {
    attrs.resource_request = true;
    attrs.verb = str(resource, "verb");
    attrs.api_group = str(resource, "group");
    attrs.api_version = str(resource, "version");
    attrs.resource = str(resource, "resource");
    attrs.subresource = str(resource, "subresource");
    attrs.ns = str(resource, "namespace");
    attrs.name = str(resource, "name");
  } else {
    attrs.verb = str(non_resource, "verb");
    attrs.path = str(non_resource, "path");
  }
  Decision decision = authorize(policy, user, attrs);
  json out = review;
  out["apiVersion"] = "authorization.k8s.io/v1";
  out["kind"] = "SelfSubjectAccessReview";
  if (!out.contains("metadata") || !out["metadata"].is_object()) out["metadata"] = json::object();
  out["metadata"]["creationTimestamp"] = nullptr;
  json status = {{"allowed", decision.allowed}};
  if (!decision.reason.empty()) status["reason"] = decision.reason;
  out["status"] = status;
  return Reply{.code = 201, .body = std::move(out)};
}

namespace {

// serviceaccount.SplitUsername: "system:serviceaccount:NS:NAME" with exactly two non-empty parts.
std::optional<std::pair<std::string, std::string>> splitServiceAccount(std::string_view name) {
  if (name.substr(0, kServiceAccountPrefix.size()) != kServiceAccountPrefix) return std::nullopt;
  std::string_view rest = name.substr(kServiceAccountPrefix.size());
  const auto colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size() ||
      rest.find(':', colon + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  return std::pair{std::string(rest.substr(0, colon)), std::string(rest.substr(colon + 1))};
}

}  // namespace

Impersonation impersonate(const UserInfo& requester, const ImpersonationHeaders& headers,
                          const std::function<RbacPolicy(const std::string& ns)>& policy_for) {
  Impersonation out;
  if (headers.user.empty()) {
    std::string requested;
    for (const auto& g : headers.groups) requested += (requested.empty() ? "" : " ") + g;
    out.refused = statusReply(
        500, "InternalError",
        "Internal error occurred: requested [" + requested + "] without impersonating a user");
    return out;
  }
  // (1) Each thing asked for, authorized for the requester, in buildImpersonationRequests's
  // order.
  std::vector<RequestAttributes> asks;
  auto ask = [&](std::string group, std::string resource, std::string ns, std::string name,
                 std::string subresource = {}) {
    asks.push_back({.resource_request = true,
                    .verb = "impersonate",
                    .api_group = std::move(group),
                    .api_version = "v1",
                    .resource = std::move(resource),
                    .subresource = std::move(subresource),
                    .ns = std::move(ns),
                    .name = std::move(name)});
  };
  UserInfo user{.name = headers.user};
  const auto service_account = splitServiceAccount(headers.user);
  if (service_account) {
    ask("", "serviceaccounts", service_account->first, service_account->second);
  } else {
    ask("", "users", "", headers.user);
  }
  for (const auto& g : headers.groups) ask("", "groups", "", g);
  for (const auto& [key, value] : headers.extras) {
    ask("authentication.k8s.io", "userextras", "", value, key);
  }
  if (!headers.uid.empty()) ask("authentication.k8s.io", "uids", "", headers.uid);
  for (const RequestAttributes& attrs : asks) {
    if (requester.isMaster()) continue;
    const Decision decision = authorize(policy_for(attrs.ns), requester, attrs);
    if (!decision.allowed) {
      out.refused = Reply{.code = 403, .body = forbiddenStatus(requester, attrs, decision.reason)};
      return out;
    }
  }
  // (2) The new user's groups.
  if (service_account && headers.groups.empty()) {
    user.groups = {"system:serviceaccounts", "system:serviceaccounts:" + service_account->first};
  } else {
    user.groups = headers.groups;
  }
  if (user.name != "system:anonymous") {
    if (!user.inGroup("system:authenticated") && !user.inGroup("system:unauthenticated")) {
      user.groups.push_back("system:authenticated");
    }
  } else if (!user.inGroup("system:unauthenticated")) {
    user.groups.push_back("system:unauthenticated");
  }
  out.user = std::move(user);
  return out;
}

}  // namespace ekco::kubesim
