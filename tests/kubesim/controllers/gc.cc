// kube-controller-manager's garbage collector, as far as owner references go: the propagation
// policy of a delete (Background, Foreground with the foregroundDeletion finalizer, Orphan with
// the orphan finalizer), dependents collected once their owners are gone, and owners in
// foreground deletion removed once their blocking dependents are.
#include <algorithm>

#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

namespace {

const char* const kOrphan = "orphan";
const char* const kForeground = "foregroundDeletion";

const json& ownerRefs(const json& obj) {
  static const json kNone = json::array();
  if (!obj.is_object()) return kNone;
  auto meta = obj.find("metadata");
  if (meta == obj.end() || !meta->is_object()) return kNone;
  auto refs = meta->find("ownerReferences");
  return refs != meta->end() && refs->is_array() ? *refs : kNone;
}

bool hasFinalizer(const json& obj, std::string_view name) {
  const json& f = obj.value("metadata", json::object()).value("finalizers", json::array());
  return std::any_of(f.begin(), f.end(), [&](const json& v) { return v == name; });
}

void setFinalizer(json& obj, std::string_view name, bool present) {
  json& meta = obj["metadata"];
  json kept = json::array();
  for (const json& v : meta.value("finalizers", json::array())) {
    if (v != name) kept.push_back(v);
  }
  if (present) kept.push_back(name);
  if (kept.empty()) {
    meta.erase("finalizers");
  } else {
    meta["finalizers"] = kept;
  }
}

}  // namespace

namespace store_detail {

std::optional<Reply> invalidPropagation(const DeleteOptions& options) {
  const std::string& policy = options.propagation_policy;
  if (policy.empty() || policy == "Foreground" || policy == "Background" || policy == "Orphan") {
    return std::nullopt;
  }
  // ValidateDeleteOptions, reported as errors.NewInvalid(DeleteOptions.meta.k8s.io, "").
  std::string detail = "Unsupported value: \"" + policy +
                       "\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\"";
  Reply reply = statusReply(
      422, "Invalid", "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: " + detail);
  reply.body["details"] = {{"group", "meta.k8s.io"},
                           {"kind", "DeleteOptions"},
                           {"causes",
                            {{{"reason", "FieldValueNotSupported"},
                              {"message", detail},
                              {"field", "propagationPolicy"}}}}};
  return reply;
}

void applyPropagation(json& object, const DeleteOptions& options) {
  // deletionFinalizersForGarbageCollection: the policy's finalizer, and not the other one's.
  // Without a policy every resource served here defaults to Background (apps/v1 and the core
  // group delete dependents), which needs no finalizer.
  const std::string& policy = options.propagation_policy;
  if (policy.empty()) return;
  setFinalizer(object, kOrphan, policy == "Orphan");
  setFinalizer(object, kForeground, policy == "Foreground");
}

}  // namespace store_detail

void Store::gcTrackLocked(const ResourceInfo& r, const std::string& type, const json& object,
                          const json& old) {
  if (r.key() == "/v1/pods" || r.key() == "policy/v1/poddisruptionbudgets") pdbs_dirty_ = true;
  const std::string ns = str(object, {"metadata", "namespace"});
  const std::pair<std::string, std::string> item{r.key(),
                                                 objectKey(ns, str(object, {"metadata", "name"}))};
  for (const json& ref : ownerRefs(old)) {
    auto deps = dependents_.find(ref.value("uid", ""));
    if (deps == dependents_.end()) continue;
    deps->second.erase(item);
    if (deps->second.empty()) dependents_.erase(deps);
  }
  if (type == "DELETED") {
    // Its dependents may now be orphans; its owners may be waiting for it (foreground).
    auto deps = dependents_.find(str(object, {"metadata", "uid"}));
    if (deps != dependents_.end()) gc_queue_.insert(deps->second.begin(), deps->second.end());
    for (const json& ref : ownerRefs(object)) {
      auto owner = findByKindLocked(ref.value("apiVersion", ""), ref.value("kind", ""));
      if (!owner) continue;
      gc_queue_.insert(
          {owner->key(), objectKey(owner->namespaced ? ns : "", ref.value("name", ""))});
    }
    return;
  }
  for (const json& ref : ownerRefs(object)) dependents_[ref.value("uid", "")].insert(item);
  // Objects stored verbatim by put() (fixtures, --load) are not checked for missing owners, so
  // a fixture may hold pods of controllers it does not include; deleting an owner through the
  // API still collects them.
  if (!putting_ && !ownerRefs(object).empty()) gc_queue_.insert(item);
  if (object["metadata"].contains("deletionTimestamp") &&
      (hasFinalizer(object, kOrphan) || hasFinalizer(object, kForeground))) {
    gc_queue_.insert(item);
  }
}

// One object the collector looks at: an owner being deleted with a GC finalizer, or a dependent
// whose owners may be gone. Kept whole: the collector's attemptToDeleteItem in one place.
void Store::gcItemLocked(const std::string& key, const std::string& object_key) {
  auto res = resources_.find(key);
  if (res == resources_.end()) return;
  const ResourceInfo r = res->second;
  auto d = data_.find(key);
  if (d == data_.end()) return;
  auto found = d->second.objects.find(object_key);
  if (found == d->second.objects.end()) return;
  json obj = found->second;
  const std::string ns = str(obj, {"metadata", "namespace"});
  const std::string uid = str(obj, {"metadata", "uid"});
  const bool deleting = obj["metadata"].contains("deletionTimestamp");
  // The live dependents that still point at this object (by uid).
  auto dependents = [&] {
    std::vector<std::pair<ResourceInfo, json>> out;
    auto deps = dependents_.find(uid);
    if (deps == dependents_.end()) return out;
    for (const auto& [dep_key, dep_obj_key] : deps->second) {
      auto dr = resources_.find(dep_key);
      auto dd = data_.find(dep_key);
      if (dr == resources_.end() || dd == data_.end()) continue;
      auto it = dd->second.objects.find(dep_obj_key);
      if (it != dd->second.objects.end()) out.emplace_back(dr->second, it->second);
    }
    return out;
  };
  if (deleting && hasFinalizer(obj, kOrphan)) {
    // (1) Orphan: drop the owner reference from every dependent, then the finalizer.
    for (auto& [dr, dep] : dependents()) {
      json next = dep;
      json refs = json::array();
      for (const json& ref : ownerRefs(dep)) {
        if (ref.value("uid", "") != uid) refs.push_back(ref);
      }
      if (refs.empty()) {
        next["metadata"].erase("ownerReferences");
      } else {
        next["metadata"]["ownerReferences"] = refs;
      }
      (void)updateLocked(dr, str(dep, {"metadata", "namespace"}), str(dep, {"metadata", "name"}),
                         std::move(next), "", false);
    }
    const std::string name = str(obj, {"metadata", "name"});
    setFinalizer(obj, kOrphan, false);
    (void)updateLocked(r, ns, name, std::move(obj), "", false);
    return;
  }
  if (deleting && hasFinalizer(obj, kForeground)) {
    // (2) Foreground: delete every dependent (foreground again where it blocks its owner), and
    // remove the finalizer once no blocking dependent is left.
    bool blocked = false;
    for (auto& [dr, dep] : dependents()) {
      bool blocks = false;
      for (const json& ref : ownerRefs(dep)) {
        if (ref.value("uid", "") == uid && ref.value("blockOwnerDeletion", false)) blocks = true;
      }
      blocked = blocked || blocks;
      if (dep["metadata"].contains("deletionTimestamp")) continue;
      (void)deleteLocked(dr, dep,
                         DeleteOptions{.propagation_policy = blocks ? "Foreground" : "Background"});
    }
    if (!blocked) {
      json next = obj;
      setFinalizer(next, kForeground, false);
      (void)updateLocked(r, ns, str(obj, {"metadata", "name"}), std::move(next), "", false);
    }
    return;
  }
  // (3) A dependent: collected when none of its owners exists any more (absent, or a new
  // object under the old name); owner references to absent owners are dropped when some remain.
  const json& refs = ownerRefs(obj);
  if (refs.empty() || deleting) return;
  json solid = json::array();
  bool waiting = false;  // an owner in foreground deletion that this dependent blocks
  for (const json& ref : refs) {
    auto owner_r = findByKindLocked(ref.value("apiVersion", ""), ref.value("kind", ""));
    if (!owner_r) {
      solid.push_back(ref);  // an unknown kind cannot be checked: keep it, as the GC retries
      continue;
    }
    const json* owner = findLocked(*owner_r, ns, ref.value("name", ""));
    if (owner == nullptr || str(*owner, {"metadata", "uid"}) != ref.value("uid", "")) continue;
    solid.push_back(ref);
    if (hasFinalizer(*owner, kForeground) && ref.value("blockOwnerDeletion", false)) waiting = true;
  }
  if (solid.empty()) {
    (void)deleteLocked(r, obj,
                       DeleteOptions{.propagation_policy = waiting ? "Foreground" : "Background"});
  } else if (solid.size() < refs.size()) {
    json next = obj;
    next["metadata"]["ownerReferences"] = solid;
    (void)updateLocked(r, ns, str(obj, {"metadata", "name"}), std::move(next), "", false);
  }
}

void Store::garbageCollectorPass() {
  std::lock_guard lock(mu_);
  // Writes made here queue more work (a foreground chain, one level per round); bounded.
  for (int round = 0; round < 64 && !gc_queue_.empty(); ++round) {
    auto batch = std::move(gc_queue_);
    gc_queue_.clear();
    for (const auto& [key, object_key] : batch) gcItemLocked(key, object_key);
  }
}

}  // namespace ekco::kubesim
