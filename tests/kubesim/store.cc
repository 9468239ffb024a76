#include "tests/kubesim/store.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <set>

#include "tests/kubesim/patch.h"
#include "tests/kubesim/selector.h"

namespace ekco::kubesim {

using nlohmann::json;

namespace {

const std::set<std::string>& clusterScopedKinds() {
  static const std::set<std::string> kinds = {"Node",
                                              "Namespace",
                                              "PersistentVolume",
                                              "StorageClass",
                                              "ClusterRole",
                                              "ClusterRoleBinding",
                                              "CustomResourceDefinition",
                                              "PriorityClass",
                                              "CSIDriver",
                                              "CSINode",
                                              "VolumeAttachment",
                                              "MutatingWebhookConfiguration",
                                              "ValidatingWebhookConfiguration",
                                              "APIService",
                                              "CertificateSigningRequest",
                                              "RuntimeClass",
                                              "IngressClass",
                                              "ClusterIssuer"};
  return kinds;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string pluralize(std::string_view kind) {
  std::string s = lower(kind);
  if (s.empty()) return s;
  auto ends = [&](std::string_view suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends("s") || ends("x") || ends("ch") || ends("sh")) return s + "es";
  if (ends("y") && s.size() > 1 &&
      std::string_view("aeiou").find(s[s.size() - 2]) == std::string_view::npos) {
    return s.substr(0, s.size() - 1) + "ies";
  }
  return s + "s";
}

std::vector<ResourceInfo> builtins() {
  auto r = [](std::string group, std::string version, std::string plural, std::string kind,
              bool namespaced, std::vector<std::string> shorts, std::vector<std::string> subs) {
    return ResourceInfo{.group = std::move(group),
                        .version = std::move(version),
                        .plural = std::move(plural),
                        .singular = lower(kind),
                        .kind = std::move(kind),
                        .namespaced = namespaced,
                        .short_names = std::move(shorts),
                        .subresources = std::move(subs)};
  };
  // Served by the server itself (the RBAC evaluator), never stored.
  ResourceInfo selfSubjectAccessReviews =
      r("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false,
        {}, {});
  selfSubjectAccessReviews.verbs = {"create"};
  return {
      r("", "v1", "nodes", "Node", false, {"no"}, {"status"}),
      r("", "v1", "pods", "Pod", true, {"po"}, {"status", "eviction", "exec"}),
      r("", "v1", "namespaces", "Namespace", false, {"ns"}, {"status"}),
      r("", "v1", "configmaps", "ConfigMap", true, {"cm"}, {}),
      r("", "v1", "secrets", "Secret", true, {}, {}),
      r("", "v1", "services", "Service", true, {"svc"}, {"status"}),
      r("", "v1", "endpoints", "Endpoints", true, {"ep"}, {}),
      r("", "v1", "events", "Event", true, {"ev"}, {}),
      r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, {"pvc"}, {"status"}),
      r("", "v1", "persistentvolumes", "PersistentVolume", false, {"pv"}, {"status"}),
      r("", "v1", "serviceaccounts", "ServiceAccount", true, {"sa"}, {}),
      r("apps", "v1", "deployments", "Deployment", true, {"deploy"}, {"status", "scale"}),
      r("apps", "v1", "statefulsets", "StatefulSet", true, {"sts"}, {"status", "scale"}),
      r("apps", "v1", "daemonsets", "DaemonSet", true, {"ds"}, {"status"}),
      r("apps", "v1", "replicasets", "ReplicaSet", true, {"rs"}, {"status"}),
      r("coordination.k8s.io", "v1", "leases", "Lease", true, {}, {}),
      r("events.k8s.io", "v1", "events", "Event", true, {"ev"}, {}),
      r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, {"pdb"}, {"status"}),
      r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, {}, {}),
      r("storage.k8s.io", "v1", "storageclasses", "StorageClass", false, {"sc"}, {}),
      r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
        false, {"crd", "crds"}, {"status"}),
      r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, {}, {}),
      r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, {},
        {}),
      r("rbac.authorization.k8s.io", "v1", "roles", "Role", true, {}, {}),
      r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, {}, {}),
      selfSubjectAccessReviews,
  };
}

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

bool isPod(const ResourceInfo& r) { return r.group.empty() && r.plural == "pods"; }

json specOf(const json& obj) {
  json copy = obj;
  copy.erase("metadata");
  copy.erase("status");
  return copy;
}

std::int64_t metaInt(const json& obj, const char* field, std::int64_t fallback) {
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return fallback;
  auto it = meta->find(field);
  return it != meta->end() && it->is_number_integer() ? it->get<std::int64_t>() : fallback;
}

// "2026-01-02T03:04:05Z" → seconds since the epoch; nullopt if malformed.
std::optional<std::int64_t> parseTime(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string toHex(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

std::optional<std::string> fromHex(std::string_view s) {
  if (s.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    int hi = nib(s[i]);
    int lo = nib(s[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
  }
  return out;
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

}  // namespace

bool ResourceInfo::hasSubresource(std::string_view sub) const {
  return std::find(subresources.begin(), subresources.end(), sub) != subresources.end();
}

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

Store::Store(const base::Clock& clock, std::size_t history_window)
    : clock_(clock),
      history_window_(std::max<std::size_t>(history_window, 1)),
      rng_(std::random_device{}()) {
  for (ResourceInfo& info : builtins()) registerLocked(std::move(info));
}

void Store::registerLocked(ResourceInfo info) {
  std::string key = info.key();
  resources_.emplace(key, std::move(info));
  data_.try_emplace(key);
}

std::optional<ResourceInfo> Store::findResource(std::string_view group, std::string_view version,
                                                std::string_view plural) const {
  std::lock_guard lock(mu_);
  auto it =
      resources_.find(std::string(group) + "/" + std::string(version) + "/" + std::string(plural));
  if (it == resources_.end()) return std::nullopt;
  return it->second;
}

std::optional<ResourceInfo> Store::findQualified(std::string_view qualified) const {
  std::lock_guard lock(mu_);
  auto dot = qualified.find('.');
  std::string plural(qualified.substr(0, dot));
  std::string group(dot == std::string_view::npos ? "" : qualified.substr(dot + 1));
  for (const auto& [key, info] : resources_) {
    if (info.plural == plural && info.group == group) return info;
  }
  return std::nullopt;
}

std::vector<ResourceInfo> Store::resources() const {
  std::lock_guard lock(mu_);
  std::vector<ResourceInfo> out;
  for (const auto& [key, info] : resources_) out.push_back(info);
  return out;
}

std::optional<ResourceInfo> Store::findByKindLocked(std::string_view api_version,
                                                    std::string_view kind) const {
  for (const auto& [key, info] : resources_) {
    if (info.kind == kind && info.apiVersion() == api_version) return info;
  }
  return std::nullopt;
}

base::Result<ResourceInfo> Store::resourceForObject(const json& object) {
  std::string api_version = str(object, {"apiVersion"});
  std::string kind = str(object, {"kind"});
  if (api_version.empty() || kind.empty()) {
    return base::Error("object without apiVersion or kind", base::ErrorCode::kInvalidArgument);
  }
  std::lock_guard lock(mu_);
  if (auto found = findByKindLocked(api_version, kind)) return *found;
  auto slash = api_version.find('/');
  ResourceInfo info{
      .group = slash == std::string::npos ? "" : api_version.substr(0, slash),
      .version = slash == std::string::npos ? api_version : api_version.substr(slash + 1),
      .plural = pluralize(kind),
      .singular = lower(kind),
      .kind = kind,
      .namespaced = clusterScopedKinds().count(kind) == 0,
      .short_names = {},
      .subresources = {}};
  registerLocked(info);
  return info;
}

std::string Store::nowText(std::chrono::seconds offset) const {
  std::time_t t = std::chrono::system_clock::to_time_t(clock_.wallNow() + offset);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
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

json Store::commitLocked(const ResourceInfo& r, const std::string& type, json object, json old) {
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
  }
  if (type == "DELETED") {
    objects.erase(objectKey(ns, name));
    // A delete event carries the last state with the resourceVersion of the deletion.
    object["metadata"]["resourceVersion"] = std::to_string(rv_);
  } else {
    object["metadata"]["resourceVersion"] = std::to_string(rv_);
    objects[objectKey(ns, name)] = object;
  }
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
  if (r.group == "apiextensions.k8s.io" && r.plural == "customresourcedefinitions" &&
      type != "DELETED") {
    // Serve the versions of a created CustomResourceDefinition.
    const json& spec = object.value("spec", json::object());
    const json& names = spec.value("names", json::object());
    for (const json& v : spec.value("versions", json::array())) {
      if (!v.is_object() || !v.contains("name")) continue;
      std::vector<std::string> subs;
      if (v.value("subresources", json::object()).contains("status")) subs.push_back("status");
      std::vector<std::string> shorts;
      for (const json& s : names.value("shortNames", json::array())) {
        if (s.is_string()) shorts.push_back(s.get<std::string>());
      }
      registerLocked(ResourceInfo{.group = spec.value("group", ""),
                                  .version = v["name"].get<std::string>(),
                                  .plural = names.value("plural", ""),
                                  .singular = names.value("singular", ""),
                                  .kind = names.value("kind", ""),
                                  .namespaced = spec.value("scope", "Namespaced") == "Namespaced",
                                  .short_names = shorts,
                                  .subresources = subs});
    }
  }
  return object;
}

Reply Store::create(const ResourceInfo& r, const std::string& ns, json object) {
  if (!object.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
  std::lock_guard lock(mu_);
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
  std::string name = str(object, {"metadata", "name"});
  if (name.empty()) {
    std::string prefix = str(object, {"metadata", "generateName"});
    if (prefix.empty()) {
      return statusReply(422, "Invalid",
                         r.kind +
                             " \"\" is invalid: metadata.name: Required value: name or "
                             "generateName is required",
                         "", &r);
    }
    do {
      name = prefix + randomSuffix();
    } while (findLocked(r, ns, name) != nullptr);
    meta["name"] = name;
  }
  if (findLocked(r, ns, name) != nullptr) {
    return statusReply(409, "AlreadyExists", r.qualified() + " \"" + name + "\" already exists",
                       name, &r);
  }
  object["apiVersion"] = r.apiVersion();
  object["kind"] = r.kind;
  meta["uid"] = newUid();
  meta["creationTimestamp"] = nowText();
  meta["generation"] = 1;
  meta.erase("deletionTimestamp");
  meta.erase("deletionGracePeriodSeconds");
  meta.erase("resourceVersion");
  return Reply{.code = 201, .body = commitLocked(r, "ADDED", std::move(object), json())};
}

Reply Store::get(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  const json* obj = findLocked(r, ns, name);
  if (obj == nullptr) return notFound(r, name);
  return Reply{.code = 200, .body = *obj};
}

Reply Store::list(const ResourceInfo& r, const std::string& ns, const ListOptions& options) const {
  auto labels = LabelSelector::parse(options.label_selector);
  if (!labels) return statusReply(400, "BadRequest", labels.error().message());
  auto fields = FieldSelector::parse(options.field_selector);
  if (!fields) return statusReply(400, "BadRequest", fields.error().message());
  // A continue token is hex("<resourceVersion of the first page>/<last key returned>"): pages
  // follow the stable namespace/name order, and a token from before the history window is
  // expired, as an etcd-compacted one is.
  std::string start_after;
  std::uint64_t token_rv = 0;
  if (!options.continue_token.empty()) {
    auto decoded = fromHex(options.continue_token);
    auto slash = decoded ? decoded->find('/') : std::string::npos;
    if (slash == std::string::npos) {
      return statusReply(400, "BadRequest", "continue key is not valid: " + options.continue_token);
    }
    token_rv = std::strtoull(decoded->substr(0, slash).c_str(), nullptr, 10);
    start_after = decoded->substr(slash + 1);
  }
  std::lock_guard lock(mu_);
  if (!options.continue_token.empty() && token_rv < compacted_rv_) {
    return statusReply(410, "Expired",
                       "The provided continue parameter is too old to display a consistent list "
                       "result. You can start a new list without the continue parameter.");
  }
  if (options.resource_version_match == "Exact" && !options.resource_version.empty() &&
      std::strtoull(options.resource_version.c_str(), nullptr, 10) < compacted_rv_) {
    return statusReply(410, "Expired", "The resourceVersion for the provided list is too old.");
  }
  std::uint64_t list_rv = token_rv != 0 ? token_rv : rv_;
  json items = json::array();
  json list_meta = {{"resourceVersion", std::to_string(list_rv)}};
  auto d = data_.find(r.key());
  if (d != data_.end()) {
    const auto& objects = d->second.objects;
    // Keys are "ns/name" in order, so one namespace is one contiguous range.
    const std::string prefix = r.namespaced && !ns.empty() ? ns + "/" : "";
    auto it = start_after.empty() ? objects.lower_bound(prefix) : objects.upper_bound(start_after);
    // The scan stops at the first match past the page: that is enough to know there is more.
    // (remainingItemCount, optional in the API, is not given: counting the rest of a large
    // list on every page made paging quadratic.)
    const bool selective = !options.label_selector.empty() || !options.field_selector.empty();
    bool more = false;
    std::string last;
    static const json kNoLabels = json::object();
    for (; it != objects.end(); ++it) {
      if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
      const json& obj = it->second;
      if (selective) {
        const json* obj_labels = &kNoLabels;
        if (auto meta = obj.find("metadata"); meta != obj.end() && meta->is_object()) {
          if (auto l = meta->find("labels"); l != meta->end()) obj_labels = &*l;
        }
        if (!labels->matches(*obj_labels)) continue;
        if (!fields->matches(obj)) continue;
      }
      if (options.limit > 0 && static_cast<std::int64_t>(items.size()) >= options.limit) {
        more = true;
        break;
      }
      items.push_back(obj);
      last = it->first;
    }
    if (more) {
      list_meta["continue"] = toHex(std::to_string(list_rv) + "/" + last);
    }
  }
  Reply reply{.code = 200,
              .body = {{"kind", r.kind + "List"},
                       {"apiVersion", r.apiVersion()},
                       {"metadata", std::move(list_meta)}}};
  reply.body["items"] = std::move(items);  // moved: an initializer list would copy every item
  return reply;
}

Reply Store::update(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    json object, std::string_view subresource) {
  if (!object.is_object()) return statusReply(400, "BadRequest", "the body must be a JSON object");
  std::lock_guard lock(mu_);
  return updateLocked(r, ns, name, std::move(object), subresource, true);
}

Reply Store::updateLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                          json object, std::string_view subresource, bool check_version) {
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
  if (subresource == "status") {
    // Only status changes through the status subresource.
    next = old;
    if (object.contains("status")) {
      next["status"] = object["status"];
    } else {
      next.erase("status");
    }
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
    if (specOf(next) != specOf(old)) m["generation"] = metaInt(old, "generation", 0) + 1;
  }
  next["apiVersion"] = r.apiVersion();
  next["kind"] = r.kind;
  if (next == old) {
    // A no-op write does not bump resourceVersion or notify watchers (as the API server).
    return Reply{.code = 200, .body = old};
  }
  json stored = commitLocked(r, "MODIFIED", std::move(next), std::move(old));
  if (stored["metadata"].contains("deletionTimestamp") && !hasFinalizers(stored) &&
      (!isPod(r) || metaInt(stored, "deletionGracePeriodSeconds", 0) == 0)) {
    finishDeletionLocked(r, stored);
  }
  return Reply{.code = 200, .body = stored};
}

Reply Store::patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
                   std::string_view content_type, std::string_view body,
                   std::string_view subresource) {
  json patch_doc = json::parse(body, nullptr, false);
  if (patch_doc.is_discarded()) {
    return statusReply(400, "BadRequest", "error decoding patch: invalid JSON");
  }
  std::lock_guard lock(mu_);
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return notFound(r, name);
  json patched;
  std::string type(content_type.substr(0, content_type.find(';')));
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
    if (!r.group.empty() && r.group.find(".k8s.io") == std::string::npos && r.group != "apps" &&
        r.group != "policy") {
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
                       "application/strategic-merge-patch+json");
  }
  if (!patched.is_object()) return statusReply(422, "Invalid", "patched object is not an object");
  if (str(patched, {"metadata", "resourceVersion"}) !=
      str(*current, {"metadata", "resourceVersion"})) {
    // A resourceVersion in the patch is a precondition.
    return conflictModified(r, name);
  }
  return updateLocked(r, ns, name, std::move(patched), subresource, false);
}

Reply Store::remove(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    const DeleteOptions& options) {
  std::lock_guard lock(mu_);
  const json* current = findLocked(r, ns, name);
  if (current == nullptr) return notFound(r, name);
  return deleteLocked(r, *current, options);
}

Reply Store::deleteLocked(const ResourceInfo& r, const json& current_ref,
                          const DeleteOptions& options) {
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
  if (grace == 0 && !hasFinalizers(current)) {
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

Reply Store::getScale(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  const json* obj = findLocked(r, ns, name);
  if (obj == nullptr) return notFound(r, name);
  std::string selector;
  const json& match =
      (*obj)["spec"].value("selector", json::object()).value("matchLabels", json::object());
  for (auto it = match.begin(); it != match.end(); ++it) {
    if (!selector.empty()) selector += ",";
    selector += it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  json meta = {{"name", name},
               {"namespace", ns},
               {"uid", str(*obj, {"metadata", "uid"})},
               {"resourceVersion", str(*obj, {"metadata", "resourceVersion"})},
               {"creationTimestamp", str(*obj, {"metadata", "creationTimestamp"})}};
  return Reply{.code = 200,
               .body = {{"kind", "Scale"},
                        {"apiVersion", "autoscaling/v1"},
                        {"metadata", meta},
                        {"spec", {{"replicas", (*obj)["spec"].value("replicas", 1)}}},
                        {"status",
                         {{"replicas", obj->value("status", json::object()).value("replicas", 0)},
                          {"selector", selector}}}}};
}

Reply Store::updateScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                         const json& scale) {
  if (!scale.is_object() || !scale.contains("spec") || !scale["spec"].is_object() ||
      !scale["spec"].value("replicas", json()).is_number_integer()) {
    return statusReply(422, "Invalid", "Scale is invalid: spec.replicas: Required value", name, &r);
  }
  {
    std::lock_guard lock(mu_);
    const json* obj = findLocked(r, ns, name);
    if (obj == nullptr) return notFound(r, name);
    std::string rv = str(scale, {"metadata", "resourceVersion"});
    if (!rv.empty() && rv != str(*obj, {"metadata", "resourceVersion"})) {
      return conflictModified(r, name);
    }
    json next = *obj;
    next["spec"]["replicas"] = scale["spec"]["replicas"];
    Reply written = updateLocked(r, ns, name, std::move(next), "", false);
    if (written.code >= 300) return written;
  }
  return getScale(r, ns, name);
}

Reply Store::patchScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                        std::string_view content_type, std::string_view body) {
  Reply scale = getScale(r, ns, name);
  if (scale.code != 200) return scale;
  json patch_doc = json::parse(body, nullptr, false);
  if (patch_doc.is_discarded()) return statusReply(400, "BadRequest", "invalid JSON patch");
  std::string type(content_type.substr(0, content_type.find(';')));
  try {
    if (type == "application/json-patch+json") {
      scale.body = scale.body.patch(patch_doc);
    } else if (type == "application/strategic-merge-patch+json") {
      auto merged = strategicMergePatch(scale.body, patch_doc);
      if (!merged) return statusReply(400, "BadRequest", merged.error().message());
      scale.body = *merged;
    } else {
      scale.body.merge_patch(patch_doc);
    }
  } catch (const json::exception& e) {
    return statusReply(422, "Invalid", e.what(), name, &r);
  }
  return updateScale(r, ns, name, scale.body);
}

Reply Store::evict(const std::string& ns, const std::string& name, const json& eviction) {
  std::optional<ResourceInfo> pods = findResource("", "v1", "pods");
  std::lock_guard lock(mu_);
  const json* pod = findLocked(*pods, ns, name);
  if (pod == nullptr) return notFound(*pods, name);
  // A PodDisruptionBudget whose selector matches the pod and whose status says no disruption
  // is allowed blocks the eviction (429), as the eviction subresource does.
  auto pdbs = data_.find("policy/v1/poddisruptionbudgets");
  if (pdbs != data_.end() &&
      !pod->value("metadata", json::object()).contains("deletionTimestamp")) {
    for (const auto& [key, pdb] : pdbs->second.objects) {
      if (str(pdb, {"metadata", "namespace"}) != ns) continue;
      const json& match = pdb.value("spec", json::object())
                              .value("selector", json::object())
                              .value("matchLabels", json::object());
      std::string text;
      for (auto it = match.begin(); it != match.end(); ++it) {
        if (!text.empty()) text += ",";
        text += it.key() + "=" + (it->is_string() ? it->get<std::string>() : "");
      }
      auto sel = LabelSelector::parse(text);
      if (!sel || !sel->matches((*pod)["metadata"].value("labels", json()))) continue;
      const json& status = pdb.value("status", json::object());
      if (status.value("disruptionsAllowed", std::int64_t{1}) <= 0) {
        Reply reply = statusReply(429, "TooManyRequests",
                                  "Cannot evict pod as it would violate the pod's disruption "
                                  "budget.");
        reply.body["details"] = {
            {"causes",
             {{{"reason", "DisruptionBudget"},
               {"message",
                "The disruption budget " + str(pdb, {"metadata", "name"}) + " needs " +
                    std::to_string(status.value("desiredHealthy", 0)) + " healthy pods and has " +
                    std::to_string(status.value("currentHealthy", 0)) + " currently"}}}}};
        return reply;
      }
    }
  }
  DeleteOptions options;
  const json& del =
      eviction.is_object() ? eviction.value("deleteOptions", json::object()) : json::object();
  if (del.contains("gracePeriodSeconds") && del["gracePeriodSeconds"].is_number_integer()) {
    options.grace_period_seconds = del["gracePeriodSeconds"].get<std::int64_t>();
  }
  Reply deleted = deleteLocked(*pods, *pod, options);
  if (deleted.code >= 300) return deleted;
  return Reply{.code = 201,
               .body = {{"kind", "Status"},
                        {"apiVersion", "v1"},
                        {"metadata", json::object()},
                        {"status", "Success"},
                        {"code", 201}}};
}

base::Result<json> Store::put(json object) {
  if (!object.is_object()) {
    return base::Error("object is not a JSON object", base::ErrorCode::kInvalidArgument);
  }
  auto r = resourceForObject(object);
  EKCO_TRY(r);
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
  if (!meta.contains("generation")) meta["generation"] = 1;
  const json* current = findLocked(*r, str(object, {"metadata", "namespace"}), name);
  json old = current == nullptr ? json() : *current;
  return commitLocked(*r, current == nullptr ? "ADDED" : "MODIFIED", std::move(object),
                      std::move(old));
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

void Store::kubeletPass() {
  std::lock_guard lock(mu_);
  auto pods_it = resources_.find("/v1/pods");
  if (pods_it == resources_.end()) return;
  const ResourceInfo pods = pods_it->second;
  const auto& nodes = data_["/v1/nodes"].objects;
  std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  std::vector<json> due;
  const auto& all_pods = data_["/v1/pods"].objects;
  for (const std::string& key : terminating_pods_) {
    auto found = all_pods.find(key);
    if (found == all_pods.end()) continue;
    const json& pod = found->second;
    std::string deletion = str(pod, {"metadata", "deletionTimestamp"});
    if (deletion.empty()) continue;
    auto when = parseTime(deletion);
    if (when && *when > now) continue;
    // Only a kubelet that is running (its node Ready=True) confirms the deletion.
    auto node = nodes.find(objectKey("", pod["spec"].value("nodeName", "")));
    if (node == nodes.end()) continue;
    bool ready = false;
    for (const json& c :
         node->second.value("status", json::object()).value("conditions", json::array())) {
      if (c.value("type", "") == "Ready" && c.value("status", "") == "True") ready = true;
    }
    if (ready) due.push_back(pod);
  }
  for (json& pod : due) {
    if (hasFinalizers(pod)) {
      if (metaInt(pod, "deletionGracePeriodSeconds", 0) != 0) {
        json old = pod;
        pod["metadata"]["deletionGracePeriodSeconds"] = 0;
        commitLocked(pods, "MODIFIED", std::move(pod), std::move(old));
      }
    } else {
      finishDeletionLocked(pods, pod);
    }
  }
}

}  // namespace ekco::kubesim
