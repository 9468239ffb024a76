// Informers: a local cache of one resource kept current by list-then-watch, the way client-go's
// reflector does it, holding slim records (kube/decode/records.h) instead of whole objects.
//
//   Informer<PodRecord> pods(client, clock, resources::kPods, "",
//                            {.field_selector = "spec.nodeName=" + node}, projectPod,
//                            {.on_add = ..., .on_update = ..., .on_delete = ...});
//   std::thread t = base::startThread("pods", [&] { pods.run(); });
//   pods.waitForSync(10s);  ... pods.get("kube-system", "etcd-a") ...  pods.stop();
//
// The loop (run()):
//   1. List in pages of `page_size` (bounded memory: each page is projected and freed before
//      the next is fetched), into a new store that replaces the old one at the end. Handlers
//      see the difference: on_add for new keys, on_update for changed records, on_delete for
//      keys that are gone. An expired continue token restarts the list.
//   2. Watch from the list's resourceVersion with allowWatchBookmarks; every event and
//      bookmark advances the version. The server ends each watch after a timeout spread over
//      [watch_timeout, 2*watch_timeout) so that many agents do not reconnect in step; the
//      informer then watches again from the last version, without listing.
//   3. 410 Gone (the version was compacted away): list again at once (step 1).
//   4. Any other failure (API unreachable, 5xx, a dropped stream, a stream silent for longer
//      than watch_idle_timeout, a malformed event): report it
//      through on_error, wait with jittered exponential backoff (initial_backoff doubling up to
//      max_backoff, each wait uniform in [d/2, d]), and watch again from the last version — or
//      list again if no list has succeeded yet. A watch that ends within short_watch without a
//      single event counts as a failure too, so a server that closes streams at once is not
//      hammered.
//
// Lists and watch events are read from the server's JSON text with simdjson
// (kube/watch/list_decode.h), never as a whole DOM: a record type with a text decoder (decodeNode,
// decodePod) is decoded straight from each object's text; any other (a Projection over
// nlohmann::json) gets each object parsed on its own, which is fine for the small ones that use it.
// The page's text and the parsers' buffers are freed when a list ends.
//
// Records are compared with ==: a MODIFIED event whose record equals the cached one (the change
// was in a field ekco does not keep, such as a heartbeat) updates nothing and calls no handler.
// An object the projection rejects (malformed) is reported through on_error and skipped; the
// informer never crashes on server data.
//
// Threads: run() on one thread (once); stop(), get/list/forEach/size/stats and waitForSync from
// any thread. Handlers run on the run() thread after the store is updated, with no lock held:
// they may read the informer, and should be quick (enqueue work, do not do it). Call stop() and
// join the run() thread before destroying an informer.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "kube/client.h"
#include "kube/decode/json_text.h"
#include "kube/resource.h"
#include "kube/transport/cancel_token.h"
#include "kube/watch/list_decode.h"

namespace ekco::kube {

struct InformerOptions {
  std::string label_selector{};
  std::string field_selector{};
  std::int64_t page_size = 500;  // 0: one unpaged list
  std::chrono::milliseconds initial_backoff{800};
  std::chrono::milliseconds max_backoff{30000};
  std::chrono::seconds watch_timeout{300};
  // A watch with no byte for this long (not even a bookmark; kube-apiserver sends one about
  // every minute) has silently stalled: it is a failure (connected turns false, readiness
  // follows) and the informer watches again from its last version.
  std::chrono::milliseconds watch_idle_timeout{std::chrono::seconds(90)};
  std::chrono::milliseconds short_watch{1000};
  // Called before each backoff wait with the count of consecutive failures it is for and the
  // wait chosen (tests, diagnostics).
  std::function<void(int failures, std::chrono::milliseconds wait)> on_backoff{};
};

struct InformerStats {
  bool synced = false;  // a list has completed; the cache is usable
  // The last list succeeded or the last watch was accepted (and has not failed since).
  bool connected = false;
  std::string resource_version{};
  std::size_t objects = 0;
  std::uint64_t lists = 0;         // completed lists (the first and every re-list)
  std::uint64_t relists_gone = 0;  // re-lists caused by 410 Gone
  std::uint64_t watches = 0;       // watch requests made
  std::uint64_t failures = 0;      // failed lists and watches
  std::uint64_t events = 0;        // ADDED/MODIFIED/DELETED events received
  std::uint64_t bookmarks = 0;
  std::uint64_t unchanged = 0;     // MODIFIED events that changed no kept field
  std::uint64_t parse_errors = 0;  // objects the projection rejected
  std::optional<base::WallTime> last_sync = std::nullopt;   // end of the last list
  std::optional<base::WallTime> last_event = std::nullopt;  // last event or bookmark
  std::string last_error{};
  std::optional<base::WallTime> last_error_time = std::nullopt;
};

// "ns/name" for namespaced objects, "name" for cluster-scoped ones.
std::string objectKey(std::string_view ns, std::string_view name);
// The key of a JSON object from its metadata; kParse when metadata.name is missing.
base::Result<std::string> objectKey(const Json& object);
// For the DOM path: an object's text parsed with nlohmann (depth-checked,
// kube/decode/json_depth.h), its key and metadata into `meta`. kParse when it is not JSON or has no
// metadata.name.
base::Result<Json> parseObjectText(JsonText object, ObjectMeta& meta, std::string& key);

class InformerBase {
 public:
  using ErrorHandler = std::function<void(const base::Error&)>;

  virtual ~InformerBase() = default;
  InformerBase(const InformerBase&) = delete;
  InformerBase& operator=(const InformerBase&) = delete;

  // Lists and watches until stop(). Call once.
  void run();
  // Ends run() promptly (an open watch is cancelled, a backoff wait cut short). Idempotent;
  // may precede run(), which then returns at once.
  void stop();
  // True once the first list has completed; false on timeout or when stopped before that.
  bool waitForSync(std::chrono::milliseconds timeout) const;
  bool synced() const;
  InformerStats stats() const;
  // "pods in all namespaces", "nodes", "leases in kurl"; errors start with it.
  const std::string& description() const { return description_; }
  virtual std::size_t size() const = 0;

 protected:
  InformerBase(KubeClient& client, const base::Clock& clock, Resource resource, std::string ns,
               InformerOptions options, ErrorHandler on_error);

  // Hooks for the typed store, all called on the run() thread.
  virtual void beginReplace() = 0;
  // Adds one listed object (its text) to the new store; an error (malformed object) skips it.
  virtual base::Status addToReplace(JsonText object) = 0;
  virtual void abortReplace() = 0;
  // Swaps the new store in and calls the handlers for the difference.
  virtual void commitReplace() = 0;
  // The list is done and synced() is true (InformerHandlers::on_synced).
  virtual void notifySynced() = 0;
  // Applies one watch event (never a bookmark) and calls its handler. `changed` is set false
  // when a MODIFIED event left the record as it was. `meta` gets the object's metadata, also
  // when the object is rejected.
  virtual base::Status apply(WatchEventType type, JsonText object, ObjectMeta& meta,
                             bool& changed) = 0;

 private:
  enum class ListOutcome { kDone, kFailed, kStopped };
  ListOutcome list();
  // Adds a page's items to the replacement; a malformed one is counted and reported, never
  // fatal.
  void addPageItems(const std::vector<JsonText>& items);
  // One watch from the last version; `events_seen` counts what it delivered, `accepted` says
  // whether the server answered 2xx.
  base::Status watchOnce(std::uint64_t& events_seen, bool& accepted);
  void failed(const base::Error& error);
  // Sleeps the backoff for the n-th consecutive failure; false when stopped meanwhile.
  bool backoff(int failures);
  bool stopping() const { return stopping_.load(); }

  KubeClient& client_;
  const base::Clock& clock_;
  Resource resource_;
  std::string ns_;
  InformerOptions options_;
  ErrorHandler on_error_;
  std::string description_;

  std::atomic<bool> stopping_{false};
  CancelToken cancel_;
  std::mt19937_64 random_;
  JsonDecoder decoder_;  // run() thread only

  mutable std::mutex mu_;  // stats_, and the waits below
  mutable std::condition_variable cv_;
  InformerStats stats_{};
};

template <typename Record>
struct InformerHandlers {
  std::function<void(const Record& added)> on_add{};
  std::function<void(const Record& before, const Record& after)> on_update{};
  // With the object's last state: from the DELETED event, or the cache after a re-list.
  std::function<void(const Record& last)> on_delete{};
  std::function<void(const base::Error& error)> on_error{};
  // After each list has replaced the cache, once synced() is true. on_add runs before that
  // (the records are in, the list is not marked done yet), so whoever a handler woke may have
  // found the cache unsynced: this is its signal to look again.
  std::function<void()> on_synced{};
};

template <typename Record>
class Informer final : public InformerBase {
 public:
  using Projection = std::function<base::Result<Record>(const Json& object)>;
  // Decodes an object's text into the record and its metadata (decodeNode, decodePod); an
  // object without metadata.name is an error with meta.name empty.
  using Decoder = base::Result<Record> (*)(JsonText object, ObjectMeta& meta);

  // `ns` "" watches every namespace (or a cluster-scoped resource).
  Informer(KubeClient& client, const base::Clock& clock, Resource resource, std::string ns,
           InformerOptions options, Projection project, InformerHandlers<Record> handlers = {})
      : InformerBase(client, clock, std::move(resource), std::move(ns), std::move(options),
                     handlers.on_error),
        project_(std::move(project)),
        handlers_(std::move(handlers)) {}
  Informer(KubeClient& client, const base::Clock& clock, Resource resource, std::string ns,
           InformerOptions options, Decoder decoder, InformerHandlers<Record> handlers = {})
      : InformerBase(client, clock, std::move(resource), std::move(ns), std::move(options),
                     handlers.on_error),
        decode_(decoder),
        handlers_(std::move(handlers)) {}

  // A copy of the cached record; ns "" for cluster-scoped objects.
  std::optional<Record> get(std::string_view ns, std::string_view name) const {
    std::shared_lock lock(store_mu_);
    auto it = store_.find(objectKey(ns, name));
    if (it == store_.end()) return std::nullopt;
    return it->second;
  }

  // Copies of every cached record, in no particular order.
  std::vector<Record> list() const {
    std::shared_lock lock(store_mu_);
    std::vector<Record> out;
    out.reserve(store_.size());
    for (const auto& [key, record] : store_) out.push_back(record);
    return out;
  }

  // Calls f(const Record&) for each record under the read lock: no copies, but f must not
  // block or call into this informer's writers.
  template <typename F>
  void forEach(F&& f) const {
    std::shared_lock lock(store_mu_);
    for (const auto& [key, record] : store_) f(record);
  }

  std::size_t size() const override {
    std::shared_lock lock(store_mu_);
    return store_.size();
  }

 private:
  using Store = std::unordered_map<std::string, Record>;

  void beginReplace() override { next_ = Store(); }

  // The record, with `key` set when the object has a name (even when the record is rejected).
  base::Result<Record> decodeObject(JsonText object, ObjectMeta& meta, std::string& key) {
    key.clear();
    if (decode_ != nullptr) {
      auto record = decode_(object, meta);
      if (!meta.name.empty()) key = objectKey(meta.ns, meta.name);
      return record;
    }
    auto json = parseObjectText(object, meta, key);
    if (!json) return std::move(json).error();
    return project_(*json);
  }

  base::Status addToReplace(JsonText object) override {
    ObjectMeta meta;
    std::string key;
    auto record = decodeObject(object, meta, key);
    if (!record) return std::move(record).error();
    next_.insert_or_assign(std::move(key), std::move(*record));
    return base::ok();
  }

  void abortReplace() override { next_ = Store(); }

  void notifySynced() override {
    if (handlers_.on_synced) handlers_.on_synced();
  }

  void commitReplace() override {
    Store old;
    {
      std::unique_lock lock(store_mu_);
      old = std::exchange(store_, std::move(next_));
    }
    next_ = Store();
    // store_ is only written on this thread, so reading it unlocked here is safe.
    for (const auto& [key, record] : store_) {
      auto it = old.find(key);
      if (it == old.end()) {
        if (handlers_.on_add) handlers_.on_add(record);
      } else {
        if (!(it->second == record) && handlers_.on_update) handlers_.on_update(it->second, record);
        old.erase(it);
      }
    }
    if (handlers_.on_delete) {
      for (const auto& [key, record] : old) handlers_.on_delete(record);
    }
  }

  base::Status apply(WatchEventType type, JsonText object, ObjectMeta& meta,
                     bool& changed) override {
    changed = true;
    std::string key;
    auto record = decodeObject(object, meta, key);
    if (key.empty()) return std::move(record).error();  // no name: nothing to apply it to
    if (type == WatchEventType::kDeleted) {
      std::optional<Record> last;
      {
        std::unique_lock lock(store_mu_);
        auto it = store_.find(key);
        if (it != store_.end()) {
          last = std::move(it->second);
          store_.erase(it);
        }
      }
      if (record) last = std::move(*record);
      if (last && handlers_.on_delete) handlers_.on_delete(*last);
      if (!record) return std::move(record).error();
      return base::ok();
    }
    if (!record) return std::move(record).error();
    std::optional<Record> before;
    {
      std::unique_lock lock(store_mu_);
      auto it = store_.find(key);
      if (it != store_.end()) {
        if (it->second == *record) {
          changed = false;
          return base::ok();
        }
        before = std::exchange(it->second, *record);
      } else {
        store_.emplace(std::move(key), *record);
      }
    }
    if (before) {
      if (handlers_.on_update) handlers_.on_update(*before, *record);
    } else if (handlers_.on_add) {
      handlers_.on_add(*record);
    }
    return base::ok();
  }

  Projection project_;
  Decoder decode_ = nullptr;
  InformerHandlers<Record> handlers_;
  mutable std::shared_mutex store_mu_;
  Store store_;
  Store next_;  // being listed; run() thread only
};

}  // namespace ekco::kube
