#include "tests/kubesim/admission/admission_webhooks.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "tests/kubesim/rbac/request_user.h"
#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim::webhooks {
namespace {

using nlohmann::json;

std::string idx(const std::string& base, std::size_t i) {
  return base + "[" + std::to_string(i) + "]";
}

bool contains(const json& list, const std::string& value) {
  if (!list.is_array()) return false;
  return std::any_of(list.begin(), list.end(), [&](const json& v) {
    return v.is_string() && (v.get<std::string>() == "*" || v.get<std::string>() == value);
  });
}

void checkEnum(std::vector<FieldError>& out, const json& hook, const char* key,
               const std::string& at, const std::vector<std::string>& allowed) {
  if (!hook.contains(key)) return;
  const json& v = hook[key];
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (std::find(allowed.begin(), allowed.end(), s) == allowed.end()) {
    out.push_back(notSupported(at + "." + key, s, allowed));
  }
}

void validateRules(std::vector<FieldError>& out, const json& rules, const std::string& at) {
  if (!rules.is_array()) return;
  for (std::size_t j = 0; j < rules.size(); ++j) {
    const json& rule = rules[j];
    const std::string rat = idx(at + ".rules", j);
    for (const char* key : {"apiGroups", "apiVersions", "resources"}) {
      if (!rule.contains(key) || !rule[key].is_array() || rule[key].empty()) {
        out.push_back(requiredValue(rat + "." + key));
      }
    }
    const json ops = rule.value("operations", json::array());
    if (!ops.is_array() || ops.empty()) out.push_back(requiredValue(rat + ".operations"));
    for (std::size_t k = 0; ops.is_array() && k < ops.size(); ++k) {
      const std::string op = ops[k].is_string() ? ops[k].get<std::string>() : ops[k].dump();
      const std::vector<std::string> allowed = {"*", "CONNECT", "CREATE", "DELETE", "UPDATE"};
      if (std::find(allowed.begin(), allowed.end(), op) == allowed.end()) {
        out.push_back(notSupported(idx(rat + ".operations", k), op, allowed));
      }
    }
    checkEnum(out, rule, "scope", rat, {"*", "Cluster", "Namespaced"});
  }
}

void validateClientConfig(std::vector<FieldError>& out, const json& cc, const std::string& at) {
  const bool has_url = cc.is_object() && cc.contains("url");
  const bool has_service = cc.is_object() && cc.contains("service");
  if (has_url == has_service) {
    out.push_back(requiredValue(at, "exactly one of url or service is required"));
    return;
  }
  if (has_url) {
    const std::string url = cc["url"].is_string() ? cc["url"].get<std::string>() : "";
    if (url.rfind("https://", 0) != 0) {
      out.push_back(invalidValue(at + ".url", url, "'https' is the only allowed URL scheme"));
    } else if (url.find('#') != std::string::npos) {
      out.push_back(invalidValue(at + ".url", url, "fragments are not permitted in the URL"));
    } else if (url.find('@') != std::string::npos) {
      out.push_back(invalidValue(at + ".url", url, "user information is not permitted in the URL"));
    } else if (url.size() == 8) {
      out.push_back(invalidValue(at + ".url", url, "host must be specified"));
    }
    return;
  }
  const json& svc = cc["service"];
  const std::string sat = at + ".service";
  if (svc.value("namespace", "").empty()) out.push_back(requiredValue(sat + ".namespace"));
  if (svc.value("name", "").empty()) out.push_back(requiredValue(sat + ".name"));
  const std::string path = svc.value("path", "");
  if (!path.empty() && path[0] != '/') {
    out.push_back(invalidValue(sat + ".path", path, "must start with a '/'"));
  }
  if (svc.contains("port")) {
    const json& port = svc["port"];
    if (!port.is_number_integer() || port.get<std::int64_t>() < 1 ||
        port.get<std::int64_t>() > 65535) {
      out.push_back(invalidValue(sat + ".port", port,
                                 "port is not valid: must be between 1 and 65535, inclusive"));
    }
  }
}

// A metav1.LabelSelector (matchLabels, matchExpressions) as selector text; nullopt if invalid.
std::optional<LabelSelector> labelSelector(const json& sel) {
  if (!sel.is_object()) return LabelSelector::parse("").value();
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ",") + part; };
  const json match_labels = sel.value("matchLabels", json::object());
  for (const auto& [k, v] : match_labels.items()) {
    add(k + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
  }
  for (const json& e : sel.value("matchExpressions", json::array())) {
    const std::string key = e.value("key", "");
    const std::string op = e.value("operator", "");
    std::string values;
    for (const json& v : e.value("values", json::array())) {
      values += (values.empty() ? "" : ",") + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    if (op == "In") {
      add(key + " in (" + values + ")");
    } else if (op == "NotIn") {
      add(key + " notin (" + values + ")");
    } else if (op == "Exists") {
      add(key);
    } else if (op == "DoesNotExist") {
      add("!" + key);
    } else {
      return std::nullopt;
    }
  }
  auto parsed = LabelSelector::parse(text);
  if (!parsed) return std::nullopt;
  return std::move(*parsed);
}

json labelsOf(const json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return json();
  return obj["metadata"].value("labels", json());
}

bool ruleMatches(const json& rule, const Attributes& a) {
  const ResourceInfo& r = *a.resource;
  if (!contains(rule.value("operations", json::array()), a.operation)) return false;
  if (!contains(rule.value("apiGroups", json::array()), r.group)) return false;
  if (!contains(rule.value("apiVersions", json::array()), r.version)) return false;
  const std::string scope = rule.value("scope", "*");
  if (scope == "Cluster" && r.namespaced) return false;
  if (scope == "Namespaced" && !r.namespaced) return false;
  for (const json& res : rule.value("resources", json::array())) {
    if (!res.is_string()) continue;
    const std::string s = res.get<std::string>();
    if (s == "*/*") return true;
    const auto slash = s.find('/');
    const std::string main = s.substr(0, slash);
    const std::string sub = slash == std::string::npos ? "" : s.substr(slash + 1);
    if ((main == "*" || main == r.plural) && (sub == "*" || sub == a.subresource)) return true;
  }
  return false;
}

std::string newUid() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> hex(0, 15);
  std::string out;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
    out += "0123456789abcdef"[i == 12 ? 4 : hex(rng)];
  }
  return out;
}

Reply internalError(const std::string& message) {
  Reply reply = statusReply(500, "InternalError", "Internal error occurred: " + message);
  reply.body["details"] = {{"causes", {{{"message", message}}}}};
  return reply;
}

// Resolves url or service into where to connect.
void resolve(Target& t, const json& cc, const Lookup& lookup, const SliceLister& slices) {
  const std::string timeout = "timeout=" + std::to_string(t.timeout.count()) + "s";
  if (cc.contains("url")) {
    std::string url = cc["url"].get<std::string>();
    std::string rest = url.substr(8);  // after https://
    const auto slash = rest.find_first_of("/?");
    std::string authority = rest.substr(0, slash);
    std::string target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (target[0] == '?') target = "/" + target;
    target += (target.find('?') == std::string::npos ? "?" : "&") + timeout;
    std::string host = authority;
    std::string port = "443";
    if (!authority.empty() && authority[0] == '[') {
      const auto close = authority.find(']');
      host = authority.substr(1, close - 1);
      if (close + 1 < authority.size() && authority[close + 1] == ':') {
        port = authority.substr(close + 2);
      }
    } else if (const auto colon = authority.rfind(':'); colon != std::string::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
    }
    t.host = host;
    t.port = port;
    t.server_name = host;
    t.target = target;
    t.url = "https://" + authority + target;
    return;
  }
  const json& svc = cc["service"];
  const std::string ns = svc.value("namespace", "");
  const std::string name = svc.value("name", "");
  const std::int64_t port = svc.value("port", std::int64_t{443});
  const std::string path = svc.value("path", "");
  t.server_name = name + "." + ns + ".svc";
  t.target = (path.empty() ? "/" : path) + "?" + timeout;
  t.url = "https://" + t.server_name + ":" + std::to_string(port) + path + "?" + timeout;
  const json* service = lookup("/v1/services", ns, name);
  if (service == nullptr) {
    t.resolve_error = "service \"" + name + "\" not found";
    return;
  }
  const json* port_spec = nullptr;
  const json ports = service->value("spec", json::object()).value("ports", json::array());
  for (const json& p : ports) {
    if (p.value("port", std::int64_t{0}) == port) port_spec = &p;
  }
  if (port_spec == nullptr) {
    t.resolve_error =
        "no service port " + std::to_string(port) + " found for service \"" + name + "\"";
    return;
  }
  const std::string port_name = port_spec->value("name", "");
  if (slices) {
    for (const json* slice : slices(ns, name)) {
      for (const json& p : slice->value("ports", json::array())) {
        if (!p.is_object() || p.value("name", "") != port_name || !p.contains("port")) continue;
        for (const json& e : slice->value("endpoints", json::array())) {
          const json conditions = e.value("conditions", json::object());
          if (conditions.value("ready", true) == false) continue;  // null counts as ready
          const json addresses = e.value("addresses", json::array());
          if (addresses.empty() || !addresses[0].is_string()) continue;
          t.host = addresses[0].get<std::string>();
          t.port = std::to_string(p["port"].get<std::int64_t>());
          return;
        }
      }
    }
  }
  const json* endpoints = lookup("/v1/endpoints", ns, name);
  if (endpoints != nullptr) {
    for (const json& subset : endpoints->value("subsets", json::array())) {
      for (const json& p : subset.value("ports", json::array())) {
        if (p.value("name", "") != port_name || !p.contains("port")) continue;
        for (const json& address : subset.value("addresses", json::array())) {
          if (address.value("ip", "").empty()) continue;
          t.host = address["ip"].get<std::string>();
          t.port = std::to_string(p["port"].get<std::int64_t>());
          return;
        }
      }
    }
  }
  t.resolve_error = "service \"" + ns + "/" + name + "\" has no endpoints for port " +
                    std::to_string(port) + " (kubesim: create an EndpointSlice or Endpoints " + ns +
                    "/" + name + " with the webhook server's address)";
}

}  // namespace

bool isConfiguration(const ResourceInfo& r) {
  return r.group == "admissionregistration.k8s.io" && r.plural == "mutatingwebhookconfigurations";
}

void applyConfigurationDefaults(json& config) {
  json& hooks = config["webhooks"];
  if (!hooks.is_array()) {
    if (hooks.is_null()) config.erase("webhooks");
    return;
  }
  for (json& h : hooks) {
    if (!h.is_object()) continue;
    if (!h.contains("failurePolicy")) h["failurePolicy"] = "Fail";
    if (!h.contains("matchPolicy")) h["matchPolicy"] = "Equivalent";
    if (!h.contains("namespaceSelector")) h["namespaceSelector"] = json::object();
    if (!h.contains("objectSelector")) h["objectSelector"] = json::object();
    if (!h.contains("timeoutSeconds")) h["timeoutSeconds"] = 10;
    if (!h.contains("reinvocationPolicy")) h["reinvocationPolicy"] = "Never";
    if (h.contains("clientConfig") && h["clientConfig"].is_object() &&
        h["clientConfig"].contains("service") && h["clientConfig"]["service"].is_object() &&
        !h["clientConfig"]["service"].contains("port")) {
      h["clientConfig"]["service"]["port"] = 443;
    }
    if (h.contains("rules") && h["rules"].is_array()) {
      for (json& rule : h["rules"]) {
        if (rule.is_object() && !rule.contains("scope")) rule["scope"] = "*";
      }
    }
  }
}

std::vector<FieldError> validateConfiguration(const json& config) {
  std::vector<FieldError> out;
  const json hooks = config.value("webhooks", json::array());
  std::vector<std::string> names;
  for (std::size_t i = 0; hooks.is_array() && i < hooks.size(); ++i) {
    const json& h = hooks[i];
    const std::string at = idx("webhooks", i);
    const std::string name = h.value("name", "");
    if (name.empty()) {
      out.push_back(requiredValue(at + ".name"));
    } else {
      for (const std::string& e : qualifiedName(name))
        out.push_back(invalidValue(at + ".name", name, e));
      if (std::count(name.begin(), name.end(), '.') < 2) {
        out.push_back(
            invalidValue(at + ".name", name,
                         "should be a domain with at least three segments separated by dots"));
      }
      if (std::find(names.begin(), names.end(), name) != names.end()) {
        out.push_back(FieldError{.type = "FieldValueDuplicate",
                                 .field = at + ".name",
                                 .value = goQuote(name),
                                 .detail = ""});
      }
      names.push_back(name);
    }
    validateClientConfig(out, h.value("clientConfig", json()), at + ".clientConfig");
    const json versions = h.value("admissionReviewVersions", json::array());
    if (!versions.is_array() || versions.empty()) {
      out.push_back(
          requiredValue(at + ".admissionReviewVersions", "must specify one of v1, v1beta1"));
    } else if (!contains(versions, "v1")) {
      out.push_back(invalidValue(at + ".admissionReviewVersions", versions,
                                 "must include at least one of v1 (kubesim sends only "
                                 "admission.k8s.io/v1)"));
    }
    if (!h.contains("sideEffects")) {
      out.push_back(requiredValue(at + ".sideEffects", "must specify one of None, NoneOnDryRun"));
    } else {
      checkEnum(out, h, "sideEffects", at, {"None", "NoneOnDryRun"});
    }
    if (h.contains("timeoutSeconds")) {
      const json& t = h["timeoutSeconds"];
      if (!t.is_number_integer() || t.get<std::int64_t>() < 1 || t.get<std::int64_t>() > 30) {
        out.push_back(invalidValue(at + ".timeoutSeconds", t,
                                   "the timeout value must be between 1 and 30 seconds"));
      }
    }
    checkEnum(out, h, "failurePolicy", at, {"Fail", "Ignore"});
    checkEnum(out, h, "matchPolicy", at, {"Equivalent", "Exact"});
    checkEnum(out, h, "reinvocationPolicy", at, {"IfNeeded", "Never"});
    for (const char* sel : {"namespaceSelector", "objectSelector"}) {
      if (h.contains(sel) && !labelSelector(h[sel])) {
        out.push_back(invalidValue(at + "." + sel, h[sel].dump(), "not a valid label selector"));
      }
    }
    validateRules(out, h.value("rules", json::array()), at);
  }
  return out;
}

std::vector<Target> select(const std::vector<const json*>& configurations, const Attributes& a,
                           const json* namespace_object, const json& object, const json& old,
                           const Lookup& lookup, const SliceLister& slices) {
  std::vector<Target> out;
  const bool is_namespace = a.resource->group.empty() && a.resource->plural == "namespaces";
  for (const json* config : configurations) {
    for (const json& h : config->value("webhooks", json::array())) {
      bool matched = false;
      for (const json& rule : h.value("rules", json::array()))
        matched = matched || ruleMatches(rule, a);
      if (!matched) continue;
      if (a.resource->namespaced || is_namespace) {
        auto sel = labelSelector(h.value("namespaceSelector", json::object()));
        const json labels = is_namespace ? labelsOf(object)
                                         : labelsOf(namespace_object ? *namespace_object : json());
        if (!sel || !sel->matches(labels)) continue;
      }
      auto objsel = labelSelector(h.value("objectSelector", json::object()));
      if (!objsel || !(objsel->matches(labelsOf(object)) ||
                       (!old.is_null() && objsel->matches(labelsOf(old))))) {
        continue;
      }
      Target t;
      t.name = h.value("name", "");
      t.timeout = std::chrono::seconds(
          std::clamp<std::int64_t>(h.value("timeoutSeconds", std::int64_t{10}), 1, 30));
      t.fail_closed = h.value("failurePolicy", "Fail") != "Ignore";
      const std::string effects = h.value("sideEffects", "");
      t.dry_run_safe = effects == "None" || effects == "NoneOnDryRun";
      const json cc = h.value("clientConfig", json::object());
      std::string error;
      auto ca = decodeBase64(cc.value("caBundle", ""), &error);
      t.ca_pem = ca.value_or("");
      resolve(t, cc, lookup, slices);
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::optional<Reply> call(const std::vector<Target>& targets, const Attributes& a, json& object,
                          const json& old, const UserInfo* user) {
  const ResourceInfo& r = *a.resource;
  for (const Target& t : targets) {
    if (a.dry_run && !t.dry_run_safe) {
      return statusReply(400, "BadRequest",
                         "admission webhook \"" + t.name + "\" does not support dry run");
    }
    const std::string uid = newUid();
    json kind = {{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
    json resource = {{"group", r.group}, {"version", r.version}, {"resource", r.plural}};
    json request = {{"uid", uid},
                    {"kind", kind},
                    {"resource", resource},
                    {"requestKind", kind},
                    {"requestResource", resource},
                    {"operation", a.operation},
                    {"userInfo", json::object()},
                    {"object", object},
                    {"oldObject", old.is_null() ? json() : old},
                    {"dryRun", a.dry_run},
                    {"options",
                     {{"kind", a.operation == "CREATE" ? "CreateOptions" : "UpdateOptions"},
                      {"apiVersion", "meta.k8s.io/v1"}}}};
    if (a.dry_run) request["options"]["dryRun"] = json::array({"All"});
    if (!a.subresource.empty()) {
      request["subResource"] = a.subresource;
      request["requestSubResource"] = a.subresource;
    }
    if (!a.name.empty()) request["name"] = a.name;
    if (!a.ns.empty()) request["namespace"] = a.ns;
    if (user != nullptr) {
      request["userInfo"]["username"] = user->name;
      request["userInfo"]["groups"] = authenticatedGroups(*user);
    }
    json review = {{"apiVersion", "admission.k8s.io/v1"},
                   {"kind", "AdmissionReview"},
                   {"request", std::move(request)}};
    // A failure to call, or an answer that is not a valid review: failurePolicy decides.
    std::optional<std::string> failure;
    json response;
    if (!t.resolve_error.empty()) {
      failure = "failed to call webhook: " + t.resolve_error;
    } else if (auto body = post(t, review.dump()); !body) {
      failure = "failed to call webhook: Post \"" + t.url + "\": " + body.error().message();
    } else {
      json answer = json::parse(*body, nullptr, false);
      if (answer.is_discarded() || !answer.is_object()) {
        failure = "received invalid webhook response: the response is not JSON";
      } else if (answer.value("apiVersion", "") != "admission.k8s.io/v1" ||
                 answer.value("kind", "") != "AdmissionReview") {
        failure =
            "received invalid webhook response: expected webhook response of "
            "admission.k8s.io/v1, Kind=AdmissionReview, got " +
            answer.value("apiVersion", "") + ", Kind=" + answer.value("kind", "");
      } else if (!answer.contains("response") || !answer["response"].is_object()) {
        failure = "received invalid webhook response: webhook response was absent";
      } else if (answer["response"].value("uid", "") != uid) {
        failure = "received invalid webhook response: expected response.uid=\"" + uid +
                  "\", got \"" + answer["response"].value("uid", "") + "\"";
      } else {
        response = answer["response"];
        const bool has_patch = response.contains("patch") && !response["patch"].is_null();
        const std::string type = response.value("patchType", "");
        if (has_patch && type.empty()) {
          failure = "received invalid webhook response: webhook returned patch but not patchType";
        } else if (!has_patch && !type.empty()) {
          failure = "received invalid webhook response: webhook returned patchType " + type +
                    " but not patch";
        } else if (has_patch && type != "JSONPatch") {
          failure = "received invalid webhook response: webhook returned invalid patchType: \"" +
                    type + "\"";
        }
      }
    }
    if (failure) {
      const std::string message = "failed calling webhook \"" + t.name + "\": " + *failure;
      if (!t.fail_closed) {
        std::fprintf(stderr, "kubesim: %s (failurePolicy Ignore: admitted)\n", message.c_str());
        continue;
      }
      return internalError(message);
    }
    if (!response.value("allowed", false)) {
      const json status = response.value("status", json::object());
      int code = status.value("code", 0);
      if (code < 400) code = 400;
      std::string message = "admission webhook \"" + t.name + "\" denied the request";
      if (!status.value("message", "").empty()) {
        message += ": " + status["message"].get<std::string>();
      } else if (!status.value("reason", "").empty()) {
        message += ": " + status["reason"].get<std::string>();
      } else {
        message += " without explanation";
      }
      Reply reply = statusReply(code, status.value("reason", ""), message);
      if (status.contains("details")) reply.body["details"] = status["details"];
      return reply;
    }
    if (!response.contains("patch") || response["patch"].is_null()) continue;
    std::string error;
    auto raw = response["patch"].is_string()
                   ? decodeBase64(response["patch"].get<std::string>(), &error)
                   : std::nullopt;
    json ops = raw ? json::parse(*raw, nullptr, false) : json();
    if (!raw || ops.is_discarded() || !ops.is_array()) {
      return internalError("admission webhook \"" + t.name +
                           "\" returned a patch that is not a JSON Patch document");
    }
    try {
      json patched = object.patch(ops);
      if (!patched.is_object()) throw std::runtime_error("the patched object is not an object");
      object = std::move(patched);
    } catch (const std::exception& e) {
      return internalError("admission webhook \"" + t.name +
                           "\" returned a patch that does not apply: " + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace ekco::kubesim::webhooks
