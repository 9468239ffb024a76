// An in-memory Kubernetes API for unit tests: a KubeClient over a store of JSON objects with the
// API's semantics for what ekco relies on, plus knobs to script what a store cannot show.
//
// The store: objects keyed by resource, namespace (ignored for cluster-scoped resources) and
// name. Every write takes the next resourceVersion (one counter for the whole store, as etcd
// has); an update or patch naming a stale metadata.resourceVersion is kConflict; create of an
// existing name is kAlreadyExists; get/update/patch/remove/evict of an absent one kNotFound;
// remove checks the uid and resourceVersion preconditions (kConflict). A delete removes the
// object at once whatever the grace period (there is no kubelet); an eviction deletes the pod.
// Merge and strategic-merge patches are both applied as RFC 7386 merge patches; a JSON patch
// whose "test" fails is kInvalidArgument (the API's 422). Updates of subresource "status" keep
// all but status, of "approval" (CertificateSigningRequests) all but status.conditions. recordEvent
// stores a core/v1 Event and keeps the EventSpec. Watches stream the store's changes after the
// requested resourceVersion
// ("" or "0": the current objects first, as ADDED) until the handler returns false or the
// CancelToken is cancelled (kCancelled); without a token the stream ends (ok) once it has caught
// up. Lists return every matching object in one page; label and field selectors are not
// supported (kInvalidArgument), so a test that needs them runs against ekco-kubesim.
//
// The knobs: `unavailable` (every call fails as if the API were down), inject() (the next n calls
// of a verb, optionally for one resource, fail with a given error), `lost_update_answers`
// (updates applied but answered kConflict, as when a PUT's answer is lost and the retry finds
// the version it wrote), scripted list answers and watch streams (answered before the store is
// asked), hooks after a call and before a delete, and a record of every call. Error messages
// read like RestClient's: `get leases/x: leases.coordination.k8s.io "x" not found (NotFound,
// 404)`. Thread-safe; hooks run with no lock held, so they may call the fake.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kube/client.h"

namespace ekco::kube::testing {

enum class Verb { kGet, kList, kCreate, kUpdate, kPatch, kDelete, kEvict, kEvent, kWatch };

inline std::string_view verbName(Verb verb) {
  switch (verb) {
    case Verb::kGet:
      return "get";
    case Verb::kList:
      return "list";
    case Verb::kCreate:
      return "create";
    case Verb::kUpdate:
      return "update";
    case Verb::kPatch:
      return "patch";
    case Verb::kDelete:
      return "delete";
    case Verb::kEvict:
      return "evict";
    case Verb::kEvent:
      return "create event";
    case Verb::kWatch:
      return "watch";
  }
  return "?";
}

// One call as the fake received it.
struct Call {
  Verb verb = Verb::kGet;
  Resource resource{};
  std::string ns{};
  std::string name{};
  std::string subresource{};
  ListOptions list_options{};
  WatchOptions watch_options{};
  DeleteOptions delete_options{};
};

// The next `times` calls of `verb` (on `plural` when set) fail with `error`; times < 0: every
// call until clearFaults().
struct Fault {
  Verb verb = Verb::kGet;
  base::Error error{};
  int times = 1;
  std::string plural{};
};

// One scripted watch stream: these events, then this end.
struct WatchScript {
  std::vector<WatchEvent> events{};
  base::Status end = base::ok();
  // The server answered 2xx (WatchOptions::on_open is called before the events), as a real
  // watch that is accepted and then breaks; implied when events are scripted.
  bool accepted = false;
  // Runs after the events, before the end is returned (a test advances its clock: the watch
  // "ran" that long).
  std::function<void()> before_end{};
};

class FakeKube final : public KubeClient {
 public:
  // --- knobs -------------------------------------------------------------------------------

  // Every call fails with kUnavailable ("<verb> <plural>/<name>: connection refused
  // (transport)") while set.
  std::atomic<bool> unavailable{false};
  // The next n updates are applied but answered kConflict.
  std::atomic<int> lost_update_answers{0};
  // Runs with the object about to be deleted (remove or evict), after its preconditions passed.
  std::function<void(const Json& object)> before_delete{};

  void inject(Fault fault) {
    std::lock_guard lock(mu_);
    faults_.push_back(std::move(fault));
  }
  void clearFaults() {
    std::lock_guard lock(mu_);
    faults_.clear();
  }
  // Runs `hook` once, after the next call of `verb` has been answered.
  void afterNext(Verb verb, std::function<void()> hook) {
    std::lock_guard lock(mu_);
    after_next_.emplace_back(verb, std::move(hook));
  }
  // The next list() answers this instead of the store (in order, one per call).
  void scriptList(base::Result<Json> answer) {
    std::lock_guard lock(mu_);
    list_scripts_.push_back(std::move(answer));
  }
  // The next watch() streams this instead of the store (in order, one per call).
  void scriptWatch(WatchScript script) {
    std::lock_guard lock(mu_);
    watch_scripts_.push_back(std::move(script));
  }

  // --- the store, directly (as kubectl would have it) -----------------------------------------

  // Creates or replaces the object (namespace from its metadata) with the next resourceVersion;
  // returns it as stored.
  Json put(const Resource& resource, Json object) {
    std::lock_guard lock(mu_);
    const std::string ns = object["metadata"].value("namespace", "");
    const std::string name = object["metadata"].value("name", "");
    return storeLocked(resource, ns, name, std::move(object));
  }
  // Stores `object` exactly as given (garbage included), with no resourceVersion of its own.
  void putRaw(const Resource& resource, std::string_view ns, std::string_view name, Json object) {
    std::lock_guard lock(mu_);
    objects_[key(resource, ns, name)] = std::move(object);
  }
  std::optional<Json> object(const Resource& resource, std::string_view ns,
                             std::string_view name) const {
    std::lock_guard lock(mu_);
    auto it = objects_.find(key(resource, ns, name));
    if (it == objects_.end()) return std::nullopt;
    return it->second;
  }
  // The objects of a resource in ns ("" for all namespaces), in namespace/name order.
  std::vector<Json> objects(const Resource& resource, std::string_view ns = {}) const {
    std::lock_guard lock(mu_);
    std::vector<Json> out;
    for (const auto& [k, o] : objects_) {
      if (matches(k, resource, ns)) out.push_back(o);
    }
    return out;
  }
  void erase(const Resource& resource, std::string_view ns, std::string_view name) {
    std::lock_guard lock(mu_);
    eraseLocked(key(resource, ns, name));
  }
  std::int64_t resourceVersion() const {
    std::lock_guard lock(mu_);
    return version_;
  }

  // --- what happened -------------------------------------------------------------------------

  std::vector<Call> calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  std::vector<Call> calls(Verb verb) const {
    std::lock_guard lock(mu_);
    std::vector<Call> out;
    for (const auto& c : calls_) {
      if (c.verb == verb) out.push_back(c);
    }
    return out;
  }
  int count(Verb verb) const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const auto& c : calls_) n += c.verb == verb ? 1 : 0;
    return n;
  }
  int callCount() const {
    std::lock_guard lock(mu_);
    return static_cast<int>(calls_.size());
  }
  // The objects removed (by remove or evict), as "ns/name" or "name", in order.
  std::vector<std::string> deleted() const {
    std::lock_guard lock(mu_);
    return deleted_;
  }
  std::vector<EventSpec> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  // Waits until a watch is waiting for changes with nothing left to send (the scripts and the
  // store's changes are used up).
  bool waitIdle(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return idle_watchers_ > 0; });
  }

  // --- KubeClient ----------------------------------------------------------------------------

  base::Result<Json> get(const Resource& resource, std::string_view ns, std::string_view name,
                         std::string_view subresource = {}) override {
    Call call{.verb = Verb::kGet,
              .resource = resource,
              .ns = std::string(ns),
              .name = std::string(name),
              .subresource = std::string(subresource)};
    auto answer = [&]() -> base::Result<Json> {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      auto it = objects_.find(key(resource, ns, name));
      if (it == objects_.end()) return notFound(call);
      return it->second;
    }();
    runAfter(Verb::kGet);
    return answer;
  }

  base::Result<Json> list(const Resource& resource, std::string_view ns,
                          const ListOptions& options = {}) override {
    Call call{
        .verb = Verb::kList, .resource = resource, .ns = std::string(ns), .list_options = options};
    auto answer = [&]() -> base::Result<Json> {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      if (!list_scripts_.empty()) {
        auto next = std::move(list_scripts_.front());
        list_scripts_.pop_front();
        return next;
      }
      if (!options.label_selector.empty() || !options.field_selector.empty()) {
        return base::Error(op(call) + ": selectors are not supported by FakeKube",
                           base::ErrorCode::kInvalidArgument);
      }
      Json items = Json::array();
      for (const auto& [k, o] : objects_) {
        if (matches(k, resource, ns)) items.push_back(o);
      }
      return Json{{"apiVersion", resource.apiVersion()},
                  {"kind", resource.kind + "List"},
                  {"metadata", {{"resourceVersion", std::to_string(version_)}}},
                  {"items", std::move(items)}};
    }();
    runAfter(Verb::kList);
    return answer;
  }

  base::Result<Json> create(const Resource& resource, std::string_view ns,
                            const Json& object) override {
    Call call{
        .verb = Verb::kCreate, .resource = resource, .ns = std::string(ns), .name = nameOf(object)};
    auto answer = [&]() -> base::Result<Json> {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      if (!object.is_object() || call.name.empty()) {
        return base::Error(op(call) + ": metadata.name is required (Invalid, 422)",
                           base::ErrorCode::kInvalidArgument);
      }
      Json stored = object;
      if (resource.namespaced) {
        const Json& meta = stored["metadata"];
        if (meta.contains("namespace") && meta["namespace"] != ns) {
          return base::Error(op(call) +
                                 ": the namespace of the object does not match the "
                                 "namespace on the request (BadRequest, 400)",
                             base::ErrorCode::kInvalidArgument);
        }
        stored["metadata"]["namespace"] = ns;
      }
      if (objects_.count(key(resource, ns, call.name)) != 0) {
        return base::Error(op(call) + ": " + qualified(resource) + " \"" + call.name +
                               "\" already exists (AlreadyExists, 409)",
                           base::ErrorCode::kAlreadyExists);
      }
      if (!stored["metadata"].contains("uid")) {
        stored["metadata"]["uid"] = "uid-" + std::to_string(version_ + 1);
      }
      return storeLocked(resource, ns, call.name, std::move(stored));
    }();
    runAfter(Verb::kCreate);
    return answer;
  }

  base::Result<Json> update(const Resource& resource, std::string_view ns, const Json& object,
                            std::string_view subresource = {}) override {
    Call call{.verb = Verb::kUpdate,
              .resource = resource,
              .ns = std::string(ns),
              .name = nameOf(object),
              .subresource = std::string(subresource)};
    auto answer = [&]() -> base::Result<Json> {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      if (!subresource.empty() && subresource != "status" && subresource != "approval") {
        return unsupported(call);
      }
      auto it = objects_.find(key(resource, ns, call.name));
      if (it == objects_.end()) return notFound(call);
      const std::string rv = versionOf(object);
      if (!rv.empty() && rv != versionOf(it->second)) return conflict(call);
      Json stored = object;
      if (subresource == "status") {
        stored = it->second;
        stored["status"] = object.value("status", Json::object());
      } else if (subresource == "approval") {
        // A CertificateSigningRequest's approval: only status.conditions change, as
        // kube-apiserver's approval strategy keeps the spec and the certificate.
        stored = it->second;
        stored["status"]["conditions"] =
            object.value("status", Json::object()).value("conditions", Json::array());
      }
      stored = storeLocked(resource, ns, call.name, std::move(stored));
      if (lost_update_answers > 0) {
        --lost_update_answers;
        return conflict(call);
      }
      return stored;
    }();
    runAfter(Verb::kUpdate);
    return answer;
  }

  base::Result<Json> patch(const Resource& resource, std::string_view ns, std::string_view name,
                           PatchType type, const Json& patch,
                           std::string_view subresource = {}) override {
    Call call{.verb = Verb::kPatch,
              .resource = resource,
              .ns = std::string(ns),
              .name = std::string(name),
              .subresource = std::string(subresource)};
    auto answer = [&]() -> base::Result<Json> {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      if (!subresource.empty() && subresource != "status") return unsupported(call);
      auto it = objects_.find(key(resource, ns, name));
      if (it == objects_.end()) return notFound(call);
      auto patched = applyPatch(call, it->second, type, patch);
      if (!patched) return patched;
      if (subresource == "status") {
        Json status = (*patched).value("status", Json::object());
        patched = it->second;
        (*patched)["status"] = std::move(status);
      }
      return storeLocked(resource, ns, name, std::move(*patched));
    }();
    runAfter(Verb::kPatch);
    return answer;
  }

  base::Status remove(const Resource& resource, std::string_view ns, std::string_view name,
                      const DeleteOptions& options = {}) override {
    Call call{.verb = Verb::kDelete,
              .resource = resource,
              .ns = std::string(ns),
              .name = std::string(name),
              .delete_options = options};
    auto answer = deleteObject(call);
    runAfter(Verb::kDelete);
    return answer;
  }

  base::Status evict(std::string_view ns, std::string_view pod,
                     const DeleteOptions& options = {}) override {
    Call call{.verb = Verb::kEvict,
              .resource = resources::kPods,
              .ns = std::string(ns),
              .name = std::string(pod),
              .delete_options = options};
    auto answer = deleteObject(call);
    runAfter(Verb::kEvict);
    return answer;
  }

  base::Status recordEvent(const EventSpec& event) override {
    const std::string ns = event.involved_namespace.empty() ? "default" : event.involved_namespace;
    Call call{.verb = Verb::kEvent, .resource = resources::kEvents, .ns = ns};
    auto answer = [&]() -> base::Status {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      const std::string name = event.involved_name + "." + std::to_string(version_ + 1);
      Json object = {{"apiVersion", "v1"},
                     {"kind", "Event"},
                     {"metadata", {{"name", name}, {"namespace", ns}}},
                     {"involvedObject",
                      {{"apiVersion", event.involved_resource.apiVersion()},
                       {"kind", event.involved_resource.kind},
                       {"namespace", event.involved_namespace},
                       {"name", event.involved_name},
                       {"uid", event.involved_uid}}},
                     {"reason", event.reason},
                     {"message", event.message},
                     {"type", event.type},
                     {"source", {{"component", "ekco"}}},
                     {"count", 1}};
      storeLocked(resources::kEvents, ns, name, std::move(object));
      events_.push_back(event);
      return base::ok();
    }();
    runAfter(Verb::kEvent);
    return answer;
  }

  base::Status watch(const Resource& resource, std::string_view ns, const WatchOptions& options,
                     const WatchHandler& handler, CancelToken* cancel = nullptr) override {
    Call call{.verb = Verb::kWatch,
              .resource = resource,
              .ns = std::string(ns),
              .watch_options = options};
    std::optional<WatchScript> script;
    {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      if (!options.label_selector.empty() || !options.field_selector.empty()) {
        return base::Error(op(call) + ": selectors are not supported by FakeKube",
                           base::ErrorCode::kInvalidArgument);
      }
      if (!watch_scripts_.empty()) {
        script = std::move(watch_scripts_.front());
        watch_scripts_.pop_front();
      }
    }
    auto answer =
        script ? playWatch(*script, options, handler) : streamStore(call, options, handler, cancel);
    runAfter(Verb::kWatch);
    return answer;
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // group/plural, ns, name

  struct Change {
    Key key{};
    WatchEvent event{};
    std::int64_t version = 0;
  };

  static Key key(const Resource& resource, std::string_view ns, std::string_view name) {
    return {resource.group + "/" + resource.plural,
            resource.namespaced ? std::string(ns) : std::string(), std::string(name)};
  }
  static bool matches(const Key& k, const Resource& resource, std::string_view ns) {
    return std::get<0>(k) == resource.group + "/" + resource.plural &&
           (ns.empty() || !resource.namespaced || std::get<1>(k) == ns);
  }
  static std::string nameOf(const Json& object) {
    if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
      return {};
    }
    return object["metadata"].value("name", "");
  }
  static std::string versionOf(const Json& object) {
    if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
      return {};
    }
    const Json& meta = object["metadata"];
    auto it = meta.find("resourceVersion");
    return it != meta.end() && it->is_string() ? it->get<std::string>() : std::string();
  }
  static std::string qualified(const Resource& resource) {
    return resource.group.empty() ? resource.plural : resource.plural + "." + resource.group;
  }
  static std::string op(const Call& call) {
    std::string out = std::string(verbName(call.verb)) + " " + call.resource.plural;
    if (!call.name.empty()) out += "/" + call.name;
    if (!call.subresource.empty()) out += "/" + call.subresource;
    return out;
  }
  static base::Error notFound(const Call& call) {
    return base::Error(op(call) + ": " + qualified(call.resource) + " \"" + call.name +
                           "\" not found (NotFound, 404)",
                       base::ErrorCode::kNotFound);
  }
  static base::Error conflict(const Call& call) {
    return base::Error(op(call) + ": Operation cannot be fulfilled on " + qualified(call.resource) +
                           " \"" + call.name +
                           "\": the object has been modified; please apply your changes to the "
                           "latest version and try again (Conflict, 409)",
                       base::ErrorCode::kConflict);
  }
  static base::Error unsupported(const Call& call) {
    return base::Error(op(call) + ": not supported by FakeKube", base::ErrorCode::kInvalidArgument);
  }

  // Records the call and answers the error a knob asks for, if any.
  std::optional<base::Error> beginLocked(const Call& call) {
    calls_.push_back(call);
    if (unavailable) {
      return base::Error(op(call) + ": connection refused (transport)",
                         base::ErrorCode::kUnavailable);
    }
    for (auto it = faults_.begin(); it != faults_.end(); ++it) {
      if (it->verb != call.verb || (!it->plural.empty() && it->plural != call.resource.plural)) {
        continue;
      }
      base::Error error = it->error;
      if (it->times > 0 && --it->times == 0) faults_.erase(it);
      return error;
    }
    return std::nullopt;
  }
  void runAfter(Verb verb) {
    std::function<void()> hook;
    {
      std::lock_guard lock(mu_);
      for (auto it = after_next_.begin(); it != after_next_.end(); ++it) {
        if (it->first != verb) continue;
        hook = std::move(it->second);
        after_next_.erase(it);
        break;
      }
    }
    if (hook) hook();
  }

  // Stores the object under the next resourceVersion and records the change for watches.
  Json storeLocked(const Resource& resource, std::string_view ns, std::string_view name,
                   Json object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    const Key k = key(resource, ns, name);
    const bool existed = objects_.count(k) != 0;
    objects_[k] = object;
    changes_.push_back(
        {.key = k,
         .event = {.type = existed ? WatchEventType::kModified : WatchEventType::kAdded,
                   .object = object},
         .version = version_});
    cv_.notify_all();
    return object;
  }
  void eraseLocked(const Key& k) {
    auto it = objects_.find(k);
    if (it == objects_.end()) return;
    Json last = it->second;
    objects_.erase(it);
    ++version_;
    if (last.is_object()) last["metadata"]["resourceVersion"] = std::to_string(version_);
    changes_.push_back({.key = k,
                        .event = {.type = WatchEventType::kDeleted, .object = last},
                        .version = version_});
    deleted_.push_back(std::get<1>(k).empty() ? std::get<2>(k)
                                              : std::get<1>(k) + "/" + std::get<2>(k));
    cv_.notify_all();
  }

  base::Status deleteObject(const Call& call) {
    const Key k = key(call.resource, call.ns, call.name);
    Json object;
    {
      std::lock_guard lock(mu_);
      if (auto e = beginLocked(call)) return *e;
      auto it = objects_.find(k);
      if (it == objects_.end()) return notFound(call);
      const DeleteOptions& options = call.delete_options;
      const Json& meta = it->second["metadata"];
      if (!options.precondition_uid.empty() && meta.value("uid", "") != options.precondition_uid) {
        return base::Error(
            op(call) + ": Precondition failed: UID in precondition: " + options.precondition_uid +
                ", UID in object meta: " + meta.value("uid", "") + " (Conflict, 409)",
            base::ErrorCode::kConflict);
      }
      if (!options.precondition_resource_version.empty() &&
          versionOf(it->second) != options.precondition_resource_version) {
        return base::Error(op(call) + ": Precondition failed: ResourceVersion in precondition: " +
                               options.precondition_resource_version + " (Conflict, 409)",
                           base::ErrorCode::kConflict);
      }
      object = it->second;
    }
    if (before_delete) before_delete(object);
    std::lock_guard lock(mu_);
    eraseLocked(k);
    return base::ok();
  }

  base::Result<Json> applyPatch(const Call& call, const Json& stored, PatchType type,
                                const Json& patch) const {
    if (type == PatchType::kJson) {
      try {
        return stored.patch(patch);
      } catch (const nlohmann::json::exception& e) {
        return base::Error(op(call) + ": " + e.what() + " (Invalid, 422)",
                           base::ErrorCode::kInvalidArgument);
      }
    }
    const std::string rv = versionOf(patch);
    if (!rv.empty() && rv != versionOf(stored)) return conflict(call);
    Json patched = stored;
    patched.merge_patch(patch);
    return patched;
  }

  static base::Status playWatch(const WatchScript& script, const WatchOptions& options,
                                const WatchHandler& handler) {
    if ((script.accepted || !script.events.empty()) && options.on_open) options.on_open();
    for (const auto& e : script.events) {
      if (!handler(e)) return base::ok();
    }
    if (script.before_end) script.before_end();
    return script.end;
  }

  // The store's changes after options.resource_version (the current objects first for "" and
  // "0"), then waits for more until cancelled. The CancelToken's waker takes the token's lock
  // then mu_, so nothing here holds mu_ while asking the token.
  base::Status streamStore(const Call& call, const WatchOptions& options,
                           const WatchHandler& handler, CancelToken* cancel) {
    std::vector<WatchEvent> pending;
    std::int64_t from = 0;
    {
      std::lock_guard lock(mu_);
      const std::string& rv = options.resource_version;
      if (rv.empty() || rv == "0") {
        for (const auto& [k, o] : objects_) {
          if (matches(k, call.resource, call.ns)) {
            pending.push_back({.type = WatchEventType::kAdded, .object = o});
          }
        }
        from = version_;
      } else {
        try {
          from = std::stoll(rv);
        } catch (const std::exception&) {
          return base::Error(op(call) + ": invalid resourceVersion \"" + rv + "\" (Invalid, 422)",
                             base::ErrorCode::kInvalidArgument);
        }
      }
    }
    if (options.on_open) options.on_open();
    auto woken = std::make_shared<std::atomic<bool>>(false);
    if (cancel != nullptr) {
      cancel->setWaker([this, woken] {
        woken->store(true);
        std::lock_guard lock(mu_);
        cv_.notify_all();
      });
      if (cancel->cancelled()) woken->store(true);
    }
    const auto finish = [&](base::Status status) {
      if (cancel != nullptr) cancel->setWaker({});
      return status;
    };
    while (true) {
      for (const auto& e : pending) {
        if (!handler(e)) return finish(base::ok());
      }
      pending.clear();
      std::unique_lock lock(mu_);
      const auto collect = [&] {
        for (const auto& c : changes_) {
          if (c.version > from && matches(c.key, call.resource, call.ns)) {
            pending.push_back(c.event);
            from = c.version;
          }
        }
        return !pending.empty();
      };
      if (collect()) continue;
      if (cancel == nullptr) break;
      ++idle_watchers_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return woken->load() || collect(); });
      --idle_watchers_;
      if (pending.empty()) {
        lock.unlock();
        return finish(base::Error(op(call) + ": cancelled", base::ErrorCode::kCancelled));
      }
    }
    return finish(base::ok());
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Json> objects_;
  std::vector<Change> changes_;
  std::int64_t version_ = 100;
  std::vector<Call> calls_;
  std::vector<Fault> faults_;
  std::vector<std::pair<Verb, std::function<void()>>> after_next_;
  std::deque<base::Result<Json>> list_scripts_;
  std::deque<WatchScript> watch_scripts_;
  std::vector<std::string> deleted_;
  std::vector<EventSpec> events_;
  int idle_watchers_ = 0;
};

}  // namespace ekco::kube::testing
