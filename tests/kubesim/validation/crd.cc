#include "tests/kubesim/validation/crd.h"

#include <memory>

#include "tests/kubesim/validation/schema.h"

namespace ekco::kubesim::crd {
namespace {

using nlohmann::json;

const json kKeepFields = {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}};

json definition(const std::string& group, const std::string& kind, const std::string& plural,
                std::vector<std::string> short_names, json columns, json subresources) {
  std::string singular = kind;
  for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  json schema = {{"type", "object"},
                 {"properties", {{"spec", kKeepFields}, {"status", kKeepFields}}}};
  json version = {{"name", "v1"},
                  {"served", true},
                  {"storage", true},
                  {"schema", {{"openAPIV3Schema", schema}}},
                  {"subresources", std::move(subresources)}};
  if (!columns.empty()) version["additionalPrinterColumns"] = std::move(columns);
  json names = {
      {"plural", plural}, {"singular", singular}, {"kind", kind}, {"listKind", kind + "List"}};
  if (!short_names.empty()) names["shortNames"] = short_names;
  return {{"apiVersion", "apiextensions.k8s.io/v1"},
          {"kind", "CustomResourceDefinition"},
          {"metadata", {{"name", plural + "." + group}}},
          {"spec",
           {{"group", group}, {"names", names}, {"scope", "Namespaced"}, {"versions", {version}}}}};
}

json column(const char* name, const char* type, const char* path, int priority = 0,
            const char* description = nullptr) {
  json c = {{"name", name}, {"type", type}, {"jsonPath", path}};
  if (priority != 0) c["priority"] = priority;
  if (description != nullptr) c["description"] = description;
  return c;
}

// A field.Error for the CRD's own validation.
schema::FieldError required(const std::string& field, const std::string& detail = "") {
  return {"FieldValueRequired", field, "Required value" + (detail.empty() ? "" : ": " + detail)};
}

std::string quoted(const std::string& s) { return json(s).dump(); }

Reply invalid(const std::string& qualified_kind, const std::string& group, const std::string& kind,
              const std::string& name, const std::vector<schema::FieldError>& errors) {
  json causes = json::array();
  for (const schema::FieldError& e : errors) {
    causes.push_back({{"reason", e.reason}, {"message", e.body}, {"field", e.field}});
  }
  json details = {{"name", name}, {"kind", kind}, {"causes", causes}};
  if (!group.empty()) details["group"] = group;
  return Reply{.code = 422,
               .body = {{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"metadata", json::object()},
                        {"status", "Failure"},
                        {"message", qualified_kind + " " + quoted(name) +
                                        " is invalid: " + schema::aggregate(errors)},
                        {"reason", "Invalid"},
                        {"details", details},
                        {"code", 422}}};
}

// One step of a JSONPath: a field name, an index, every item, or a filter @.key==value.
void step(const json& node, std::string_view rest, std::vector<json>& out) {
  if (rest.empty()) {
    out.push_back(node);
    return;
  }
  if (rest[0] == '.') {
    rest.remove_prefix(1);
    std::size_t end = rest.find_first_of(".[");
    std::string name(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
    if (name.empty()) return step(node, rest, out);
    if (node.is_object() && node.contains(name)) step(node[name], rest, out);
    return;
  }
  if (rest[0] == '[') {
    std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return;
    std::string inside(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!node.is_array()) return;
    if (inside == "*") {
      for (const json& item : node) step(item, rest, out);
    } else if (inside.rfind("?(@.", 0) == 0 && inside.back() == ')') {
      std::string expr = inside.substr(4, inside.size() - 5);
      std::size_t eq = expr.find("==");
      if (eq == std::string::npos) return;
      std::string key = expr.substr(0, eq);
      std::string want = expr.substr(eq + 2);
      if (want.size() >= 2 && (want.front() == '"' || want.front() == '\'')) {
        want = want.substr(1, want.size() - 2);
      }
      for (const json& item : node) {
        if (!item.is_object() || !item.contains(key)) continue;
        const json& v = item[key];
        if ((v.is_string() && v.get<std::string>() == want) ||
            (!v.is_string() && v.dump() == want)) {
          step(item, rest, out);
        }
      }
    } else {
      try {
        long index = std::stol(inside);
        if (index < 0) index += static_cast<long>(node.size());
        if (index >= 0 && static_cast<std::size_t>(index) < node.size())
          step(node[index], rest, out);
      } catch (const std::exception&) {
      }
    }
  }
}

}  // namespace

bool isDefinitionResource(const ResourceInfo& r) {
  return r.group == "apiextensions.k8s.io" && r.plural == "customresourcedefinitions";
}

std::vector<json> preloadedDefinitions() {
  const json status = {{"status", json::object()}};
  const json scale = {{"status", json::object()},
                      {"scale",
                       {{"specReplicasPath", ".spec.replicas"},
                        {"statusReplicasPath", ".status.replicas"},
                        {"labelSelectorPath", ".status.selector"}}}};
  return {
      definition("ceph.rook.io", "CephCluster", "cephclusters", {},
                 {column("DataDirHostPath", "string", ".spec.dataDirHostPath", 0,
                         "Directory used on the K8s nodes"),
                  column("MonCount", "string", ".spec.mon.count", 0, "Number of MONs"),
                  column("Age", "date", ".metadata.creationTimestamp"),
                  column("Phase", "string", ".status.phase", 0, "Phase"),
                  column("Message", "string", ".status.message", 0, "Message"),
                  column("Health", "string", ".status.ceph.health", 0, "Ceph Health"),
                  column("External", "boolean", ".spec.external.enable"),
                  column("FSID", "string", ".status.ceph.fsid", 0, "Ceph FSID")},
                 status),
      definition("ceph.rook.io", "CephBlockPool", "cephblockpools", {"cephbp"},
                 {column("Phase", "string", ".status.phase"),
                  column("Type", "string", ".status.info.type"),
                  column("Failure Domain", "string", ".status.info.failureDomain"),
                  column("Age", "date", ".metadata.creationTimestamp")},
                 status),
      definition("ceph.rook.io", "CephFilesystem", "cephfilesystems", {"cephfs"},
                 {column("ActiveMDS", "string", ".spec.metadataServer.activeCount", 0,
                         "Number of desired active MDS daemons"),
                  column("Age", "date", ".metadata.creationTimestamp"),
                  column("Phase", "string", ".status.phase")},
                 status),
      definition("ceph.rook.io", "CephObjectStore", "cephobjectstores", {"cephos"},
                 {column("Phase", "string", ".status.phase"),
                  column("Endpoint", "string", ".status.info.endpoint"),
                  column("SecureEndpoint", "string", ".status.info.secureEndpoint"),
                  column("Age", "date", ".metadata.creationTimestamp")},
                 status),
      definition(
          "monitoring.coreos.com", "Prometheus", "prometheuses", {"prom"},
          {column("Version", "string", ".spec.version", 0, "The version of Prometheus"),
           column("Desired", "integer", ".spec.replicas", 0, "The number of desired replicas"),
           column("Ready", "integer", ".status.availableReplicas", 0,
                  "The number of ready replicas"),
           column("Reconciled", "string", ".status.conditions[?(@.type == 'Reconciled')].status"),
           column("Available", "string", ".status.conditions[?(@.type == 'Available')].status"),
           column("Age", "date", ".metadata.creationTimestamp"),
           column("Paused", "boolean", ".status.paused", 1,
                  "Whether the resource reconciliation is paused or not")},
          scale),
      definition(
          "monitoring.coreos.com", "Alertmanager", "alertmanagers", {"am"},
          {column("Version", "string", ".spec.version", 0, "The version of Alertmanager"),
           column("Replicas", "integer", ".spec.replicas", 0, "The number of desired replicas"),
           column("Ready", "integer", ".status.availableReplicas", 0,
                  "The number of ready replicas"),
           column("Reconciled", "string", ".status.conditions[?(@.type == 'Reconciled')].status"),
           column("Available", "string", ".status.conditions[?(@.type == 'Available')].status"),
           column("Age", "date", ".metadata.creationTimestamp"),
           column("Paused", "boolean", ".status.paused", 1,
                  "Whether the resource reconciliation is paused or not")},
          scale),
      // No printer columns and no subresources, as prometheus-operator ships it.
      definition("monitoring.coreos.com", "PrometheusRule", "prometheusrules", {"promrule"},
                 json::array(), json::object()),
      definition("monitoring.coreos.com", "PodMonitor", "podmonitors", {"pmon"}, json::array(),
                 json::object()),
  };
}

std::optional<Reply> validateDefinition(const json& crd) {
  std::vector<schema::FieldError> errors;
  const std::string name = crd.value("metadata", json::object()).value("name", "");
  const json& spec = crd.value("spec", json::object());
  const std::string group = spec.is_object() ? spec.value("group", "") : "";
  const json& names = spec.is_object() ? spec.value("names", json::object()) : json::object();
  const std::string plural = names.is_object() ? names.value("plural", "") : "";
  if (!plural.empty() && !group.empty() && name != plural + "." + group) {
    errors.push_back(
        {"FieldValueInvalid", "metadata.name",
         "Invalid value: " + quoted(name) + ": must be spec.names.plural+\".\"+spec.group"});
  }
  if (group.empty()) {
    errors.push_back(required("spec.group"));
  } else if (group.find('.') == std::string::npos) {
    errors.push_back(
        {"FieldValueInvalid", "spec.group",
         "Invalid value: " + quoted(group) + ": should be a domain with at least one dot"});
  }
  if (plural.empty()) errors.push_back(required("spec.names.plural"));
  if (!names.is_object() || names.value("kind", "").empty()) {
    errors.push_back(required("spec.names.kind"));
  }
  const std::string scope = spec.is_object() ? spec.value("scope", "") : "";
  if (scope.empty()) {
    errors.push_back(required("spec.scope"));
  } else if (scope != "Namespaced" && scope != "Cluster") {
    errors.push_back({"FieldValueNotSupported", "spec.scope",
                      "Unsupported value: " + quoted(scope) +
                          ": supported values: \"Cluster\", \"Namespaced\""});
  }
  const json& versions = spec.is_object() ? spec.value("versions", json::array()) : json::array();
  if (!versions.is_array() || versions.empty()) {
    errors.push_back(
        required("spec.versions", "must have exactly one version marked as storage version"));
  } else {
    int storage = 0;
    for (std::size_t i = 0; i < versions.size(); ++i) {
      const json& v = versions[i];
      const std::string path = "spec.versions[" + std::to_string(i) + "]";
      if (!v.is_object() || v.value("name", "").empty()) errors.push_back(required(path + ".name"));
      if (v.is_object() && v.value("storage", false)) ++storage;
      if (!v.is_object() || !v.value("schema", json::object()).is_object() ||
          !v.value("schema", json::object()).contains("openAPIV3Schema")) {
        errors.push_back(required(path + ".schema.openAPIV3Schema", "schemas are required"));
      }
    }
    if (storage != 1) {
      errors.push_back({"FieldValueInvalid", "spec.versions",
                        "Invalid value: " + versions.dump() +
                            ": must have exactly one version marked as storage version"});
    }
  }
  if (errors.empty()) return std::nullopt;
  return invalid("CustomResourceDefinition.apiextensions.k8s.io", "apiextensions.k8s.io",
                 "CustomResourceDefinition", name, errors);
}

std::vector<ResourceInfo> servedResources(const json& crd) {
  std::vector<ResourceInfo> out;
  const json& spec = crd.value("spec", json::object());
  const json& names = spec.value("names", json::object());
  std::vector<std::string> shorts;
  for (const json& s : names.value("shortNames", json::array())) {
    if (s.is_string()) shorts.push_back(s.get<std::string>());
  }
  std::string singular = names.value("singular", "");
  if (singular.empty()) {
    singular = names.value("kind", "");
    for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const json& v : spec.value("versions", json::array())) {
    if (!v.is_object() || !v.value("served", true) || v.value("name", "").empty()) continue;
    std::vector<std::string> subs;
    const json& declared = v.value("subresources", json::object());
    if (declared.is_object() && declared.contains("status")) subs.push_back("status");
    if (declared.is_object() && declared.contains("scale")) subs.push_back("scale");
    out.push_back(ResourceInfo{.group = spec.value("group", ""),
                               .version = v["name"].get<std::string>(),
                               .plural = names.value("plural", ""),
                               .singular = singular,
                               .kind = names.value("kind", ""),
                               .namespaced = spec.value("scope", "Namespaced") == "Namespaced",
                               .short_names = shorts,
                               .subresources = subs,
                               .verbs = {},
                               .crd_version = std::make_shared<const json>(v)});
  }
  return out;
}

void setStatus(json& crd, const json& old, const std::string& now) {
  const json& spec = crd.value("spec", json::object());
  json status = crd.value("status", json::object());
  if (!status.is_object()) status = json::object();
  auto since = [&](const char* type) {
    if (old.is_object()) {
      for (const json& c : old.value("status", json::object()).value("conditions", json::array())) {
        if (c.value("type", "") == type && c.value("status", "") == "True") {
          return c.value("lastTransitionTime", now);
        }
      }
    }
    return now;
  };
  status["conditions"] = {{{"type", "NamesAccepted"},
                           {"status", "True"},
                           {"lastTransitionTime", since("NamesAccepted")},
                           {"reason", "NoConflicts"},
                           {"message", "no conflicts found"}},
                          {{"type", "Established"},
                           {"status", "True"},
                           {"lastTransitionTime", since("Established")},
                           {"reason", "InitialNamesAccepted"},
                           {"message", "the initial names have been accepted"}}};
  json accepted = spec.value("names", json::object());
  if (accepted.is_object() && !accepted.contains("singular") && accepted.contains("kind")) {
    std::string singular = accepted["kind"];
    for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    accepted["singular"] = singular;
  }
  if (accepted.is_object() && !accepted.contains("listKind") && accepted.contains("kind")) {
    accepted["listKind"] = accepted["kind"].get<std::string>() + "List";
  }
  status["acceptedNames"] = accepted;
  json stored = status.value("storedVersions", json::array());
  for (const json& v : spec.value("versions", json::array())) {
    if (v.is_object() && v.value("storage", false) && v.contains("name") &&
        std::find(stored.begin(), stored.end(), v["name"]) == stored.end()) {
      stored.push_back(v["name"]);
    }
  }
  status["storedVersions"] = stored;
  crd["status"] = status;
}

std::optional<Reply> admit(const ResourceInfo& r, json& object) {
  if (!r.crd_version) return std::nullopt;
  const json& version_schema =
      r.crd_version->value("schema", json::object()).value("openAPIV3Schema", json::object());
  schema::prune(version_schema, object);
  schema::applyDefaults(version_schema, object);
  auto errors = schema::validate(version_schema, object);
  if (errors.empty()) return std::nullopt;
  const std::string name = object.value("metadata", json::object()).value("name", "");
  return invalid(r.kind + "." + r.group, r.group, r.kind, name, errors);
}

std::optional<ScalePaths> scalePaths(const ResourceInfo& r) {
  if (!r.crd_version) return std::nullopt;
  const json& scale = r.crd_version->value("subresources", json::object()).value("scale", json());
  if (!scale.is_object()) return std::nullopt;
  return ScalePaths{.spec_replicas = scale.value("specReplicasPath", ".spec.replicas"),
                    .status_replicas = scale.value("statusReplicasPath", ".status.replicas"),
                    .label_selector = scale.value("labelSelectorPath", "")};
}

std::vector<json> jsonPath(const json& object, std::string_view path) {
  std::vector<json> out;
  // Filters may be written with spaces around "==" (`@.type == 'Ready'`).
  std::string compact;
  for (char c : path) {
    if (c != ' ') compact += c;
  }
  if (compact.size() >= 2 && compact.front() == '{' && compact.back() == '}') {
    compact = compact.substr(1, compact.size() - 2);
  }
  step(object, compact, out);
  return out;
}

void setAtPath(json& object, std::string_view path, json value) {
  json* node = &object;
  while (!path.empty()) {
    if (path[0] == '.') path.remove_prefix(1);
    std::size_t end = path.find('.');
    std::string name(path.substr(0, end));
    path = end == std::string_view::npos ? std::string_view() : path.substr(end);
    if (!node->is_object()) *node = json::object();
    node = &(*node)[name];
  }
  *node = std::move(value);
}

}  // namespace ekco::kubesim::crd
