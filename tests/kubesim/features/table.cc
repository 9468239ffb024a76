#include "tests/kubesim/features/table.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <functional>
#include <map>
#include <set>

#include "tests/kubesim/validation/api_time.h"
#include "tests/kubesim/validation/crd.h"

namespace ekco::kubesim::table {
namespace {

using nlohmann::json;
using Clock = std::chrono::system_clock;

const char* const kNameDoc =
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const char* const kAgeDoc =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

const char* const kSignerNameDoc =
    "signerName indicates the requested signer, and is a qualified name.";
const char* const kExpirationDoc =
    "expirationSeconds is the requested duration of validity of the issued certificate.";

// extractCSRStatus: Denied before Approved before Pending, then ",Failed" and ",Issued".
std::string csrCondition(const nlohmann::json& csr);

json col(const char* name, const char* type, const char* description, int priority = 0,
         const char* format = "") {
  return {{"name", name},
          {"type", type},
          {"format", format},
          {"description", description},
          {"priority", priority}};
}

json nameColumn() { return col("Name", "string", kNameDoc, 0, "name"); }
json ageColumn() { return col("Age", "string", kAgeDoc); }

const json& field(const json& obj, std::initializer_list<const char*> path) {
  static const json kNull;
  const json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object() || !cur->contains(p)) return kNull;
    cur = &(*cur)[p];
  }
  return *cur;
}

std::string text(const json& obj, std::initializer_list<const char*> path) {
  const json& v = field(obj, path);
  return v.is_string() ? v.get<std::string>() : std::string();
}

std::int64_t number(const json& obj, std::initializer_list<const char*> path,
                    std::int64_t fallback = 0) {
  const json& v = field(obj, path);
  return v.is_number_integer() ? v.get<std::int64_t>() : fallback;
}

std::size_t count(const json& obj, const char* key) {
  const json& v = field(obj, {key});
  return v.is_object() || v.is_array() ? v.size() : 0;
}

std::optional<Clock::time_point> parseTime(const std::string& t) { return parseApiTime(t); }

// translateTimestampSince: "<unknown>" for no time.
std::string since(const std::string& timestamp, Clock::time_point now) {
  auto t = parseTime(timestamp);
  if (!t) return "<unknown>";
  return humanDuration(std::chrono::duration_cast<std::chrono::seconds>(now - *t));
}

const json& array(const json& obj, std::initializer_list<const char*> path) {
  static const json kEmpty = json::array();
  const json& v = field(obj, path);
  return v.is_array() ? v : kEmpty;
}

json podRow(const json& pod, Clock::time_point now) {
  std::size_t total = array(pod, {"spec", "containers"}).size();
  std::size_t ready = 0;
  std::int64_t restarts = 0;
  std::string last_restart;
  auto note_restart = [&](const json& status) {
    std::string finished = text(status, {"lastState", "terminated", "finishedAt"});
    if (!finished.empty() &&
        (last_restart.empty() || parseTime(finished) > parseTime(last_restart))) {
      last_restart = finished;
    }
  };
  for (const json& c : array(pod, {"status", "containerStatuses"})) {
    restarts += number(c, {"restartCount"});
    note_restart(c);
    if (c.value("ready", false) && field(c, {"state", "running"}).is_object()) ++ready;
  }
  std::string restarts_text = std::to_string(restarts);
  if (restarts != 0 && !last_restart.empty()) {
    restarts_text += " (" + since(last_restart, now) + " ago)";
  }
  std::string ip = text(pod, {"status", "podIP"});
  if (const json& ips = array(pod, {"status", "podIPs"}); !ips.empty()) ip = text(ips[0], {"ip"});
  std::string node = text(pod, {"spec", "nodeName"});
  std::string nominated = text(pod, {"status", "nominatedNodeName"});
  std::string gates = "<none>";
  if (const json& readiness = array(pod, {"spec", "readinessGates"}); !readiness.empty()) {
    std::size_t true_conditions = 0;
    for (const json& g : readiness) {
      for (const json& c : array(pod, {"status", "conditions"})) {
        if (c.value("type", "") == g.value("conditionType", "")) {
          true_conditions += c.value("status", "") == "True";
          break;
        }
      }
    }
    gates = std::to_string(true_conditions) + "/" + std::to_string(readiness.size());
  }
  return json::array({text(pod, {"metadata", "name"}),
                      std::to_string(ready) + "/" + std::to_string(total), podStatus(pod),
                      restarts_text, since(text(pod, {"metadata", "creationTimestamp"}), now),
                      ip.empty() ? "<none>" : ip, node.empty() ? "<none>" : node,
                      nominated.empty() ? "<none>" : nominated, gates});
}

json nodeRow(const json& node, Clock::time_point now) {
  std::vector<std::string> status;
  for (const json& c : array(node, {"status", "conditions"})) {
    if (c.value("type", "") == "Ready") {
      status.push_back(c.value("status", "") == "True" ? "Ready" : "NotReady");
    }
  }
  if (status.empty()) status.push_back("Unknown");
  if (field(node, {"spec", "unschedulable"}) == json(true)) status.push_back("SchedulingDisabled");
  std::set<std::string> roles;
  const json& labels = field(node, {"metadata", "labels"});
  if (labels.is_object()) {
    for (auto& [key, value] : labels.items()) {
      static const std::string kPrefix = "node-role.kubernetes.io/";
      if (key.rfind(kPrefix, 0) == 0 && key.size() > kPrefix.size()) {
        roles.insert(key.substr(kPrefix.size()));
      } else if (key == "kubernetes.io/role" && value.is_string() && !value.empty()) {
        roles.insert(value.get<std::string>());
      }
    }
  }
  auto join = [](const auto& items) {
    std::string out;
    for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
    return out;
  };
  auto address = [&](const char* type) {
    for (const json& a : array(node, {"status", "addresses"})) {
      if (a.value("type", "") == type) return a.value("address", "");
    }
    return std::string("<none>");
  };
  auto info = [&](const char* key) {
    std::string v = text(node, {"status", "nodeInfo", key});
    return v.empty() ? std::string("<unknown>") : v;
  };
  return json::array({text(node, {"metadata", "name"}), join(status),
                      roles.empty() ? "<none>" : join(roles),
                      since(text(node, {"metadata", "creationTimestamp"}), now),
                      text(node, {"status", "nodeInfo", "kubeletVersion"}), address("InternalIP"),
                      address("ExternalIP"), info("osImage"), info("kernelVersion"),
                      info("containerRuntimeVersion")});
}

json deploymentRow(const json& d, Clock::time_point now) {
  std::string containers;
  std::string images;
  for (const json& c : array(d, {"spec", "template", "spec", "containers"})) {
    containers += (containers.empty() ? "" : ",") + c.value("name", "");
    images += (images.empty() ? "" : ",") + c.value("image", "");
  }
  // metav1.LabelSelectorAsSelector(...).String(): matchLabels as k=v, sorted by key.
  std::string selector;
  const json& match = field(d, {"spec", "selector", "matchLabels"});
  if (match.is_object()) {
    for (auto& [key, value] : match.items()) {
      selector += (selector.empty() ? "" : ",") + key + "=" +
                  (value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  return json::array(
      {text(d, {"metadata", "name"}),
       std::to_string(number(d, {"status", "readyReplicas"})) + "/" +
           std::to_string(number(d, {"spec", "replicas"}, 1)),
       number(d, {"status", "updatedReplicas"}), number(d, {"status", "availableReplicas"}),
       since(text(d, {"metadata", "creationTimestamp"}), now), containers, images, selector});
}

// printEvent (server-side printing always fills the wide cells; kubectl hides priority 1).
json eventRow(const json& e, Clock::time_point now) {
  std::string first = since(text(e, {"firstTimestamp"}), now);
  if (text(e, {"firstTimestamp"}).empty()) first = since(text(e, {"eventTime"}), now);
  std::string last =
      text(e, {"lastTimestamp"}).empty() ? first : since(text(e, {"lastTimestamp"}), now);
  std::int64_t n = number(e, {"count"}, 0);
  if (field(e, {"series"}).is_object()) {
    last = since(text(e, {"series", "lastObservedTime"}), now);
    n = number(e, {"series", "count"}, 0);
  } else if (n == 0) {
    n = 1;  // singleton events of the new API have no count
  }
  std::string kind = text(e, {"involvedObject", "kind"});
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const std::string object_name = text(e, {"involvedObject", "name"});
  const std::string target = object_name.empty() ? kind : kind + "/" + object_name;
  std::string component = text(e, {"source", "component"});
  if (component.empty()) component = text(e, {"reportingComponent"});
  std::string instance = text(e, {"source", "host"});
  if (instance.empty()) instance = text(e, {"reportingInstance"});
  std::string source = instance.empty() ? component : component + ", " + instance;
  std::string message = text(e, {"message"});
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
    message.pop_back();
  }
  while (!message.empty() && std::isspace(static_cast<unsigned char>(message.front()))) {
    message.erase(0, 1);
  }
  return json::array({last, text(e, {"type"}), text(e, {"reason"}), target,
                      text(e, {"involvedObject", "fieldPath"}), source, message, first, n,
                      text(e, {"metadata", "name"})});
}

json eventColumns() {
  return json::array(
      {col("Last Seen", "string",
           "The time at which the most recent occurrence of this event "
           "was recorded."),
       col("Type", "string",
           "Type of this event (Normal, Warning), new types could be added in "
           "the future"),
       col("Reason", "string",
           "This should be a short, machine understandable string that "
           "gives the reason for the transition into the object's current "
           "status."),
       col("Object", "string", "The object that this event is about."),
       col("Subobject", "string",
           "If referring to a piece of an object instead of an entire "
           "object, this string should contain a valid JSON/Go "
           "field access statement, such as "
           "desiredState.manifest.containers[2].",
           1),
       col("Source", "string",
           "The component reporting this event. Should be a short machine "
           "understandable string.",
           1),
       col("Message", "string", "A human-readable description of the status of this operation."),
       col("First Seen", "string",
           "The time at which the event was first recorded. (Time of "
           "server receipt is in TypeMeta.)",
           1),
       col("Count", "string", "The number of times this event has occurred.", 1),
       col("Name", "string", kNameDoc, 1, "name")});
}

// A custom resource's column cell, as apiextensions' tableconvertor: string columns print what
// the JSONPath selects; typed columns keep a value of that type (null otherwise); dates become
// ages.
json customCell(const json& column, const json& object, Clock::time_point now) {
  auto found = crd::jsonPath(object, column.value("jsonPath", ""));
  if (found.empty()) return nullptr;
  const std::string type = column.value("type", "string");
  if (type == "string") {
    std::string out;
    for (const json& v : found) {
      out += (out.empty() ? "" : " ") + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    return out;
  }
  const json& v = found[0];
  if (type == "integer" && v.is_number()) return v.get<std::int64_t>();
  if (type == "number" && v.is_number()) return v.get<double>();
  if (type == "boolean" && v.is_boolean()) return v;
  if (type == "date" && v.is_string()) {
    return parseTime(v.get<std::string>()) ? since(v.get<std::string>(), now) : "<invalid>";
  }
  return nullptr;
}

json customColumns(const ResourceInfo& r) {
  json columns = json::array({nameColumn()});
  json declared = r.crd_version->value("additionalPrinterColumns", json::array());
  if (declared.empty()) {
    declared = json::array({{{"name", "Age"},
                             {"type", "date"},
                             {"jsonPath", ".metadata.creationTimestamp"},
                             {"description", kAgeDoc}}});
  }
  for (const json& c : declared) {
    columns.push_back({{"name", c.value("name", "")},
                       {"type", c.value("type", "string")},
                       {"format", c.value("format", "")},
                       {"description", c.value("description", "")},
                       {"priority", c.value("priority", 0)}});
  }
  return columns;
}

}  // namespace

std::optional<std::string> wantsTable(std::string_view accept) {
  if (accept.empty()) return "";
  while (!accept.empty()) {
    std::size_t comma = accept.find(',');
    std::string item(accept.substr(0, comma));
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    // "application/json;as=Table;v=v1;g=meta.k8s.io" → type and parameters, lower case.
    std::map<std::string, std::string> params;
    std::string type;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= item.size(); ++i) {
      if (i < item.size() && item[i] != ';') continue;
      std::string part;
      for (char c : item.substr(start, i - start)) {
        if (c != ' ') part += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      if (start == 0) {
        type = part;
      } else if (auto eq = part.find('='); eq != std::string::npos) {
        params[part.substr(0, eq)] = part.substr(eq + 1);
      }
      start = i + 1;
    }
    if (params.count("as") != 0) {
      if (type == "application/json" && params["as"] == "table" &&
          (params["v"] == "v1" || params["v"] == "v1beta1") && params["g"] == "meta.k8s.io") {
        return params["v"];
      }
      continue;  // v1beta1 tables, PartialObjectMetadata, other encodings: not served
    }
    if (type == "application/json" || type == "*/*" || type == "application/*" ||
        type == "application/vnd.kubernetes.protobuf" || type == "application/yaml") {
      return "";
    }
  }
  return std::nullopt;
}

std::string humanDuration(std::chrono::seconds d) {
  const std::int64_t seconds = d.count();
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 60 * 2) return std::to_string(seconds) + "s";
  const std::int64_t minutes = seconds / 60;
  if (minutes < 10) {
    const std::int64_t s = seconds % 60;
    return std::to_string(minutes) + "m" + (s == 0 ? "" : std::to_string(s) + "s");
  }
  if (minutes < 60 * 3) return std::to_string(minutes) + "m";
  const std::int64_t hours = minutes / 60;
  if (hours < 8) {
    const std::int64_t m = minutes % 60;
    return std::to_string(hours) + "h" + (m == 0 ? "" : std::to_string(m) + "m");
  }
  if (hours < 48) return std::to_string(hours) + "h";
  if (hours < 24 * 8) {
    const std::int64_t h = hours % 24;
    return std::to_string(hours / 24) + "d" + (h == 0 ? "" : std::to_string(h) + "h");
  }
  if (hours < 24 * 365 * 2) return std::to_string(hours / 24) + "d";
  if (hours < 24 * 365 * 8) {
    const std::int64_t dy = (hours / 24) % 365;
    return std::to_string(hours / 24 / 365) + "y" + (dy == 0 ? "" : std::to_string(dy) + "d");
  }
  return std::to_string(hours / 24 / 365) + "y";
}

std::string podStatus(const json& pod) {
  const std::string phase = text(pod, {"status", "phase"});
  std::string reason = phase;
  if (std::string r = text(pod, {"status", "reason"}); !r.empty()) reason = r;
  for (const json& c : array(pod, {"status", "conditions"})) {
    if (c.value("type", "") == "PodScheduled" && c.value("reason", "") == "SchedulingGated") {
      reason = "SchedulingGated";
    }
  }
  const json& init_statuses = array(pod, {"status", "initContainerStatuses"});
  const std::size_t init_count = array(pod, {"spec", "initContainers"}).size();
  bool initializing = false;
  for (std::size_t i = 0; i < init_statuses.size(); ++i) {
    const json& c = init_statuses[i];
    const json& terminated = field(c, {"state", "terminated"});
    const json& waiting = field(c, {"state", "waiting"});
    if (terminated.is_object() && number(terminated, {"exitCode"}) == 0) continue;
    if (terminated.is_object()) {
      std::string r = text(terminated, {"reason"});
      if (!r.empty()) {
        reason = "Init:" + r;
      } else if (number(terminated, {"signal"}) != 0) {
        reason = "Init:Signal:" + std::to_string(number(terminated, {"signal"}));
      } else {
        reason = "Init:ExitCode:" + std::to_string(number(terminated, {"exitCode"}));
      }
    } else if (waiting.is_object() && !text(waiting, {"reason"}).empty() &&
               text(waiting, {"reason"}) != "PodInitializing") {
      reason = "Init:" + text(waiting, {"reason"});
    } else {
      reason = "Init:" + std::to_string(i) + "/" + std::to_string(init_count);
    }
    initializing = true;
    break;
  }
  bool initialized = false;
  bool ready_condition = false;
  for (const json& c : array(pod, {"status", "conditions"})) {
    if (c.value("type", "") == "Initialized" && c.value("status", "") == "True") initialized = true;
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ready_condition = true;
  }
  if (!initializing || initialized) {
    bool has_running = false;
    const json& statuses = array(pod, {"status", "containerStatuses"});
    for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) {
      const json& waiting = field(*it, {"state", "waiting"});
      const json& terminated = field(*it, {"state", "terminated"});
      if (waiting.is_object() && !text(waiting, {"reason"}).empty()) {
        reason = text(waiting, {"reason"});
      } else if (terminated.is_object() && !text(terminated, {"reason"}).empty()) {
        reason = text(terminated, {"reason"});
      } else if (terminated.is_object()) {
        reason = number(terminated, {"signal"}) != 0
                     ? "Signal:" + std::to_string(number(terminated, {"signal"}))
                     : "ExitCode:" + std::to_string(number(terminated, {"exitCode"}));
      } else if (it->value("ready", false) && field(*it, {"state", "running"}).is_object()) {
        has_running = true;
      }
    }
    if (reason == "Completed" && has_running) reason = ready_condition ? "Running" : "NotReady";
  }
  const bool deleting = !field(pod, {"metadata", "deletionTimestamp"}).is_null();
  if (deleting && text(pod, {"status", "reason"}) == "NodeLost") {
    reason = "Unknown";
  } else if (deleting && phase != "Succeeded" && phase != "Failed") {
    reason = "Terminating";
  }
  return reason;
}

namespace {

std::string csrCondition(const json& csr) {
  bool approved = false;
  bool denied = false;
  bool failed = false;
  for (const json& c : field(csr, {"status", "conditions"})) {
    if (!c.is_object()) continue;
    const std::string type = c.value("type", "");
    approved = approved || type == "Approved";
    denied = denied || type == "Denied";
    failed = failed || type == "Failed";
  }
  std::string out = denied ? "Denied" : approved ? "Approved" : "Pending";
  if (failed) out += ",Failed";
  if (!text(csr, {"status", "certificate"}).empty()) out += ",Issued";
  return out;
}

}  // namespace

json toTable(const ResourceInfo& r, const json& body, std::string_view include_object,
             Clock::time_point now, std::string_view version) {
  const bool is_list = body.contains("items") && body["items"].is_array();
  json objects = is_list ? body["items"] : json::array({body});
  json columns;
  std::function<json(const json&)> cells;
  const std::string key = r.group + "/" + r.plural;
  auto age = [now](const json& o) {
    return since(text(o, {"metadata", "creationTimestamp"}), now);
  };
  auto name = [](const json& o) { return text(o, {"metadata", "name"}); };
  if (r.crd_version) {
    columns = customColumns(r);
    json spec_columns = r.crd_version->value("additionalPrinterColumns", json::array());
    cells = [spec_columns, &name, &age, now](const json& o) {
      json row = json::array({name(o)});
      if (spec_columns.empty()) {
        row.push_back(age(o));
      } else {
        for (const json& c : spec_columns) row.push_back(customCell(c, o, now));
      }
      return row;
    };
  } else if (key == "/pods") {
    columns = {
        nameColumn(),
        col("Ready", "string",
            "The aggregate readiness state of this pod for accepting "
            "traffic."),
        col("Status", "string", "The aggregate status of the containers in this pod."),
        col("Restarts", "string",
            "The number of times the containers in this pod have been restarted and when "
            "the last container in this pod has restarted."),
        ageColumn(),
        col("IP", "string", "podIP is the IP address allocated to the pod.", 1),
        col("Node", "string", "NodeName indicates in which node this pod is scheduled.", 1),
        col("Nominated Node", "string",
            "nominatedNodeName is set only when this pod preempts other pods on the node.", 1),
        col("Readiness Gates", "string",
            "If specified, all readiness gates will be "
            "evaluated for pod readiness.",
            1)};
    cells = [now](const json& o) { return podRow(o, now); };
  } else if (key == "/nodes") {
    columns = {
        nameColumn(),
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        ageColumn(),
        col("Version", "string", "Kubelet Version reported by the node."),
        col("Internal-IP", "string", "List of internal IPs for the node.", 1),
        col("External-IP", "string", "List of external IPs for the node.", 1),
        col("OS-Image", "string", "OS Image reported by the node from /etc/os-release.", 1),
        col("Kernel-Version", "string", "Kernel Version reported by the node.", 1),
        col("Container-Runtime", "string", "Container Runtime Version reported by the node.", 1)};
    cells = [now](const json& o) { return nodeRow(o, now); };
  } else if (key == "apps/deployments") {
    columns = {nameColumn(),
               col("Ready", "string", "Number of the pod with ready state"),
               col("Up-to-date", "integer",
                   "Total number of non-terminated pods targeted by "
                   "this deployment that have the desired template "
                   "spec."),
               col("Available", "integer",
                   "Total number of available pods (ready for at least "
                   "minReadySeconds) targeted by this deployment."),
               ageColumn(),
               col("Containers", "string", "Names of each container in the template.", 1),
               col("Images", "string", "Images referenced by each container in the template.", 1),
               col("Selector", "string",
                   "Label selector for pods. Existing ReplicaSets whose pods "
                   "are selected by this will be the ones affected by this "
                   "deployment.",
                   1)};
    cells = [now](const json& o) { return deploymentRow(o, now); };
  } else if (key == "/events") {
    columns = eventColumns();
    cells = [now](const json& o) { return eventRow(o, now); };
  } else if (key == "/namespaces") {
    columns = {nameColumn(), col("Status", "string", "The status of the namespace"), ageColumn()};
    cells = [&](const json& o) {
      return json::array({name(o), text(o, {"status", "phase"}), age(o)});
    };
  } else if (key == "/configmaps") {
    columns = {nameColumn(), col("Data", "string", "Data contains the configuration data."),
               ageColumn()};
    cells = [&](const json& o) {
      return json::array({name(o), count(o, "data") + count(o, "binaryData"), age(o)});
    };
  } else if (key == "/secrets") {
    columns = {nameColumn(), col("Type", "string", "The type of the secret"),
               col("Data", "string", "The number of entries in the secret"), ageColumn()};
    cells = [&](const json& o) {
      return json::array({name(o), text(o, {"type"}), count(o, "data"), age(o)});
    };
  } else if (key == "coordination.k8s.io/leases") {
    columns = {nameColumn(), col("Holder", "string", "The holder of the lease"), ageColumn()};
    cells = [&](const json& o) {
      return json::array({name(o), text(o, {"spec", "holderIdentity"}), age(o)});
    };
  } else if (key == "certificates.k8s.io/certificatesigningrequests") {
    // printCertificateSigningRequest (pkg/printers/internalversion).
    columns = {nameColumn(),
               ageColumn(),
               col("SignerName", "string", kSignerNameDoc),
               col("Requestor", "string", "Name of the user who requested the CSR."),
               col("RequestedDuration", "string", kExpirationDoc),
               col("Condition", "string", "Status of the CSR.")};
    cells = [&](const json& o) {
      const json& seconds = field(o, {"spec", "expirationSeconds"});
      std::string signer = text(o, {"spec", "signerName"});
      return json::array({name(o), age(o), signer.empty() ? "<none>" : signer,
                          text(o, {"spec", "username"}),
                          seconds.is_number_integer()
                              ? humanDuration(std::chrono::seconds(seconds.get<std::int64_t>()))
                              : "<none>",
                          csrCondition(o)});
    };
  } else if (key == "apiextensions.k8s.io/customresourcedefinitions") {
    // No printer: apiserver's defaultTableConvertor (registry/rest/table.go).
    columns = {nameColumn(), col("Created At", "date", kAgeDoc)};
    cells = [&](const json& o) {
      return json::array({name(o), text(o, {"metadata", "creationTimestamp"})});
    };
  } else {
    columns = {nameColumn(), ageColumn()};
    cells = [&](const json& o) { return json::array({name(o), age(o)}); };
  }
  json rows = json::array();
  for (const json& o : objects) {
    json row = {{"cells", cells(o)}};
    if (include_object == "Object") {
      row["object"] = o;
    } else if (include_object != "None") {
      row["object"] = {{"kind", "PartialObjectMetadata"},
                       {"apiVersion", "meta.k8s.io/" + std::string(version)},
                       {"metadata", o.value("metadata", json::object())}};
    }
    if (r.plural == "pods" && r.group.empty()) {
      const std::string phase = text(o, {"status", "phase"});
      if (phase == "Succeeded" || phase == "Failed") {
        row["conditions"] = {
            {{"type", "Completed"},
             {"status", "True"},
             {"reason", phase},
             {"message",
              phase == "Succeeded" ? "The pod has completed successfully." : "The pod failed."}}};
      }
    }
    rows.push_back(std::move(row));
  }
  json meta = json::object();
  if (is_list) {
    meta = body.value("metadata", json::object());
  } else if (std::string rv = text(body, {"metadata", "resourceVersion"}); !rv.empty()) {
    meta["resourceVersion"] = rv;
  }
  return {{"kind", "Table"},
          {"apiVersion", "meta.k8s.io/" + std::string(version)},
          {"metadata", meta},
          {"columnDefinitions", columns},
          {"rows", rows}};
}

}  // namespace ekco::kubesim::table
