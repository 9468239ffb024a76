#include "tests/kubesim/features/events.h"

#include <map>
#include <vector>

#include "tests/kubesim/validation/validation.h"

namespace ekco::kubesim::events {

using nlohmann::json;

namespace {

constexpr const char* kViewApiVersion = "events.k8s.io/v1";

// Copies `from[a]` to `to[b]` when present (and not null).
void move(const json& from, const char* a, json& to, const char* b) {
  auto it = from.find(a);
  if (it != from.end() && !it->is_null()) to[b] = *it;
}

// metav1.Time/MicroTime marshal their zero value as null; structs are never omitted.
void copyTime(const json& from, const char* a, json& to, const char* b) {
  auto it = from.find(a);
  to[b] = it == from.end() ? json() : *it;
}

void copyStruct(const json& from, const char* a, json& to, const char* b) {
  auto it = from.find(a);
  to[b] = it == from.end() || !it->is_object() ? json::object() : *it;
}

std::string text(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The view's field labels and the core label each stands for.
const std::map<std::string, std::string>& viewLabels() {
  static const std::map<std::string, std::string> labels = {
      {"reason", "reason"},
      {"regarding.kind", "involvedObject.kind"},
      {"regarding.namespace", "involvedObject.namespace"},
      {"regarding.name", "involvedObject.name"},
      {"regarding.uid", "involvedObject.uid"},
      {"regarding.apiVersion", "involvedObject.apiVersion"},
      {"regarding.resourceVersion", "involvedObject.resourceVersion"},
      {"regarding.fieldPath", "involvedObject.fieldPath"},
      {"reportingController", "reportingComponent"},
      {"source", "source"},
      {"type", "type"},
      {"metadata.namespace", "metadata.namespace"},
      {"metadata.name", "metadata.name"},
  };
  return labels;
}

}  // namespace

bool isView(std::string_view group, std::string_view resource) {
  return group == "events.k8s.io" && resource == "events";
}

bool isView(const ResourceInfo& r) { return isView(r.group, r.plural); }

json toView(const json& core) {
  if (!core.is_object()) return core;
  json out = {{"apiVersion", kViewApiVersion}, {"kind", "Event"}};
  move(core, "metadata", out, "metadata");
  copyTime(core, "eventTime", out, "eventTime");
  move(core, "series", out, "series");
  move(core, "reportingComponent", out, "reportingController");
  move(core, "reportingInstance", out, "reportingInstance");
  move(core, "action", out, "action");
  move(core, "reason", out, "reason");
  copyStruct(core, "involvedObject", out, "regarding");
  move(core, "related", out, "related");
  move(core, "message", out, "note");
  move(core, "type", out, "type");
  copyStruct(core, "source", out, "deprecatedSource");
  copyTime(core, "firstTimestamp", out, "deprecatedFirstTimestamp");
  copyTime(core, "lastTimestamp", out, "deprecatedLastTimestamp");
  move(core, "count", out, "deprecatedCount");
  // Empty strings are omitted (omitempty) in the view.
  for (const char* f :
       {"reportingController", "reportingInstance", "action", "reason", "note", "type"}) {
    if (out.contains(f) && out[f] == "") out.erase(f);
  }
  if (out.contains("deprecatedCount") && out["deprecatedCount"] == 0) out.erase("deprecatedCount");
  return out;
}

json toCore(const json& view) {
  if (!view.is_object()) return view;
  json out = {{"apiVersion", "v1"}, {"kind", "Event"}};
  move(view, "metadata", out, "metadata");
  copyStruct(view, "regarding", out, "involvedObject");
  move(view, "reason", out, "reason");
  move(view, "note", out, "message");
  copyStruct(view, "deprecatedSource", out, "source");
  copyTime(view, "deprecatedFirstTimestamp", out, "firstTimestamp");
  copyTime(view, "deprecatedLastTimestamp", out, "lastTimestamp");
  move(view, "deprecatedCount", out, "count");
  move(view, "type", out, "type");
  copyTime(view, "eventTime", out, "eventTime");
  move(view, "series", out, "series");
  move(view, "action", out, "action");
  move(view, "related", out, "related");
  out["reportingComponent"] = text(view, "reportingController");
  out["reportingInstance"] = text(view, "reportingInstance");
  return out;
}

Reply viewReply(Reply reply) {
  json& body = reply.body;
  if (!body.is_object()) return reply;
  const std::string kind = text(body, "kind");
  if (kind == "Event") {
    body = toView(body);
  } else if (kind == "EventList") {
    body["apiVersion"] = kViewApiVersion;
    if (body.contains("items") && body["items"].is_array()) {
      for (json& item : body["items"]) item = toView(item);
    }
  } else if (kind == "Status" && body.contains("details") && body["details"].is_object()) {
    json& details = body["details"];
    std::string message = text(body, "message");
    const std::string detail_kind = text(details, "kind");
    if (detail_kind == "events" && !details.contains("group")) {
      if (message.rfind("events \"", 0) == 0) message.replace(0, 6, "events.events.k8s.io");
      details["group"] = "events.k8s.io";
    } else if (detail_kind == "Event" && !details.contains("group")) {
      if (message.rfind("Event \"", 0) == 0) message.replace(0, 5, "Event.events.k8s.io");
      details["group"] = "events.k8s.io";
    }
    body["message"] = message;
  }
  return reply;
}

base::Result<std::string> coreFieldSelector(std::string_view selector) {
  std::string out;
  std::size_t start = 0;
  while (start <= selector.size()) {
    std::size_t comma = selector.find(',', start);
    std::string_view term = selector.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (!term.empty()) {
      std::size_t op = term.find_first_of("!=");
      std::string label(term.substr(0, op));
      while (!label.empty() && label.back() == ' ') label.pop_back();
      while (!label.empty() && label.front() == ' ') label.erase(0, 1);
      auto mapped = viewLabels().find(label);
      if (mapped == viewLabels().end()) {
        return base::Error("field label not supported: " + label,
                           base::ErrorCode::kInvalidArgument);
      }
      if (!out.empty()) out += ",";
      out += mapped->second;
      if (op != std::string_view::npos) out += std::string(term.substr(op));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::optional<Reply> invalidViewCreate(const json& view, const std::string& ns) {
  std::vector<FieldError> errs;
  const json regarding = view.value("regarding", json::object());
  const std::string regarding_ns = regarding.is_object() ? text(regarding, "namespace") : "";
  const bool has_time = view.contains("eventTime") && !view["eventTime"].is_null();
  // legacyValidateEvent (events.k8s.io names the controller reportingController).
  if (!has_time) {
    if (regarding_ns.empty() ? (!ns.empty() && ns != "default") : ns != regarding_ns) {
      errs.push_back(
          invalidValue("involvedObject.namespace", regarding_ns, "does not match event.namespace"));
    }
  } else {
    if (regarding_ns.empty() && ns != "default" && ns != "kube-system") {
      errs.push_back(
          invalidValue("involvedObject.namespace", regarding_ns, "does not match event.namespace"));
    }
    const std::string controller = text(view, "reportingController");
    if (controller.empty()) errs.push_back(requiredValue("reportingController"));
    for (const std::string& msg : qualifiedName(controller)) {
      errs.push_back(invalidValue("reportingController", controller, msg));
    }
    if (text(view, "reportingInstance").empty()) errs.push_back(requiredValue("reportingInstance"));
    if (text(view, "action").empty()) errs.push_back(requiredValue("action"));
    if (text(view, "reason").empty()) errs.push_back(requiredValue("reason"));
  }
  // ValidateEventCreate's strict rules for events.k8s.io/v1.
  if (!has_time) errs.push_back(requiredValue("eventTime"));
  const std::string type = text(view, "type");
  if (type != "Normal" && type != "Warning") {
    errs.push_back(invalidValue("type", "", "has invalid value: " + type));
  }
  auto set = [&](const char* f) { return view.contains(f) && !view[f].is_null(); };
  if (set("deprecatedFirstTimestamp")) {
    errs.push_back(invalidValue("deprecatedFirstTimestamp", "", "needs to be unset"));
  }
  if (set("deprecatedLastTimestamp")) {
    errs.push_back(invalidValue("deprecatedLastTimestamp", "", "needs to be unset"));
  }
  if (set("deprecatedCount") && view["deprecatedCount"] != 0) {
    errs.push_back(invalidValue("deprecatedCount", "", "needs to be unset"));
  }
  const json source = view.value("deprecatedSource", json::object());
  if (source.is_object() && (!text(source, "component").empty() || !text(source, "host").empty())) {
    errs.push_back(invalidValue("deprecatedSource", "", "needs to be unset"));
  }
  if (errs.empty()) return std::nullopt;
  std::string name;
  if (view.contains("metadata") && view["metadata"].is_object())
    name = text(view["metadata"], "name");
  return invalidReply("events.k8s.io", "Event", name, errs);
}

}  // namespace ekco::kubesim::events
