#include "tests/kubesim/store/store.h"

#include <algorithm>
#include <cstdlib>

#include "tests/kubesim/apply/managed_fields.h"
#include "tests/kubesim/apply/patch.h"
#include "tests/kubesim/controllers/csr.h"
#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/api_time.h"
#include "tests/kubesim/validation/crd.h"
#include "tests/kubesim/validation/defaults.h"
#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::conflictModified;
using store_detail::hasFinalizers;
using store_detail::metaInt;
using store_detail::notFound;
using store_detail::str;

namespace {

bool isPod(const ResourceInfo& r) { return r.group.empty() && r.plural == "pods"; }

// Sets a member for the scope of a locked write (Store::dry_run_, Store::writer_).
template <typename T>
class FlagScope {
 public:
  FlagScope(T& flag, T value) : flag_(flag) { flag_ = value; }
  ~FlagScope() { flag_ = T{}; }
  FlagScope(const FlagScope&) = delete;
  FlagScope& operator=(const FlagScope&) = delete;

 private:
  T& flag_;
};

}  // namespace

namespace store_detail {

std::string str(const json& obj, std::initializer_list<const char*> path) {
  const json* cur = &obj;
  for (const char* p : path) {
    if (!cur->is_object()) return {};
    auto it = cur->find(p);
    if (it == cur->end()) return {};
    cur = &*it;
  }
  return cur->is_string() ? cur->get<std::string>() : std::string();
}

bool hasFinalizers(const json& obj) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return false;
  auto f = meta->find("finalizers");
  return f != meta->end() && f->is_array() && !f->empty();
}

std::int64_t metaInt(const json& obj, const char* field, std::int64_t fallback) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return fallback;
  auto it = meta->find(field);
  return it != meta->end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

Reply notFound(const ResourceInfo& r, const std::string& name) {
  return statusReply(404, "NotFound", r.qualified() + " \"" + name + "\" not found", name, &r);
}

Reply conflictModified(const ResourceInfo& r, const std::string& name) {
  return statusReply(409, "Conflict",
                     "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
                         "\": the object has been modified; please apply your changes to the "
                         "latest version and try again",
                     name, &r);
}

}  // namespace store_detail

Reply statusReply(int code, std::string_view reason, std::string_view message,
                  std::string_view name, const ResourceInfo* resource) {
  json body = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
               {"status", "Failure"}, {"message", message}, {"reason", reason},
               {"code", code}};
  if (!name.empty() || resource != nullptr) {
    json details = json::object();
    if (!name.empty()) details["name"] = name;
    if (resource != nullptr) {
      if (!resource->group.empty()) details["group"] = resource->group;
      details["kind"] = resource->plural;
    }
    body["details"] = details;
  }
  return Reply{.code = code, .body = std::move(body)};
}

std::string objectKey(const std::string& ns, const std::string& name) { return ns + "/" + name; }

std::string Store::nowText(std::chrono::seconds offset) const {
  return formatApiTime(clock_.wallNow() + offset, /*micro=*/false);
}

std::string Store::newUid() {
  std::uniform_int_distribution<int> hex(0, 15);
  std::string out;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) out += '-';
    out += "0123456789abcdef"[i == 12 ? 4 : hex(rng_)];
  }
  return out;
}

std::string Store::randomSuffix() {
  static const std::string alphabet = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string out;
  for (int i = 0; i < 5; ++i) out += alphabet[pick(rng_)];
  return out;
}

const json* Store::findLocked(const ResourceInfo& r, const std::string& ns,
                              const std::string& name) const {
  auto d = data_.find(r.key());
  if (d == data_.end()) return nullptr;
  auto it = d->second.objects.find(objectKey(r.namespaced ? ns : "", name));
  return it == d->second.objects.end() ? nullptr : &it->second;
}

namespace {

// spec.nodeName as a field selector reads it: "" when absent or null, a non-string as JSON.
std::string podNodeName(const json& pod) {
  const json* spec = pod.contains("spec") ? &pod["spec"] : nullptr;
  if (spec == nullptr || !spec->is_object()) return "";
  auto it = spec->find("nodeName");
  if (it == spec->end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

}  // namespace

void Store::indexPodLocked(const std::string& key, const json* pod) {
  if (auto was = pod_node_.find(key); was != pod_node_.end()) {
    if (pod != nullptr && podNodeName(*pod) == was->second) return;
    auto bucket = pods_by_node_.find(was->second);
    bucket->second.erase(key);
    if (bucket->second.empty()) pods_by_node_.erase(bucket);
    pod_node_.erase(was);
  }
  if (pod == nullptr) return;
  std::string node = podNodeName(*pod);
  pods_by_node_[node].insert(key);
  pod_node_.emplace(key, std::move(node));
}

json Store::commitLocked(const ResourceInfo& r, const std::string& type, json object, json old) {
  if (crd::isDefinitionResource(r) && type != "DELETED") crd::setStatus(object, old, nowText());
  if (dry_run_) return object;  // dryRun=All: the answer without the write
  ++rv_;
  std::string ns = str(object, {"metadata", "namespace"});
  std::string name = str(object, {"metadata", "name"});
  auto& objects = data_[r.key()].objects;
  if (r.key() == "/v1/pods") {
    const bool terminating = type != "DELETED" && object.contains("metadata") &&
                             object["metadata"].contains("deletionTimestamp");
    if (terminating) {
      terminating_pods_.insert(objectKey(ns, name));
    } else {
      terminating_pods_.erase(objectKey(ns, name));
    }
    indexPodLocked(objectKey(ns, name), type == "DELETED" ? nullptr : &object);
  }
  if (type == "DELETED") {
    objects.erase(objectKey(ns, name));
    // A delete event carries the last state with the resourceVersion of the deletion.
    object["metadata"]["resourceVersion"] = std::to_string(rv_);
  } else {
    object["metadata"]["resourceVersion"] = std::to_string(rv_);
    objects[objectKey(ns, name)] = object;
  }
  gcTrackLocked(r, type, object, old);
  history_.push_back(WatchEvent{.resource_version = rv_,
                                .key = r.key(),
                                .type = type,
                                .object = object,
                                .old = std::move(old)});
  while (history_.size() > history_window_) {
    compacted_rv_ = history_.front().resource_version;
    history_.pop_front();
  }
  cv_.notify_all();
  if (crd::isDefinitionResource(r)) definitionChangedLocked(type, object);
  return object;
}

// 400 BadRequest when a field does not have the type the real server decodes it into.
std::optional<Reply> Store::undecodable(const ResourceInfo& r, const json& object) {
  auto bad = typeError(object, r.kind);
  if (!bad) return std::nullopt;
  return statusReply(
      400, "BadRequest",
      r.kind + " in version \"" + r.version + "\" cannot be handled as a " + r.kind + ": " + *bad);
}

Reply Store::create(const ResourceInfo& r, const std::string& ns, json object, bool dry_run,
                    const managed::Writer* writer) {
  // Decoded first, then the mutating webhooks (called without the lock), then the rest.
  if (!object.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
  if (auto bad = undecodable(r, object)) return std::move(*bad);
  if (auto refused = mutateForCreate(r, ns, object, dry_run)) return std::move(*refused);
  std::lock_guard lock(mu_);
  FlagScope<bool> dry(dry_run_, dry_run);
  FlagScope<const managed::Writer*> who(writer_, writer);
  FlagScope<const managed::Writer*> asking(request_, writer);
  warnings_.clear();
  Reply reply = createLocked(r, ns, std::move(object));
  reply.warnings = std::move(warnings_);
  return reply;
}

Reply Store::createLocked(const ResourceInfo& r, const std::string& ns, json object) {
  if (!object.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
  if (auto bad = undecodable(r, object)) return std::move(*bad);
  if (crd::isDefinitionResource(r)) {
    if (auto bad = crd::validateDefinition(object)) return std::move(*bad);
  }
  // The kind is the URL's (a body may leave apiVersion and kind out).
  object["apiVersion"] = r.apiVersion();
  object["kind"] = r.kind;
  if (auto bad = decodeFieldsLocked(r, object, json())) return std::move(*bad);
  if (r.crd_version) {
    // A custom resource with a status subresource starts without status (the create strategy
    // of apiextensions' registry drops it).
    if (r.hasSubresource("status")) object.erase("status");
    if (auto bad = crd::admit(r, object)) return std::move(*bad);
  }
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  std::string body_ns = str(object, {"metadata", "namespace"});
  if (r.namespaced) {
    if (!body_ns.empty() && body_ns != ns) {
      return statusReply(400, "BadRequest",
                         "the namespace of the provided object does not match the namespace "
                         "sent on the request");
    }
    meta["namespace"] = ns;
  } else {
    meta.erase("namespace");
  }
  if (auto refused = admitNamespaceLocked(r, ns, object)) return std::move(*refused);
  std::string name = str(object, {"metadata", "name"});
  std::string prefix = str(object, {"metadata", "generateName"});
  if (name.empty() && !prefix.empty()) {
    do {
      name = prefix + randomSuffix();
    } while (findLocked(r, ns, name) != nullptr);
    meta["name"] = name;
  }
  object["apiVersion"] = r.apiVersion();
  object["kind"] = r.kind;
  meta["uid"] = newUid();
  meta["creationTimestamp"] = nowText();
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("resourceVersion");
  if (auto refused = admitCreateLocked(r, object)) return std::move(*refused);
  if (findLocked(r, ns, name) != nullptr) {
    return statusReply(409, "AlreadyExists", r.qualified() + " \"" + name + "\" already exists",
                       name, &r);
  }
  if (r.group.empty() && r.plural == "services") {
    if (auto refused = allocateServiceLocked(object)) return std::move(*refused);
  }
  if (writer_ != nullptr) {
    json sent = object["metadata"].value("managedFields", json());
    object["metadata"].erase("managedFields");
    managed::Writer w = *writer_;
    w.now = nowText();
    managed::recordUpdate(json(), object, w, sent, r.hasSubresource("status"));
  }
  return Reply{.code = 201, .body = commitLocked(r, "ADDED", std::move(object), json())};
}

Reply Store::get(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  const json* obj = findLocked(r, ns, name);
  if (obj == nullptr) return notFound(r, name);
  return Reply{.code = 200, .body = *obj};
}

Reply Store::update(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    json object, std::string_view subresource, bool dry_run,
                    const managed::Writer* writer) {
  if (!object.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
  std::lock_guard lock(mu_);
  FlagScope<bool> dry(dry_run_, dry_run);
  FlagScope<const managed::Writer*> who(writer_, writer);
  FlagScope<const managed::Writer*> asking(request_, writer);
  warnings_.clear();
  Reply reply = updateLocked(r, ns, name, std::move(object), subresource, true);
  reply.warnings = std::move(warnings_);
  return reply;
}

Reply Store::updateLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                          json object, std::string_view subresource, bool check_version) {
  if (auto bad = undecodable(r, object)) return std::move(*bad);
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return notFound(r, name);
  json old = *current;
  if (!object["metadata"].is_object()) object["metadata"] = json::object();
  std::string body_name = str(object, {"metadata", "name"});
  if (!body_name.empty() && body_name != name) {
    return statusReply(400, "BadRequest",
                       "the name of the object (" + body_name +
                           ") does not match the name on the URL (" + name + ")");
  }
  std::string body_rv = str(object, {"metadata", "resourceVersion"});
  if (check_version && !body_rv.empty() && body_rv != str(old, {"metadata", "resourceVersion"})) {
    return conflictModified(r, name);
  }
  json next;
  if (subresource == "status" || subresource == "approval") {
    // Only status changes through the status subresource (a CSR's /approval: csr.h).
    next = old;
    if (object.contains("status")) {
      next["status"] = object["status"];
    } else {
      next.erase("status");
    }
    // Decoded first (unknown fields, times), as the handler decodes the body.
    if (auto bad = decodeFieldsLocked(r, next, old)) return std::move(*bad);
  } else {
    next = std::move(object);
    if (r.hasSubresource("status")) {
      // The main resource cannot change status when there is a status subresource.
      if (old.contains("status")) {
        next["status"] = old["status"];
      } else {
        next.erase("status");
      }
    }
    json& m = next["metadata"];
    m["name"] = name;
    if (r.namespaced) {
      m["namespace"] = ns;
    } else {
      m.erase("namespace");
    }
    for (const char* kept : {"uid", "creationTimestamp", "deletionTimestamp",
                             "deletionGracePeriodSeconds", "generation"}) {
      if (old["metadata"].contains(kept)) {
        m[kept] = old["metadata"][kept];
      } else {
        m.erase(kept);
      }
    }
    // Decoded first (unknown fields, times), then the mutating webhooks (store_webhooks.cc),
    // admission, validation and the generation bump (store_admission.cc).
    next["apiVersion"] = r.apiVersion();
    next["kind"] = r.kind;
    if (auto bad = decodeFieldsLocked(r, next, old)) return std::move(*bad);
    if (auto refused = mutateForUpdateLocked(r, ns, name, next, old)) return std::move(*refused);
    if (auto refused = admitUpdateLocked(r, next, old)) return std::move(*refused);
  }
  next["apiVersion"] = r.apiVersion();
  next["kind"] = r.kind;
  if (csr::isCsr(r)) {
    auto errors = csr::prepareUpdate(subresource, next, old, nowText());
    if (!errors.empty()) return invalidReply(r.group, r.kind, name, errors);
  }
  if (crd::isDefinitionResource(r)) {
    if (auto bad = crd::validateDefinition(next)) return std::move(*bad);
  }
  if (auto bad = crd::admit(r, next)) return std::move(*bad);
  if (writer_ != nullptr) {
    managed::Writer w = *writer_;
    w.now = nowText();
    managed::recordUpdate(old, next, w, next["metadata"].value("managedFields", json()),
                          r.hasSubresource("status"));
  }
  if (next == old) {
    // A no-op write does not bump resourceVersion or notify watchers (as the API server).
    return Reply{.code = 200, .body = old};
  }
  if (next["metadata"].contains("deletionTimestamp") && !heldByFinalizers(r, next) &&
      (!isPod(r) || metaInt(next, "deletionGracePeriodSeconds", 0) == 0)) {
    // The update that empties the finalizers of a deleted object deletes it instead
    // (shouldDeleteDuringUpdate): watchers see only DELETED, carrying the last stored state.
    json deleted = commitLocked(r, "DELETED", old, old);
    return Reply{.code = 200, .body = deleted};
  }
  json stored = commitLocked(r, "MODIFIED", std::move(next), std::move(old));
  return Reply{.code = 200, .body = stored};
}

Reply Store::patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
                   std::string_view content_type, std::string_view body,
                   std::string_view subresource, bool dry_run, const managed::Writer* writer) {
  std::string type(content_type.substr(0, content_type.find(';')));
  if (type == "application/apply-patch+yaml") {
    std::lock_guard lock(mu_);
    FlagScope<bool> dry(dry_run_, dry_run);
    FlagScope<const managed::Writer*> who(writer_, writer);
    FlagScope<const managed::Writer*> asking(request_, writer);
    warnings_.clear();
    Reply reply = applyLocked(r, ns, name, body, subresource);
    reply.warnings = std::move(warnings_);
    return reply;
  }
  json patch_doc = json::parse(body, nullptr, false);
  if (patch_doc.is_discarded()) {
    return statusReply(400, "BadRequest", "error decoding patch: invalid JSON");
  }
  std::lock_guard lock(mu_);
  FlagScope<bool> dry(dry_run_, dry_run);
  FlagScope<const managed::Writer*> who(writer_, writer);
  FlagScope<const managed::Writer*> asking(request_, writer);
  warnings_.clear();
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return notFound(r, name);
  json patched;
  if (type == "application/merge-patch+json") {
    if (!patch_doc.is_object()) {
      return statusReply(400, "BadRequest", "merge patch must be a JSON object");
    }
    patched = *current;
    patched.merge_patch(patch_doc);
  } else if (type == "application/json-patch+json") {
    if (!patch_doc.is_array()) {
      return statusReply(400, "BadRequest", "json patch must be a JSON array of operations");
    }
    try {
      patched = current->patch(patch_doc);
    } catch (const json::exception& e) {
      // The API server answers a patch that does not apply (a failed `test` included) with
      // 422 Invalid (NewGenericServerResponse(StatusUnprocessableEntity, ...)).
      return statusReply(422, "Invalid",
                         std::string("the server rejected our request due to an error in our "
                                     "request: ") +
                             e.what(),
                         name, &r);
    }
  } else if (type == "application/strategic-merge-patch+json") {
    if (!r.takesStrategicMerge()) {
      return statusReply(415, "UnsupportedMediaType",
                         "the body of the request was in an unknown format - accepted media "
                         "types include: application/json-patch+json, "
                         "application/merge-patch+json, application/apply-patch+yaml");
    }
    auto merged = strategicMergePatch(*current, patch_doc);
    if (!merged) return statusReply(400, "BadRequest", merged.error().message());
    patched = std::move(*merged);
  } else {
    return statusReply(415, "UnsupportedMediaType",
                       "the body of the request was in an unknown format - accepted media types "
                       "include: application/json-patch+json, application/merge-patch+json, "
                       "application/apply-patch+yaml, application/strategic-merge-patch+json");
  }
  if (!patched.is_object()) return statusReply(422, "Invalid", "patched object is not an object");
  if (str(patched, {"metadata", "resourceVersion"}) !=
      str(*current, {"metadata", "resourceVersion"})) {
    // A resourceVersion in the patch is a precondition.
    return conflictModified(r, name);
  }
  Reply reply = updateLocked(r, ns, name, std::move(patched), subresource, false);
  reply.warnings = std::move(warnings_);
  return reply;
}

Reply Store::remove(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    const DeleteOptions& options) {
  std::lock_guard lock(mu_);
  FlagScope<bool> dry(dry_run_, options.dry_run);
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return notFound(r, name);
  return deleteLocked(r, *current, options);
}

Reply Store::deleteLocked(const ResourceInfo& r, const json& current_ref,
                          const DeleteOptions& options) {
  if (auto invalid = store_detail::invalidPropagation(options)) return std::move(*invalid);
  json current = current_ref;
  std::string name = str(current, {"metadata", "name"});
  if (!options.precondition_uid.empty() &&
      options.precondition_uid != str(current, {"metadata", "uid"})) {
    return statusReply(
        409, "Conflict",
        "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
            "\": Precondition failed: UID in precondition: " + options.precondition_uid +
            ", UID in object meta: " + str(current, {"metadata", "uid"}),
        name, &r);
  }
  if (!options.precondition_resource_version.empty() &&
      options.precondition_resource_version != str(current, {"metadata", "resourceVersion"})) {
    return statusReply(
        409, "Conflict",
        "Operation cannot be fulfilled on " + r.qualified() + " \"" + name +
            "\": Precondition failed: ResourceVersion in precondition: " +
            options.precondition_resource_version +
            ", ResourceVersion in object meta: " + str(current, {"metadata", "resourceVersion"}),
        name, &r);
  }
  if (r.group.empty() && r.plural == "namespaces") return deleteNamespaceLocked(r, current);
  std::int64_t grace = 0;
  if (isPod(r)) {
    // Pod graceful deletion (pkg/registry/core/pod/strategy.go CheckGracefulDelete): the
    // request's grace period, else spec.terminationGracePeriodSeconds, else 30; an unscheduled
    // or finished pod is deleted at once.
    const json& spec = current.value("spec", json::object());
    grace = options.grace_period_seconds.value_or(
        spec.value("terminationGracePeriodSeconds", std::int64_t{30}));
    std::string phase = str(current, {"status", "phase"});
    if (spec.value("nodeName", "").empty() || phase == "Succeeded" || phase == "Failed") grace = 0;
    if (grace < 0) grace = 0;
  }
  json& meta = current["metadata"];
  bool terminating = meta.contains("deletionTimestamp");
  if (terminating) {
    // Already terminating: only a shorter grace period changes anything.
    std::int64_t old_grace = metaInt(current, "deletionGracePeriodSeconds", 0);
    if (!isPod(r) || grace >= old_grace) return Reply{.code = 200, .body = current};
  }
  store_detail::applyPropagation(current, options);
  if (grace == 0 && !heldByFinalizers(r, current)) {
    json old = current;
    json deleted = commitLocked(r, "DELETED", std::move(current), std::move(old));
    return Reply{.code = 200, .body = deleted};
  }
  json old = current;
  if (!terminating || isPod(r)) {
    meta["deletionTimestamp"] = nowText(std::chrono::seconds(grace));
    meta["deletionGracePeriodSeconds"] = grace;
  }
  json stored = commitLocked(r, "MODIFIED", std::move(current), std::move(old));
  // 200 with the object still there, as the API server answers a graceful deletion (it sends
  // 202 only for orphanDependents=false, a deprecated option).
  return Reply{.code = 200, .body = stored};
}

void Store::finishDeletionLocked(const ResourceInfo& r, const json& object) {
  json old = object;
  commitLocked(r, "DELETED", object, std::move(old));
}

base::Result<json> Store::put(json object) {
  if (!object.is_object()) {
    return base::Error("object is not a JSON object", base::ErrorCode::kInvalidArgument);
  }
  auto r = resourceForObject(object);
  EKCO_TRY(r);
  if (auto bad = typeError(object, r->kind)) {
    return base::Error(r->kind + " " + str(object, {"metadata", "name"}) + ": " + *bad,
                       base::ErrorCode::kInvalidArgument);
  }
  if (crd::isDefinitionResource(*r)) {
    if (auto bad = crd::validateDefinition(object)) {
      return base::Error(bad->body.value("message", "invalid CustomResourceDefinition"),
                         base::ErrorCode::kInvalidArgument);
    }
  }
  std::lock_guard lock(mu_);
  json& meta = object["metadata"];
  if (!meta.is_object()) meta = json::object();
  std::string name = str(object, {"metadata", "name"});
  if (name.empty()) {
    return base::Error(r->kind + " without metadata.name", base::ErrorCode::kInvalidArgument);
  }
  if (r->namespaced) {
    if (str(object, {"metadata", "namespace"}).empty()) meta["namespace"] = "default";
  } else {
    meta.erase("namespace");
  }
  if (!meta.contains("uid")) meta["uid"] = newUid();
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = nowText();
  if (!meta.contains("generation") && tracksGeneration(*r)) meta["generation"] = 1;
  if (r->namespaced) ensureNamespaceLocked(str(object, {"metadata", "namespace"}));
  const json* current = findLocked(*r, str(object, {"metadata", "namespace"}), name);
  json old = current == nullptr ? json() : *current;
  putting_ = true;
  json stored = commitLocked(*r, current == nullptr ? "ADDED" : "MODIFIED", std::move(object),
                             std::move(old));
  putting_ = false;
  return stored;
}

std::optional<json> Store::get(std::string_view qualified, std::string_view ns,
                               std::string_view name) const {
  auto r = findQualified(qualified);
  if (!r) return std::nullopt;
  std::lock_guard lock(mu_);
  const json* obj = findLocked(*r, std::string(ns), std::string(name));
  if (obj == nullptr) return std::nullopt;
  return *obj;
}

bool Store::remove(std::string_view qualified, std::string_view ns, std::string_view name) {
  auto r = findQualified(qualified);
  if (!r) return false;
  std::lock_guard lock(mu_);
  const json* obj = findLocked(*r, std::string(ns), std::string(name));
  if (obj == nullptr) return false;
  finishDeletionLocked(*r, *obj);
  return true;
}

std::uint64_t Store::resourceVersion() const {
  std::lock_guard lock(mu_);
  return rv_;
}

std::optional<std::vector<WatchEvent>> Store::eventsAfter(std::uint64_t after,
                                                          const std::string& key,
                                                          std::uint64_t* scanned_to) const {
  std::lock_guard lock(mu_);
  *scanned_to = std::max(after, rv_);
  if (after < compacted_rv_) return std::nullopt;
  std::vector<WatchEvent> out;
  auto it =
      std::upper_bound(history_.begin(), history_.end(), after,
                       [](std::uint64_t v, const WatchEvent& e) { return v < e.resource_version; });
  for (; it != history_.end(); ++it) {
    if (it->key == key) out.push_back(*it);
  }
  return out;
}

void Store::waitForChange(std::uint64_t after, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return shutdown_ || rv_ > after; });
}

void Store::compact() {
  std::lock_guard lock(mu_);
  compacted_rv_ = rv_;
  history_.clear();
}

void Store::shutdown() {
  std::lock_guard lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

bool Store::isShutdown() const {
  std::lock_guard lock(mu_);
  return shutdown_;
}

}  // namespace ekco::kubesim
