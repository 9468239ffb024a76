// The kind-specific rules of kube-apiserver 1.32's registry strategies that kubesim models
// (pkg/apis/core/validation, pkg/apis/apps/validation): Pod create and update (the spec is
// immutable but for images, activeDeadlineSeconds, added tolerations and a negative grace
// period set to 1), ConfigMap and Secret (keys, size, Secret types, `immutable`), Service and
// Deployment basics, a Node's taints (pkg/apis/core/validation validateNodeTaints) and a Lease's
// spec (pkg/apis/coordination/validation ValidateLeaseSpec).
#include <algorithm>
#include <map>
#include <set>

#include "tests/kubesim/validation/types.h"
#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim {

using nlohmann::json;

namespace {

constexpr long kMaxSecretSize = 1024 * 1024;

bool isCore(const ResourceInfo& r, const char* plural) {
  return r.group.empty() && r.plural == plural;
}

const json& field(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) return kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

std::string index(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

void validateContainers(const json& containers, const std::string& path, bool require_image,
                        std::vector<FieldError>& errs) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < containers.size(); ++i) {
    const json& c = containers[i];
    std::string name = c.is_object() ? c.value("name", "") : "";
    std::string at = index(path, i);
    if (name.empty()) {
      errs.push_back(requiredValue(at + ".name"));
    } else {
      for (const std::string& msg : dns1123Label(name)) {
        errs.push_back(invalidValue(at + ".name", name, msg));
      }
      if (!names.insert(name).second) {
        errs.push_back(FieldError{
            .type = "FieldValueDuplicate", .field = at + ".name", .value = goQuote(name)});
      }
    }
    if (require_image && (!c.is_object() || c.value("image", "").empty())) {
      errs.push_back(requiredValue(at + ".image"));
    }
  }
}

void validatePodSpec(const json& spec, const std::string& path, bool require_image,
                     std::vector<FieldError>& errs) {
  const json& containers = field(spec, "containers");
  if (!containers.is_array() || containers.empty()) {
    errs.push_back(requiredValue(path + ".containers"));
  } else {
    validateContainers(containers, path + ".containers", require_image, errs);
  }
  if (const json& init = field(spec, "initContainers"); init.is_array()) {
    validateContainers(init, path + ".initContainers", require_image, errs);
  }
  static const std::vector<std::string> kRestart = {"Always", "OnFailure", "Never"};
  if (const json& p = field(spec, "restartPolicy");
      p.is_string() &&
      std::find(kRestart.begin(), kRestart.end(), p.get<std::string>()) == kRestart.end()) {
    errs.push_back(notSupported(path + ".restartPolicy", p, kRestart));
  }
  static const std::vector<std::string> kDns = {"ClusterFirstWithHostNet", "ClusterFirst",
                                                "Default", "None"};
  if (const json& p = field(spec, "dnsPolicy");
      p.is_string() && std::find(kDns.begin(), kDns.end(), p.get<std::string>()) == kDns.end()) {
    errs.push_back(notSupported(path + ".dnsPolicy", p, kDns));
  }
}

// ValidatePodUpdate: only the updatable fields may differ.
void validatePodUpdate(const json& next, const json& old, std::vector<FieldError>& errs) {
  const json& new_spec = field(next, "spec");
  const json& old_spec = field(old, "spec");
  for (const char* list : {"containers", "initContainers"}) {
    const json& n = field(new_spec, list);
    const json& o = field(old_spec, list);
    std::size_t nsize = n.is_array() ? n.size() : 0;
    std::size_t osize = o.is_array() ? o.size() : 0;
    if (nsize != osize) {
      errs.push_back(
          forbidden(std::string("spec.") + list, "pod updates may not add or remove containers"));
      return;
    }
    for (std::size_t i = 0; i < nsize; ++i) {
      std::string image = n[i].is_object() ? n[i].value("image", "") : "";
      if (image.empty()) {
        errs.push_back(requiredValue(index(std::string("spec.") + list, i) + ".image"));
      }
    }
  }
  const json& new_deadline = field(new_spec, "activeDeadlineSeconds");
  const json& old_deadline = field(old_spec, "activeDeadlineSeconds");
  if (new_deadline.is_number_integer()) {
    std::int64_t v = new_deadline.get<std::int64_t>();
    if (v < 0 || v > 2147483647) {
      errs.push_back(invalidValue("spec.activeDeadlineSeconds", new_deadline,
                                  "must be between 0 and 2147483647, inclusive"));
      return;
    }
    if (old_deadline.is_number_integer() && old_deadline.get<std::int64_t>() < v) {
      errs.push_back(invalidValue("spec.activeDeadlineSeconds", new_deadline,
                                  "must be less than or equal to previous value"));
      return;
    }
  } else if (old_deadline.is_number_integer()) {
    errs.push_back(invalidValue("spec.activeDeadlineSeconds", nullptr,
                                "must not update from a positive integer to nil value"));
  }
  // Tolerations: every old one must still be there (its tolerationSeconds may change).
  const json& new_tol = field(new_spec, "tolerations");
  for (const json& o :
       field(old_spec, "tolerations").is_array() ? field(old_spec, "tolerations") : json::array()) {
    bool found = false;
    for (const json& n : new_tol.is_array() ? new_tol : json::array()) {
      json a = o;
      json b = n;
      if (a.is_object()) a.erase("tolerationSeconds");
      if (b.is_object()) b.erase("tolerationSeconds");
      if (a == b) found = true;
    }
    if (!found) {
      errs.push_back(forbidden("spec.tolerations",
                               "existing toleration can not be modified except its "
                               "tolerationSeconds"));
      break;
    }
  }
  // The rest of the spec must be equal once the updatable fields are taken from the old spec.
  json munged = new_spec.is_object() ? new_spec : json::object();
  for (const char* list : {"containers", "initContainers"}) {
    if (!munged.contains(list) || !munged[list].is_array()) continue;
    for (std::size_t i = 0; i < munged[list].size(); ++i) {
      const json& oc = old_spec[list][i];
      if (oc.is_object() && oc.contains("image")) {
        munged[list][i]["image"] = oc["image"];
      } else if (munged[list][i].is_object()) {
        munged[list][i].erase("image");
      }
    }
  }
  for (const char* key : {"activeDeadlineSeconds", "tolerations", "schedulingGates"}) {
    if (old_spec.is_object() && old_spec.contains(key)) {
      munged[key] = old_spec[key];
    } else {
      munged.erase(key);
    }
  }
  const json& old_grace = field(old_spec, "terminationGracePeriodSeconds");
  if (old_grace.is_number_integer() && old_grace.get<std::int64_t>() < 0 &&
      field(munged, "terminationGracePeriodSeconds") == json(1)) {
    munged["terminationGracePeriodSeconds"] = old_grace;
  }
  json old_copy = old_spec.is_object() ? old_spec : json::object();
  if (munged != old_copy) {
    std::string diff = "\n  core.PodSpec{\n";
    std::set<std::string> keys;
    for (const auto& [k, v] : munged.items()) keys.insert(k);
    for (const auto& [k, v] : old_copy.items()) keys.insert(k);
    for (const std::string& k : keys) {
      json a = old_copy.value(k, json());
      json b = munged.value(k, json());
      if (a == b) continue;
      diff += "- \t" + k + ": " + a.dump() + ",\n+ \t" + k + ": " + b.dump() + ",\n";
    }
    diff += "  }\n";
    errs.push_back(forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
        "set to 1 if it was previously negative)" +
            diff));
  }
}

long validateKeys(const json& map, const std::string& path, bool bytes,
                  std::vector<FieldError>& errs) {
  long total = 0;
  if (!map.is_object()) return 0;
  for (const auto& [key, value] : map.items()) {
    for (const std::string& msg : configMapKey(key)) {
      errs.push_back(invalidValue(path + "[" + key + "]", key, msg));
    }
    if (!value.is_string()) continue;
    if (bytes) {
      std::string error;
      total +=
          static_cast<long>(decodeBase64(value.get<std::string>(), &error).value_or("").size());
    } else {
      total += static_cast<long>(value.get<std::string>().size());
    }
  }
  return total;
}

void validateConfigMap(const json& cm, std::vector<FieldError>& errs) {
  long total = validateKeys(field(cm, "data"), "data", false, errs);
  total += validateKeys(field(cm, "binaryData"), "binaryData", true, errs);
  const json& data = field(cm, "data");
  if (const json& bin = field(cm, "binaryData"); bin.is_object() && data.is_object()) {
    for (const auto& [key, value] : bin.items()) {
      if (data.contains(key)) {
        errs.push_back(
            invalidValue("binaryData[" + key + "]", key, "duplicate of key present in data"));
      }
    }
  }
  if (total > kMaxSecretSize) errs.push_back(tooLong("", kMaxSecretSize));
}

void validateSecret(const json& secret, std::vector<FieldError>& errs) {
  const json& data = field(secret, "data");
  long total = validateKeys(data, "data", true, errs);
  if (total > kMaxSecretSize) errs.push_back(tooLong("data", kMaxSecretSize));
  std::string type = field(secret, "type").is_string() ? secret["type"].get<std::string>() : "";
  auto has = [&](const char* key) { return data.is_object() && data.contains(key); };
  if (type == "kubernetes.io/tls") {
    if (!has("tls.crt")) errs.push_back(requiredValue("data[tls.crt]"));
    if (!has("tls.key")) errs.push_back(requiredValue("data[tls.key]"));
  } else if (type == "kubernetes.io/service-account-token") {
    const json& ann = field(field(secret, "metadata"), "annotations");
    if (!ann.is_object() || ann.value("kubernetes.io/service-account.name", "").empty()) {
      errs.push_back(requiredValue("metadata.annotations[kubernetes.io/service-account.name]"));
    }
  } else if (type == "kubernetes.io/basic-auth") {
    if (!has("username") && !has("password")) {
      errs.push_back(requiredValue("data[username]"));
      errs.push_back(requiredValue("data[password]"));
    }
  } else if (type == "kubernetes.io/ssh-auth") {
    if (!has("ssh-privatekey")) errs.push_back(requiredValue("data[ssh-privatekey]"));
  } else if (type == "kubernetes.io/dockerconfigjson") {
    if (!has(".dockerconfigjson")) errs.push_back(requiredValue("data[.dockerconfigjson]"));
  } else if (type == "kubernetes.io/dockercfg") {
    if (!has(".dockercfg")) errs.push_back(requiredValue("data[.dockercfg]"));
  }
}

// `immutable: true` on the old object: data (and binaryData) and the flag itself stay.
void validateImmutable(const json& next, const json& old, bool config_map,
                       std::vector<FieldError>& errs) {
  if (field(old, "immutable") != json(true)) return;
  const std::string msg = "field is immutable when `immutable` is set";
  if (field(next, "immutable") != json(true)) errs.push_back(forbidden("immutable", msg));
  if (field(next, "data") != field(old, "data")) errs.push_back(forbidden("data", msg));
  if (config_map && field(next, "binaryData") != field(old, "binaryData")) {
    errs.push_back(forbidden("binaryData", msg));
  }
}

void validateService(const json& svc, std::vector<FieldError>& errs) {
  const json& spec = field(svc, "spec");
  std::string type = field(spec, "type").is_string() ? spec["type"].get<std::string>() : "";
  static const std::vector<std::string> kTypes = {"ClusterIP", "ExternalName", "LoadBalancer",
                                                  "NodePort"};
  if (std::find(kTypes.begin(), kTypes.end(), type) == kTypes.end()) {
    errs.push_back(notSupported("spec.type", type, kTypes));
  }
  const json& ports = field(spec, "ports");
  bool headless = field(spec, "clusterIP") == json("None");
  if ((!ports.is_array() || ports.empty()) && !headless && type != "ExternalName") {
    errs.push_back(requiredValue("spec.ports"));
  }
  if (ports.is_array()) {
    for (std::size_t i = 0; i < ports.size(); ++i) {
      const json& p = ports[i];
      const json& port = field(p, "port");
      if (!port.is_number_integer() || port.get<std::int64_t>() < 1 ||
          port.get<std::int64_t>() > 65535) {
        errs.push_back(invalidValue(index("spec.ports", i) + ".port",
                                    port.is_null() ? json(0) : port,
                                    "must be between 1 and 65535, inclusive"));
      }
      if (ports.size() > 1 && field(p, "name").is_null()) {
        errs.push_back(requiredValue(index("spec.ports", i) + ".name"));
      }
    }
  }
}

void validateDeployment(const json& d, std::vector<FieldError>& errs) {
  const json& spec = field(d, "spec");
  const json& selector = field(spec, "selector");
  if (!selector.is_object() || selector.empty()) {
    errs.push_back(requiredValue("spec.selector"));
  } else {
    const json& labels = field(field(field(spec, "template"), "metadata"), "labels");
    const json& match = field(selector, "matchLabels");
    bool matches = match.is_object() || field(selector, "matchExpressions").is_array();
    if (match.is_object()) {
      for (const auto& [k, v] : match.items()) {
        if (!labels.is_object() || field(labels, k.c_str()) != v) matches = false;
      }
    }
    if (!matches) {
      errs.push_back(invalidValue("spec.template.metadata.labels",
                                  labels.is_object() ? labels : json::object(),
                                  "`selector` does not match template `labels`"));
    }
  }
  const json& replicas = field(spec, "replicas");
  if (replicas.is_number_integer() && replicas.get<std::int64_t>() < 0) {
    errs.push_back(invalidValue("spec.replicas", replicas, "must be greater than or equal to 0"));
  }
  // ValidateDeploymentStrategy (the type is defaulted before validation).
  const json& strategy = field(spec, "strategy");
  if (field(strategy, "type") == "Recreate" && field(strategy, "rollingUpdate").is_object()) {
    errs.push_back(forbidden("spec.strategy.rollingUpdate",
                             "may not be specified when strategy `type` is 'Recreate'"));
  }
  validatePodSpec(field(field(spec, "template"), "spec"), "spec.template.spec", false, errs);
}

// validateNodeTaints: each taint's key a qualified name, its value a label value, its effect one
// kube-apiserver knows (required). (Duplicate key/effect pairs are not checked here.)
void validateNodeTaints(const json& node, std::vector<FieldError>& errs) {
  const json& taints = field(field(node, "spec"), "taints");
  if (!taints.is_array()) return;
  static const std::vector<std::string> kEffects = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  for (std::size_t i = 0; i < taints.size(); ++i) {
    const std::string path = index("spec.taints", i);
    const json& key = field(taints[i], "key");
    const std::string k = key.is_string() ? key.get<std::string>() : "";
    for (const std::string& msg : qualifiedName(k)) {
      errs.push_back(invalidValue(path + ".key", k, msg));
    }
    const json& value = field(taints[i], "value");
    if (value.is_string()) {
      std::string joined_errors;
      for (const std::string& msg : labelValue(value.get<std::string>())) {
        joined_errors += (joined_errors.empty() ? "" : ";") + msg;
      }
      if (!joined_errors.empty())
        errs.push_back(invalidValue(path + ".value", value, joined_errors));
    }
    const json& effect = field(taints[i], "effect");
    const std::string e = effect.is_string() ? effect.get<std::string>() : "";
    if (e.empty()) {
      errs.push_back(requiredValue(path + ".effect"));
    } else if (std::find(kEffects.begin(), kEffects.end(), e) == kEffects.end()) {
      errs.push_back(notSupported(path + ".effect", e, kEffects));
    }
  }
}

// ValidateLeaseSpec: a duration, when set, above 0; the transitions, when set, not negative.
void validateLeaseSpec(const json& lease, std::vector<FieldError>& errs) {
  const json& spec = field(lease, "spec");
  const json& duration = field(spec, "leaseDurationSeconds");
  if (duration.is_number_integer() && duration.get<std::int64_t>() <= 0) {
    errs.push_back(invalidValue("spec.leaseDurationSeconds", duration, "must be greater than 0"));
  }
  const json& transitions = field(spec, "leaseTransitions");
  if (transitions.is_number_integer() && transitions.get<std::int64_t>() < 0) {
    errs.push_back(
        invalidValue("spec.leaseTransitions", transitions, "must be greater than or equal to 0"));
  }
}

bool isLease(const ResourceInfo& r) {
  return r.group == "coordination.k8s.io" && r.plural == "leases";
}

bool isWorkload(const ResourceInfo& r) {
  return r.group == "apps" && (r.plural == "deployments" || r.plural == "replicasets" ||
                               r.plural == "statefulsets" || r.plural == "daemonsets");
}

}  // namespace

std::vector<FieldError> kindCreateErrors(const ResourceInfo& r, const json& object) {
  std::vector<FieldError> errs;
  if (isCore(r, "pods")) {
    validatePodSpec(field(object, "spec"), "spec", true, errs);
  } else if (isCore(r, "configmaps")) {
    validateConfigMap(object, errs);
  } else if (isCore(r, "secrets")) {
    validateSecret(object, errs);
  } else if (isCore(r, "services")) {
    validateService(object, errs);
  } else if (isWorkload(r)) {
    validateDeployment(object, errs);
  } else if (isCore(r, "nodes")) {
    validateNodeTaints(object, errs);
  } else if (isLease(r)) {
    validateLeaseSpec(object, errs);
  }
  return errs;
}

std::vector<FieldError> kindUpdateErrors(const ResourceInfo& r, const json& next, const json& old) {
  std::vector<FieldError> errs;
  if (isCore(r, "pods")) {
    validatePodUpdate(next, old, errs);
  } else if (isCore(r, "configmaps")) {
    validateImmutable(next, old, true, errs);
    validateConfigMap(next, errs);
  } else if (isCore(r, "secrets")) {
    if (field(next, "type") != field(old, "type")) {
      errs.push_back(invalidValue("type", field(next, "type"), "field is immutable"));
    }
    validateImmutable(next, old, false, errs);
    validateSecret(next, errs);
  } else if (isCore(r, "services")) {
    validateService(next, errs);
  } else if (isWorkload(r)) {
    validateDeployment(next, errs);
  } else if (isCore(r, "nodes")) {
    validateNodeTaints(next, errs);
  } else if (isLease(r)) {
    validateLeaseSpec(next, errs);
  }
  return errs;
}

}  // namespace ekco::kubesim
