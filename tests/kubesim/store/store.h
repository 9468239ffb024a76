// The object store behind the test API server: a resource registry (what discovery serves) and
// nlohmann::json objects keyed by resource, namespace and name, with Kubernetes semantics for
// every verb, a global resourceVersion counter and a bounded event history for watches.
//
// Thread-safe: one mutex around everything; watchers wait on a condition variable that every
// write signals.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::kubesim {

namespace managed {
struct Writer;
}
namespace webhooks {
struct Attributes;
struct Target;
}  // namespace webhooks

struct ResourceInfo {
  std::string group{};  // "" for the core group
  std::string version{};
  std::string plural{};  // "pods", "cephclusters"
  std::string singular{};
  std::string kind{};
  bool namespaced = true;
  std::vector<std::string> short_names{};
  std::vector<std::string> subresources{};  // "status", "scale", "eviction", "exec"
  // Discovery verbs; empty: all eight (create delete deletecollection get list patch update
  // watch). Virtual resources (selfsubjectaccessreviews) list just "create".
  std::vector<std::string> verbs{};
  // A custom resource: its CustomResourceDefinition's entry in spec.versions (schema,
  // subresources, additionalPrinterColumns); null for built-in resources.
  std::shared_ptr<const nlohmann::json> crd_version{};

  std::string apiVersion() const { return group.empty() ? version : group + "/" + version; }
  // Storage and watch key: "coordination.k8s.io/v1/leases", "/v1/pods".
  std::string key() const { return group + "/" + version + "/" + plural; }
  // For messages and Status details: "pods", "leases.coordination.k8s.io".
  std::string qualified() const { return group.empty() ? plural : plural + "." + group; }
  bool hasSubresource(std::string_view sub) const;
  // Whether PATCH takes application/strategic-merge-patch+json: the built-in groups' kinds (core,
  // apps, batch, autoscaling, policy, *.k8s.io), not custom resources (415, as apiextensions
  // answers).
  bool takesStrategicMerge() const;
};

// An API answer: the HTTP status code and the JSON body (an object, a list or a Status).
struct Reply {
  int code = 200;
  nlohmann::json body{};
  // Warning headers ("299 - <text>"): unknown fields under fieldValidation Warn.
  std::vector<std::string> warnings{};
  // Set: `body` is a string sent as is with this Content-Type (the OpenAPI v2 protobuf).
  std::string content_type{};
};

// A Status body: {"kind":"Status","apiVersion":"v1","status":"Failure",...}.
Reply statusReply(int code, std::string_view reason, std::string_view message,
                  std::string_view name = {}, const ResourceInfo* resource = nullptr);

struct ListOptions {
  std::string label_selector{};
  std::string field_selector{};
  std::int64_t limit = 0;
  std::string continue_token{};
  // With resource_version_match "Exact", a resourceVersion older than the event history is
  // 410 Gone (reason Expired), as the API server answers a compacted one. Otherwise lists are
  // served from the current state, which satisfies "NotOlderThan" and "" alike.
  std::string resource_version{};
  std::string resource_version_match{};
};

struct DeleteOptions {
  std::optional<std::int64_t> grace_period_seconds{};
  std::string propagation_policy{};
  std::string precondition_uid{};
  std::string precondition_resource_version{};
  bool dry_run = false;  // dryRun=All: everything but the write
};

struct WatchEvent {
  std::uint64_t resource_version = 0;
  std::string key{};        // ResourceInfo::key()
  std::string type{};       // ADDED, MODIFIED, DELETED
  nlohmann::json object{};  // the object after the write (before, for DELETED)
  nlohmann::json old{};     // the object before the write; null for ADDED
};

class Store {
 public:
  // `history_window`: how many events are kept for watches that resume from an older
  // resourceVersion; a watch from before the oldest kept event gets 410 Gone.
  Store(const base::Clock& clock, std::size_t history_window);

  // --- registry ---
  std::optional<ResourceInfo> findResource(std::string_view group, std::string_view version,
                                           std::string_view plural) const;
  // "pods", "leases.coordination.k8s.io", "cephclusters.ceph.rook.io" (any version).
  std::optional<ResourceInfo> findQualified(std::string_view qualified) const;
  std::vector<ResourceInfo> resources() const;
  // The resource for an object's apiVersion and kind. A kind of a built-in group (no dot, or
  // *.k8s.io) that kubesim does not list is registered on demand (plural = lower-case kind +
  // "s"/"es"/"ies"; namespaced unless a well-known cluster-scoped kind); a kind of any other
  // group exists only while its CustomResourceDefinition does.
  base::Result<ResourceInfo> resourceForObject(const nlohmann::json& object);

  // --- REST verbs (ns is empty for cluster-scoped resources) ---
  // Writes run kube-apiserver's admission and registry strategy (store_admission.cc): the
  // namespace must exist and not be terminating (404/403), bodies are defaulted, validated (422
  // Invalid) and prepared (status, generation). `dry_run` (dryRun=All) does all of it and
  // answers as the write would, but stores nothing: no resourceVersion, no watch event.
  // `writer` (managed_fields.h): the field manager of an API request, whose Update (or, for an
  // apply patch, Apply) entry in metadata.managedFields the write records; null for writes
  // that are not tracked.
  Reply create(const ResourceInfo& r, const std::string& ns, nlohmann::json object,
               bool dry_run = false, const managed::Writer* writer = nullptr);
  Reply get(const ResourceInfo& r, const std::string& ns, const std::string& name) const;
  Reply list(const ResourceInfo& r, const std::string& ns, const ListOptions& options) const;
  // subresource: "" (main resource: status is kept as stored for types with a status
  // subresource) or "status" (only status changes).
  Reply update(const ResourceInfo& r, const std::string& ns, const std::string& name,
               nlohmann::json object, std::string_view subresource, bool dry_run = false,
               const managed::Writer* writer = nullptr);
  // Content types: JSON patch, merge patch, strategic merge patch, and server-side apply
  // (application/apply-patch+yaml, store_apply.cc: creates the object when it is absent).
  Reply patch(const ResourceInfo& r, const std::string& ns, const std::string& name,
              std::string_view content_type, std::string_view body, std::string_view subresource,
              bool dry_run = false, const managed::Writer* writer = nullptr);
  Reply remove(const ResourceInfo& r, const std::string& ns, const std::string& name,
               const DeleteOptions& options);
  Reply getScale(const ResourceInfo& r, const std::string& ns, const std::string& name) const;
  Reply updateScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    const nlohmann::json& scale);
  Reply patchScale(const ResourceInfo& r, const std::string& ns, const std::string& name,
                   std::string_view content_type, std::string_view body);
  Reply evict(const std::string& ns, const std::string& name, const nlohmann::json& eviction);

  // --- direct access for tests and --load ---
  // Stores the object as given (status, deletionTimestamp and all), creating or replacing;
  // fills in missing uid, creationTimestamp, namespace ("default"), generation (where tracked)
  // and bumps resourceVersion. A namespace that does not exist yet is created (Active), so
  // seeded objects always live in an existing namespace.
  base::Result<nlohmann::json> put(nlohmann::json object);
  std::optional<nlohmann::json> get(std::string_view qualified, std::string_view ns,
                                    std::string_view name) const;
  // Removes at once, ignoring grace periods and finalizers. False when absent.
  bool remove(std::string_view qualified, std::string_view ns, std::string_view name);

  // --- watch ---
  std::uint64_t resourceVersion() const;
  // Events of `key` with resourceVersion > after; nullopt when the history no longer reaches
  // back that far (the caller answers 410 Gone / Expired).
  // `scanned_to` receives the resourceVersion the scan covered (the next `after`).
  std::optional<std::vector<WatchEvent>> eventsAfter(std::uint64_t after, const std::string& key,
                                                     std::uint64_t* scanned_to) const;
  // Waits until the resourceVersion passes `after`, the timeout passes or shutdown().
  void waitForChange(std::uint64_t after, std::chrono::milliseconds timeout) const;
  // Drops the whole event history: every watch from an existing resourceVersion gets 410.
  void compact();
  // Wakes all waiters for good.
  void shutdown();
  bool isShutdown() const;

  // The simulated kubelet: removes pods whose grace period has passed if their node Ready.
  void kubeletPass();
  // The namespace controller: deletes the contents of terminating namespaces and, once one is
  // empty, removes its `kubernetes` finalizer and with it the namespace.
  void namespaceControllerPass();
  // The simulated kube-controller-manager's garbage collector (gc.cc): works off the objects
  // writes queued (owners deleted with a GC finalizer, dependents whose owners may be gone).
  void garbageCollectorPass();
  // The simulated disruption controller (pdb.cc): recomputes every PodDisruptionBudget's status
  // after pods or budgets changed.
  void disruptionControllerPass();

 private:
  struct Stored {
    std::map<std::string, nlohmann::json> objects{};  // "ns/name" → object
  };

  void registerLocked(ResourceInfo info);
  // A CustomResourceDefinition was written or deleted: serve its versions, or stop serving them
  // and delete their objects (crd.h).
  void definitionChangedLocked(const std::string& type, const nlohmann::json& crd);
  std::optional<ResourceInfo> findByKindLocked(std::string_view api_version,
                                               std::string_view kind) const;
  const nlohmann::json* findLocked(const ResourceInfo& r, const std::string& ns,
                                   const std::string& name) const;
  // Assigns the next resourceVersion, stores (or erases, for DELETED) and records the event.
  // Keeps pods_by_node_ and pod_node_ in step with a pod's write (nullptr: deleted).
  void indexPodLocked(const std::string& key, const nlohmann::json* pod);
  nlohmann::json commitLocked(const ResourceInfo& r, const std::string& type, nlohmann::json object,
                              nlohmann::json old);
  static std::optional<Reply> undecodable(const ResourceInfo& r, const nlohmann::json& object);
  // A request's fields that the kind does not have (a built-in's Go type, a custom resource's
  // structural schema) are dropped, as decoding drops them; by the writer's fieldValidation,
  // also a warning each (Warn, the default) or 400 BadRequest (Strict). Those already in `old`
  // are dropped silently. Not for the server's own writes (no writer).
  std::optional<Reply> decodeFieldsLocked(const ResourceInfo& r, nlohmann::json& object,
                                          const nlohmann::json& old);
  Reply createLocked(const ResourceInfo& r, const std::string& ns, nlohmann::json object);
  // Server-side apply (store_apply.cc).
  Reply applyLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                    std::string_view body, std::string_view subresource);
  Reply updateLocked(const ResourceInfo& r, const std::string& ns, const std::string& name,
                     nlohmann::json object, std::string_view subresource, bool check_version);
  Reply deleteLocked(const ResourceInfo& r, const nlohmann::json& current,
                     const DeleteOptions& options);
  // Removes a terminating object whose finalizers are gone (and, for a pod, whose grace is 0).
  void finishDeletionLocked(const ResourceInfo& r, const nlohmann::json& object);
  // --- store_admission.cc ---
  static bool heldByFinalizers(const ResourceInfo& r, const nlohmann::json& object);
  void bootstrapNamespacesLocked();
  void ensureNamespaceLocked(const std::string& ns);
  std::optional<Reply> admitNamespaceLocked(const ResourceInfo& r, const std::string& ns,
                                            const nlohmann::json& object);
  std::optional<Reply> admitCreateLocked(const ResourceInfo& r, nlohmann::json& object);
  // Also bumps next's metadata.generation where the registry would.
  std::optional<Reply> admitUpdateLocked(const ResourceInfo& r, nlohmann::json& next,
                                         const nlohmann::json& old);
  std::optional<Reply> allocateServiceLocked(nlohmann::json& svc);
  Reply deleteNamespaceLocked(const ResourceInfo& r, const nlohmann::json& current);
  // The garbage collector's bookkeeping for a commit: the owner-uid index and the work queue.
  void gcTrackLocked(const ResourceInfo& r, const std::string& type, const nlohmann::json& object,
                     const nlohmann::json& old);
  void gcItemLocked(const std::string& key, const std::string& object_key);
  // The disruption controller and the eviction's budget check (pdb.cc).
  std::optional<std::int64_t> expectedScaleLocked(
      const std::vector<const nlohmann::json*>& pods) const;
  nlohmann::json pdbStatusLocked(const nlohmann::json& pdb) const;
  // nullopt: the pod may be evicted (its budget, if any, spent); else the answer (429, 500...).
  std::optional<Reply> spendBudgetLocked(const nlohmann::json& pod);
  // --- store_webhooks.cc: mutating admission webhooks (admission_webhooks.h) ---
  std::vector<webhooks::Target> webhookTargetsLocked(const webhooks::Attributes& attrs,
                                                     const nlohmann::json& object,
                                                     const nlohmann::json& old) const;
  // Before the create's lock: defaults the object and lets the matching webhooks mutate it.
  std::optional<Reply> mutateForCreate(const ResourceInfo& r, const std::string& ns,
                                       nlohmann::json& object, bool dry_run);
  // In an update of the main resource: releases the lock while the webhooks are called; 409 if
  // the object changed meanwhile.
  std::optional<Reply> mutateForUpdateLocked(const ResourceInfo& r, const std::string& ns,
                                             const std::string& name, nlohmann::json& next,
                                             const nlohmann::json& old);
  std::string nowText(std::chrono::seconds offset = std::chrono::seconds(0)) const;
  std::string newUid();
  std::string randomSuffix();

  const base::Clock& clock_;
  const std::size_t history_window_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool shutdown_ = false;
  std::uint64_t rv_ = 1;
  std::uint64_t compacted_rv_ = 0;  // events with rv <= this are gone from the history
  std::map<std::string, ResourceInfo> resources_;  // by key()
  std::map<std::string, Stored> data_;             // by key()
  std::deque<WatchEvent> history_;
  // Keys of pods with a deletionTimestamp, so the simulated kubelet does not scan every pod.
  std::set<std::string> terminating_pods_;
  // Pods by spec.nodeName ("" when unset), as kube-apiserver's watch cache indexes them: a list
  // of one node's pods reads its keys, not every pod (store_list.cc). pod_node_ is each pod's
  // entry, to move it when the pod changes node.
  std::map<std::string, std::set<std::string>> pods_by_node_;
  std::map<std::string, std::string> pod_node_;
  // Set while a dryRun=All request holds the lock: commitLocked stores and records nothing.
  bool dry_run_ = false;
  // Set while an API write holds the lock: whose managedFields entry it records (apply.cc).
  const managed::Writer* writer_ = nullptr;
  // The client's request under way (its fieldValidation): kept when writer_ is cleared (a
  // server-side apply records managedFields itself). nullptr: the server's own write.
  const managed::Writer* request_ = nullptr;
  // The warnings of the write under way (decodeFieldsLocked), moved into its Reply.
  std::vector<std::string> warnings_{};
  std::mt19937_64 rng_;
  // Garbage collector (gc.cc): owner uid → its dependents as (resource key, "ns/name"), and the
  // objects to look at on the next pass. put() sets putting_ (fixtures skip the owner check).
  std::map<std::string, std::set<std::pair<std::string, std::string>>> dependents_;
  std::set<std::pair<std::string, std::string>> gc_queue_;
  bool putting_ = false;
  bool pdbs_dirty_ = true;  // a pod or a budget changed since the last disruption pass
};

std::string objectKey(const std::string& ns, const std::string& name);

}  // namespace ekco::kubesim
