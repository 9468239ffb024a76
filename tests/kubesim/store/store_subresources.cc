// The Store's subresources (scale, eviction) and its simulated kubelet, which finishes
// terminating pods.
#include <algorithm>
#include <ctime>

#include "tests/kubesim/apply/patch.h"
#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/crd.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::conflictModified;
using store_detail::hasFinalizers;
using store_detail::metaInt;
using store_detail::notFound;
using store_detail::str;

namespace {

// "2026-01-02T03:04:05Z" → seconds since the epoch; nullopt if malformed.
std::optional<std::int64_t> parseTime(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return std::nullopt;
  return static_cast<std::int64_t>(timegm(&tm));
}

}  // namespace

Reply Store::getScale(const ResourceInfo& r, const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  const json* obj = findLocked(r, ns, name);
  if (obj == nullptr) return notFound(r, name);
  std::string selector;
  const json& match = obj->value("spec", json::object())
                          .value("selector", json::object())
                          .value("matchLabels", json::object());
  for (auto it = match.begin(); it != match.end(); ++it) {
    if (!selector.empty()) selector += ",";
    selector += it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump());
  }
  json spec_replicas = obj->value("spec", json::object()).value("replicas", 1);
  json status_replicas = obj->value("status", json::object()).value("replicas", 0);
  if (auto paths = crd::scalePaths(r)) {
    // A custom resource's scale reads the paths its CRD declares (0 where absent).
    auto first = [&](const std::string& path, json fallback) {
      auto found = crd::jsonPath(*obj, path);
      return found.empty() ? fallback : found[0];
    };
    spec_replicas = first(paths->spec_replicas, 0);
    status_replicas = first(paths->status_replicas, 0);
    selector.clear();
    if (!paths->label_selector.empty()) {
      json s = first(paths->label_selector, "");
      if (s.is_string()) selector = s.get<std::string>();
    }
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
                        {"spec", {{"replicas", spec_replicas}}},
                        {"status", {{"replicas", status_replicas}, {"selector", selector}}}}};
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
    if (auto paths = crd::scalePaths(r)) {
      crd::setAtPath(next, paths->spec_replicas, scale["spec"]["replicas"]);
    } else {
      next["spec"]["replicas"] = scale["spec"]["replicas"];
    }
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
  // The pod's PodDisruptionBudget must allow the disruption, which the eviction spends
  // (pdb.cc).
  if (auto refused = spendBudgetLocked(*pod)) return std::move(*refused);
  pod = findLocked(*pods, ns, name);
  if (pod == nullptr) return notFound(*pods, name);
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
