#include "tests/kubesim/store/list_options.h"

#include <set>
#include <vector>

namespace ekco::kubesim {

using nlohmann::json;

namespace {

struct Cause {
  std::string reason{};  // FieldValueForbidden, FieldValueNotSupported
  std::string field{};
  std::string message{};  // "Forbidden: ..." as field.Error.ErrorBody() renders it
};

// errors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", errs).
Reply invalidListOptions(const std::vector<Cause>& causes) {
  std::string message = "ListOptions.meta.k8s.io \"\" is invalid: ";
  json details = {{"group", "meta.k8s.io"}, {"kind", "ListOptions"}, {"causes", json::array()}};
  if (causes.size() > 1) message += "[";
  for (std::size_t i = 0; i < causes.size(); ++i) {
    if (i > 0) message += ", ";
    message += causes[i].field + ": " + causes[i].message;
    details["causes"].push_back(
        {{"reason", causes[i].reason}, {"message", causes[i].message}, {"field", causes[i].field}});
  }
  if (causes.size() > 1) message += "]";
  Reply reply = statusReply(422, "Invalid", message);
  reply.body["details"] = std::move(details);
  return reply;
}

Cause forbidden(std::string detail) {
  return Cause{.reason = "FieldValueForbidden",
               .field = "resourceVersionMatch",
               .message = "Forbidden: " + std::move(detail)};
}

Cause notSupported(const std::string& value, const std::vector<std::string>& supported) {
  std::string list;
  for (const std::string& s : supported) {
    if (!list.empty()) list += ", ";
    list += "\"" + s + "\"";
  }
  return Cause{.reason = "FieldValueNotSupported",
               .field = "resourceVersionMatch",
               .message = "Unsupported value: \"" + value + "\": supported values: " + list};
}

// The kinds with their own field label conversion function (pkg/apis/*/v1/conversion.go): the
// labels they accept beyond metadata.name and metadata.namespace.
struct KindLabels {
  std::set<std::string> labels;
  std::map<std::string, FieldLabel> mapped;
};

const std::map<std::string, KindLabels>& kindLabels() {
  static const std::map<std::string, KindLabels> kinds = {
      {"/v1/pods",
       {{"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
         "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
         "status.podIP", "status.nominatedNodeName"},
        {{"spec.hostNetwork", {.path = "spec.hostNetwork", .unset = "false"}},
         {"spec.restartPolicy", {.path = "spec.restartPolicy", .unset = "Always"}},
         {"spec.schedulerName", {.path = "spec.schedulerName", .unset = "default-scheduler"}}}}},
      {"/v1/nodes",
       {{"metadata.name", "spec.unschedulable"},
        {{"spec.unschedulable", {.path = "spec.unschedulable", .unset = "false"}}}}},
      {"/v1/namespaces", {{"metadata.name", "status.phase"}, {}}},
      {"/v1/secrets", {{"metadata.name", "metadata.namespace", "type"}, {}}},
      {"/v1/services",
       {{"metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"},
        {{"spec.type", {.path = "spec.type", .unset = "ClusterIP"}}}}},
      {"/v1/replicationcontrollers",
       {{"metadata.name", "metadata.namespace", "status.replicas"},
        {{"status.replicas", {.path = "status.replicas", .unset = "0"}}}}},
      {"apps/v1/replicasets",
       {{"metadata.name", "metadata.namespace", "status.replicas"},
        {{"status.replicas", {.path = "status.replicas", .unset = "0"}}}}},
      {"batch/v1/jobs",
       {{"metadata.name", "metadata.namespace", "status.successful"},
        {{"status.successful", {.path = "status.successful", .unset = "0"}}}}},
      {"certificates.k8s.io/v1/certificatesigningrequests",
       {{"metadata.name", "spec.signerName"}, {}}},
      {"/v1/events",
       {{"metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
         "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
         "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
         "reportingComponent", "source", "type"},
        {{"source", {.path = "source.component", .unset = ""}}}}},
  };
  return kinds;
}

}  // namespace

std::optional<bool> parseGoBool(std::string_view text) {
  for (std::string_view t : {"1", "t", "T", "true", "TRUE", "True"}) {
    if (text == t) return true;
  }
  for (std::string_view f : {"0", "f", "F", "false", "FALSE", "False"}) {
    if (text == f) return false;
  }
  return std::nullopt;
}

std::optional<Reply> validateListQuery(const ListQuery& q) {
  std::vector<Cause> causes;
  const std::string& match = q.resource_version_match;
  if (q.watch) {
    if (q.send_initial_events && match != "NotOlderThan") {
      causes.push_back(
          forbidden("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    if (!match.empty()) {
      if (!q.send_initial_events) {
        causes.push_back(forbidden(
            "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
      }
      if (match != "NotOlderThan") causes.push_back(notSupported(match, {"NotOlderThan"}));
      if (!q.continue_token.empty()) {
        causes.push_back(forbidden("resourceVersionMatch is forbidden when continue is provided"));
      }
    }
  } else {
    if (!match.empty()) {
      if (q.resource_version.empty()) {
        causes.push_back(
            forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided"));
      }
      if (!q.continue_token.empty()) {
        causes.push_back(forbidden("resourceVersionMatch is forbidden when continue is provided"));
      }
      if (match != "Exact" && match != "NotOlderThan") {
        causes.push_back(notSupported(match, {"Exact", "NotOlderThan", ""}));
      }
      if (match == "Exact" && q.resource_version == "0") {
        causes.push_back(
            forbidden("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
      }
    }
    if (q.send_initial_events) {
      causes.push_back(Cause{.reason = "FieldValueForbidden",
                             .field = "sendInitialEvents",
                             .message = "Forbidden: sendInitialEvents is forbidden for list"});
    }
  }
  if (causes.empty()) return std::nullopt;
  return invalidListOptions(causes);
}

const std::map<std::string, FieldLabel>& fieldLabelsFor(const ResourceInfo& r) {
  static const std::map<std::string, FieldLabel> kNone;
  auto it = kindLabels().find(r.key());
  return it == kindLabels().end() ? kNone : it->second.mapped;
}

std::optional<Reply> checkFieldLabels(const ResourceInfo& r, std::string_view field_selector) {
  auto parsed = FieldSelector::parse(field_selector);
  if (!parsed) return statusReply(400, "BadRequest", parsed.error().message());
  auto kind = kindLabels().find(r.key());
  for (const std::string& label : parsed->labels()) {
    if (kind != kindLabels().end()) {
      if (kind->second.labels.count(label) == 0) {
        return statusReply(400, "BadRequest", "field label not supported: " + label);
      }
    } else if (label != "metadata.name" && label != "metadata.namespace") {
      return statusReply(400, "BadRequest",
                         "\"" + label +
                             "\" is not a known field selector: only \"metadata.name\", "
                             "\"metadata.namespace\"");
    }
  }
  return std::nullopt;
}

base::Result<FieldSelector> fieldSelectorFor(const ResourceInfo& r, std::string_view text) {
  auto parsed = FieldSelector::parse(text);
  EKCO_TRY(parsed);
  parsed->mapLabels(fieldLabelsFor(r));
  return parsed;
}

}  // namespace ekco::kubesim
