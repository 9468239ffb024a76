#include "kube/decode/objects.h"

#include <algorithm>

#include "base/strings.h"
#include "kube/decode/timestamp.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::kube {

using base::Error;
using base::ErrorCode;
using base::Result;
using Json = nlohmann::json;

namespace {

// Thrown by the accessors below and caught by the parse functions of this file only.
struct FieldError {
  std::string field;
  std::string what;
};

std::string typeName(const Json& value) { return value.type_name(); }

// The member, or null when absent or JSON null. The parent must be an object.
const Json* member(const Json& parent, const std::string& path, const char* key) {
  if (!parent.is_object()) throw FieldError{path, "expected object, got " + typeName(parent)};
  auto it = parent.find(key);
  return it == parent.end() || it->is_null() ? nullptr : &*it;
}

std::string join(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

std::string str(const Json& parent, const std::string& path, const char* key) {
  const Json* v = member(parent, path, key);
  if (v == nullptr) return {};
  if (!v->is_string()) throw FieldError{join(path, key), "expected string, got " + typeName(*v)};
  return v->get<std::string>();
}

bool boolean(const Json& parent, const std::string& path, const char* key) {
  const Json* v = member(parent, path, key);
  if (v == nullptr) return false;
  if (!v->is_boolean()) throw FieldError{join(path, key), "expected boolean, got " + typeName(*v)};
  return v->get<bool>();
}

std::optional<std::int64_t> integer(const Json& parent, const std::string& path, const char* key) {
  const Json* v = member(parent, path, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) {
    throw FieldError{join(path, key), "expected integer, got " + typeName(*v)};
  }
  return v->get<std::int64_t>();
}

std::optional<base::WallTime> time(const Json& parent, const std::string& path, const char* key) {
  const std::string text = str(parent, path, key);
  if (text.empty()) return std::nullopt;
  auto parsed = parseRfc3339(text);
  if (!parsed) throw FieldError{join(path, key), parsed.error().message()};
  return *parsed;
}

// An object member (empty object when absent).
const Json& object(const Json& parent, const std::string& path, const char* key) {
  static const Json kEmpty = Json::object();
  const Json* v = member(parent, path, key);
  if (v == nullptr) return kEmpty;
  if (!v->is_object()) throw FieldError{join(path, key), "expected object, got " + typeName(*v)};
  return *v;
}

// An array member (empty array when absent).
const Json& array(const Json& parent, const std::string& path, const char* key) {
  static const Json kEmpty = Json::array();
  const Json* v = member(parent, path, key);
  if (v == nullptr) return kEmpty;
  if (!v->is_array()) throw FieldError{join(path, key), "expected array, got " + typeName(*v)};
  return *v;
}

std::map<std::string, std::string> stringMap(const Json& parent, const std::string& path,
                                             const char* key) {
  std::map<std::string, std::string> out;
  const std::string field = join(path, key);
  for (const auto& [k, v] : object(parent, path, key).items()) {
    // The key is the object's (a label or annotation name): escaped, the message is one line.
    if (!v.is_string()) {
      throw FieldError{field + "." + base::escapeForMessage(k),
                       "expected string, got " + typeName(v)};
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

std::string at(const std::string& path, const char* key, std::size_t i) {
  return join(path, key) + "[" + std::to_string(i) + "]";
}

// Runs `parse` and turns a FieldError into "parse <kind> <name>: <field>: <what>".
template <typename T, typename F>
Result<T> guarded(const char* kind, const Json& json, F&& parse) {
  std::string name;
  if (json.is_object()) {
    auto meta = json.find("metadata");
    if (meta != json.end() && meta->is_object()) {
      auto n = meta->find("name");
      if (n != meta->end() && n->is_string()) name = n->get<std::string>();
    }
  }
  // The name is the object's own: escaped, so the message stays one line whatever it holds.
  const std::string prefix =
      std::string("parse ") + kind + (name.empty() ? "" : " " + base::escapeForMessage(name));
  if (!json.is_object()) {
    return Error(prefix + ": expected object, got " + typeName(json), ErrorCode::kParse);
  }
  try {
    return parse();
  } catch (const FieldError& e) {
    return Error(prefix + ": " + e.field + ": " + e.what, ErrorCode::kParse);
  } catch (const nlohmann::json::exception& e) {
    return Error(prefix + ": " + e.what(), ErrorCode::kParse);
  }
}

}  // namespace

const NodeCondition* Node::condition(std::string_view type) const {
  for (const auto& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

const OwnerReference* Pod::controllerRef() const {
  for (const auto& o : owner_references) {
    if (o.controller) return &o;
  }
  return nullptr;
}

bool Pod::allContainersReady() const {
  return !container_statuses.empty() &&
         std::all_of(container_statuses.begin(), container_statuses.end(),
                     [](const ContainerStatus& c) { return c.ready; });
}

const ContainerStatus* Pod::containerStatus(std::string_view container) const {
  for (const ContainerStatus& c : container_statuses) {
    if (c.name == container) return &c;
  }
  return nullptr;
}

const PodCondition* Pod::condition(std::string_view type) const {
  for (const PodCondition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

Result<Node> parseNode(const Json& json) {
  return guarded<Node>("Node", json, [&] {
    Node node;
    const Json& meta = object(json, "", "metadata");
    node.name = str(meta, "metadata", "name");
    node.uid = str(meta, "metadata", "uid");
    node.resource_version = str(meta, "metadata", "resourceVersion");
    node.labels = stringMap(meta, "metadata", "labels");
    node.annotations = stringMap(meta, "metadata", "annotations");
    node.control_plane = node.labels.contains("node-role.kubernetes.io/control-plane") ||
                         node.labels.contains("node-role.kubernetes.io/master");
    const Json& spec = object(json, "", "spec");
    node.unschedulable = boolean(spec, "spec", "unschedulable");
    const Json& taints = array(spec, "spec", "taints");
    for (std::size_t i = 0; i < taints.size(); ++i) {
      const std::string p = at("spec", "taints", i);
      node.taints.push_back({.key = str(taints[i], p, "key"),
                             .value = str(taints[i], p, "value"),
                             .effect = str(taints[i], p, "effect"),
                             .time_added = time(taints[i], p, "timeAdded")});
    }
    const Json& status = object(json, "", "status");
    const Json& conditions = array(status, "status", "conditions");
    for (std::size_t i = 0; i < conditions.size(); ++i) {
      const std::string p = at("status", "conditions", i);
      node.conditions.push_back(
          {.type = str(conditions[i], p, "type"),
           .status = str(conditions[i], p, "status"),
           .last_transition_time = time(conditions[i], p, "lastTransitionTime"),
           .last_heartbeat_time = time(conditions[i], p, "lastHeartbeatTime")});
    }
    const Json& addresses = array(status, "status", "addresses");
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      const std::string p = at("status", "addresses", i);
      node.addresses.push_back(
          {.type = str(addresses[i], p, "type"), .address = str(addresses[i], p, "address")});
    }
    node.boot_id = str(object(status, "status", "nodeInfo"), "status.nodeInfo", "bootID");
    return node;
  });
}

Result<Pod> parsePod(const Json& json) {
  return guarded<Pod>("Pod", json, [&] {
    Pod pod;
    const Json& meta = object(json, "", "metadata");
    pod.ns = str(meta, "metadata", "namespace");
    pod.name = str(meta, "metadata", "name");
    pod.uid = str(meta, "metadata", "uid");
    pod.resource_version = str(meta, "metadata", "resourceVersion");
    pod.labels = stringMap(meta, "metadata", "labels");
    pod.deletion_timestamp = time(meta, "metadata", "deletionTimestamp");
    pod.deletion_grace_period_seconds = integer(meta, "metadata", "deletionGracePeriodSeconds");
    const Json& owners = array(meta, "metadata", "ownerReferences");
    for (std::size_t i = 0; i < owners.size(); ++i) {
      const std::string p = at("metadata", "ownerReferences", i);
      pod.owner_references.push_back({.kind = str(owners[i], p, "kind"),
                                      .name = str(owners[i], p, "name"),
                                      .uid = str(owners[i], p, "uid"),
                                      .controller = boolean(owners[i], p, "controller")});
    }
    const Json& spec = object(json, "", "spec");
    pod.node_name = str(spec, "spec", "nodeName");
    const Json& volumes = array(spec, "spec", "volumes");
    for (std::size_t i = 0; i < volumes.size(); ++i) {
      const std::string p = at("spec", "volumes", i);
      if (!volumes[i].is_object()) {
        throw FieldError{p, "expected object, got " + typeName(volumes[i])};
      }
      std::string kind;
      for (const auto& [key, value] : volumes[i].items()) {
        if (key != "name") kind = key;
      }
      pod.volume_kinds.push_back(kind);
      if (kind == "persistentVolumeClaim") {
        pod.pvc_claim_names.push_back(str(object(volumes[i], p, "persistentVolumeClaim"),
                                          p + ".persistentVolumeClaim", "claimName"));
      }
    }
    const Json& status = object(json, "", "status");
    pod.phase = str(status, "status", "phase");
    const Json& statuses = array(status, "status", "containerStatuses");
    for (std::size_t i = 0; i < statuses.size(); ++i) {
      const std::string p = at("status", "containerStatuses", i);
      const Json& state = object(statuses[i], p, "state");
      const Json& running = object(state, p + ".state", "running");
      pod.container_statuses.push_back(
          {.name = str(statuses[i], p, "name"),
           .ready = boolean(statuses[i], p, "ready"),
           .running_since = time(running, p + ".state.running", "startedAt")});
    }
    const Json& conditions = array(status, "status", "conditions");
    for (std::size_t i = 0; i < conditions.size(); ++i) {
      const std::string p = at("status", "conditions", i);
      pod.conditions.push_back(
          {.type = str(conditions[i], p, "type"),
           .status = str(conditions[i], p, "status"),
           .reason = str(conditions[i], p, "reason"),
           .last_transition_time = time(conditions[i], p, "lastTransitionTime")});
    }
    return pod;
  });
}

Result<Lease> parseLease(const Json& json) {
  return guarded<Lease>("Lease", json, [&] {
    Lease lease;
    const Json& meta = object(json, "", "metadata");
    lease.ns = str(meta, "metadata", "namespace");
    lease.name = str(meta, "metadata", "name");
    lease.resource_version = str(meta, "metadata", "resourceVersion");
    const Json& spec = object(json, "", "spec");
    lease.holder_identity = str(spec, "spec", "holderIdentity");
    lease.lease_duration_seconds = integer(spec, "spec", "leaseDurationSeconds");
    lease.acquire_time = time(spec, "spec", "acquireTime");
    lease.renew_time = time(spec, "spec", "renewTime");
    lease.lease_transitions = integer(spec, "spec", "leaseTransitions").value_or(0);
    return lease;
  });
}

Result<CertificateSigningRequest> parseCertificateSigningRequest(const Json& json) {
  return guarded<CertificateSigningRequest>("CertificateSigningRequest", json, [&] {
    CertificateSigningRequest csr;
    const Json& meta = object(json, "", "metadata");
    csr.name = str(meta, "metadata", "name");
    csr.uid = str(meta, "metadata", "uid");
    csr.resource_version = str(meta, "metadata", "resourceVersion");
    const Json& spec = object(json, "", "spec");
    csr.signer_name = str(spec, "spec", "signerName");
    csr.username = str(spec, "spec", "username");
    const auto strings = [&](const char* key) {
      std::vector<std::string> out;
      const Json& items = array(spec, "spec", key);
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          throw FieldError{at("spec", key, i), "expected string, got " + typeName(items[i])};
        }
        out.push_back(items[i].get<std::string>());
      }
      return out;
    };
    csr.groups = strings("groups");
    csr.usages = strings("usages");
    csr.expiration_seconds = integer(spec, "spec", "expirationSeconds");
    const std::string encoded = str(spec, "spec", "request");
    auto decoded = base64Decode(encoded);
    if (!decoded) throw FieldError{"spec.request", "not base64"};
    csr.request = std::move(*decoded);
    const Json& status = object(json, "", "status");
    const Json& conditions = array(status, "status", "conditions");
    for (std::size_t i = 0; i < conditions.size(); ++i) {
      const std::string p = at("status", "conditions", i);
      const std::string type = str(conditions[i], p, "type");
      const std::string value = str(conditions[i], p, "status");
      if (!(value.empty() || value == "True")) continue;
      if (type == "Approved") csr.approved = true;
      if (type == "Denied") csr.denied = true;
      if (type == "Failed") csr.failed = true;
    }
    csr.issued = !str(status, "status", "certificate").empty();
    return csr;
  });
}

}  // namespace ekco::kube
