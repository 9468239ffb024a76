// PodDisruptionBudgets: the disruption controller's status (pkg/controller/disruption) and the
// eviction subresource's budget check (pkg/registry/core/pod/storage/eviction.go).
#include <algorithm>
#include <cmath>
#include <ctime>

#include "tests/kubesim/store/selector.h"
#include "tests/kubesim/store/store.h"
#include "tests/kubesim/store/store_support.h"
#include "tests/kubesim/validation/api_time.h"

namespace ekco::kubesim {

using nlohmann::json;
using store_detail::str;

namespace {

const char* const kPdbKey = "policy/v1/poddisruptionbudgets";

// Seconds since the epoch of an API time (api_time.h).
std::optional<std::int64_t> parseTime(const std::string& text) {
  auto t = parseApiTime(text);
  if (!t) return std::nullopt;
  return std::chrono::floor<std::chrono::seconds>(t->time_since_epoch()).count();
}

std::string join(const json& values) {
  std::string out;
  for (const json& v : values) {
    if (!out.empty()) out += ",";
    out += v.is_string() ? v.get<std::string>() : v.dump();
  }
  return out;
}

// metav1.LabelSelectorAsSelector: matchLabels and matchExpressions (In, NotIn, Exists,
// DoesNotExist) all hold; an absent selector matches nothing, an empty one everything.
bool selects(const json& selector, const json& pod) {
  if (!selector.is_object()) return false;
  std::string text;
  auto add = [&](const std::string& req) { text += (text.empty() ? "" : ",") + req; };
  const json match_labels = selector.value("matchLabels", json::object());
  for (auto it = match_labels.begin(); it != match_labels.end(); ++it) {
    add(it.key() + "=" + (it->is_string() ? it->get<std::string>() : it->dump()));
  }
  for (const json& e : selector.value("matchExpressions", json::array())) {
    const std::string key = e.value("key", "");
    const std::string op = e.value("operator", "");
    const json values = e.value("values", json::array());
    if (op == "In") {
      add(key + " in (" + join(values) + ")");
    } else if (op == "NotIn") {
      add(key + " notin (" + join(values) + ")");
    } else if (op == "Exists") {
      add(key);
    } else if (op == "DoesNotExist") {
      add("!" + key);
    } else {
      return false;
    }
  }
  auto parsed = LabelSelector::parse(text);
  return parsed && parsed->matches(pod.value("metadata", json::object()).value("labels", json()));
}

bool podReady(const json& pod) {
  for (const json& c : pod.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == "Ready") return c.value("status", "") == "True";
  }
  return false;
}

bool terminating(const json& obj) {
  return obj.value("metadata", json::object()).contains("deletionTimestamp");
}

// intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true).
std::int64_t scaled(const json& value, std::int64_t total) {
  if (value.is_number_integer()) return value.get<std::int64_t>();
  std::string s = value.is_string() ? value.get<std::string>() : "0";
  if (!s.empty() && s.back() == '%') {
    double pct = std::strtod(s.c_str(), nullptr);
    return static_cast<std::int64_t>(std::ceil(pct * static_cast<double>(total) / 100.0));
  }
  return std::strtoll(s.c_str(), nullptr, 10);
}

}  // namespace

// getExpectedScale: the sum of the distinct controllers' replicas (a ReplicaSet owned by a
// Deployment counts the Deployment's); pods without a controller are not counted; nullopt
// when a controller is missing (the controller then fails safe).
std::optional<std::int64_t> Store::expectedScaleLocked(const std::vector<const json*>& pods) const {
  std::set<std::string> seen;
  std::int64_t total = 0;
  for (const json* pod : pods) {
    const std::string ns = str(*pod, {"metadata", "namespace"});
    for (const json& ref :
         pod->value("metadata", json::object()).value("ownerReferences", json::array())) {
      if (!ref.value("controller", false)) continue;
      if (!seen.insert(ref.value("uid", "")).second) break;
      auto r = findByKindLocked(ref.value("apiVersion", ""), ref.value("kind", ""));
      const json* owner = r ? findLocked(*r, ns, ref.value("name", "")) : nullptr;
      if (owner == nullptr) return std::nullopt;
      const json* scale_of = owner;
      if (ref.value("kind", "") == "ReplicaSet") {
        for (const json& up :
             owner->value("metadata", json::object()).value("ownerReferences", json::array())) {
          if (!up.value("controller", false) || up.value("kind", "") != "Deployment") continue;
          auto dr = findByKindLocked(up.value("apiVersion", ""), "Deployment");
          if (const json* d = dr ? findLocked(*dr, ns, up.value("name", "")) : nullptr) {
            if (seen.insert(up.value("uid", "")).second) {
              scale_of = d;
            } else {
              scale_of = nullptr;  // this deployment is counted already
            }
          }
        }
      }
      if (scale_of != nullptr) {
        total += scale_of->value("spec", json::object()).value("replicas", std::int64_t{1});
      }
      break;
    }
  }
  return total;
}

json Store::pdbStatusLocked(const json& pdb) const {
  const std::string ns = str(pdb, {"metadata", "namespace"});
  const json spec = pdb.value("spec", json::object());
  const json old_status = pdb.value("status", json::object());
  std::vector<const json*> pods;
  if (auto d = data_.find("/v1/pods"); d != data_.end()) {
    for (auto it = d->second.objects.lower_bound(ns + "/"); it != d->second.objects.end(); ++it) {
      if (it->first.compare(0, ns.size() + 1, ns + "/") != 0) break;
      if (selects(spec.value("selector", json()), it->second)) pods.push_back(&it->second);
    }
  }
  // (1) Expected and desired healthy pods.
  std::int64_t expected = 0;
  std::int64_t desired = 0;
  bool failed = false;
  if (spec.contains("maxUnavailable")) {
    auto scale = expectedScaleLocked(pods);
    failed = !scale;
    expected = scale.value_or(0);
    desired = std::max<std::int64_t>(0, expected - scaled(spec["maxUnavailable"], expected));
  } else if (spec.contains("minAvailable")) {
    if (spec["minAvailable"].is_number_integer()) {
      desired = spec["minAvailable"].get<std::int64_t>();
      expected = static_cast<std::int64_t>(pods.size());
    } else {
      auto scale = expectedScaleLocked(pods);
      failed = !scale;
      expected = scale.value_or(0);
      desired = scaled(spec["minAvailable"], expected);
    }
  }
  // (2) Pods an eviction took in the last 2 minutes and not yet deleted stay out of the count.
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(clock_.wallNow().time_since_epoch()).count();
  json disrupted = json::object();
  const json old_disrupted = old_status.value("disruptedPods", json::object());
  std::int64_t healthy = 0;
  for (const json* pod : pods) {
    if (terminating(*pod)) continue;
    const std::string name = str(*pod, {"metadata", "name"});
    if (auto t = old_disrupted.find(name); t != old_disrupted.end() && t->is_string()) {
      auto when = parseTime(t->get<std::string>());
      if (when && now < *when + 120) {
        disrupted[name] = *t;
        continue;
      }
    }
    if (podReady(*pod)) ++healthy;
  }
  std::int64_t allowed = healthy - desired;
  if (failed || expected <= 0 || allowed < 0) allowed = 0;
  json status = {{"observedGeneration", store_detail::metaInt(pdb, "generation", 1)},
                 {"currentHealthy", healthy},
                 {"desiredHealthy", desired},
                 {"expectedPods", expected},
                 {"disruptionsAllowed", allowed}};
  if (!disrupted.empty()) status["disruptedPods"] = disrupted;
  const bool ok = allowed > 0;
  json condition = {{"type", "DisruptionAllowed"},
                    {"status", ok ? "True" : "False"},
                    {"reason", failed ? "SyncFailed"
                               : ok   ? "SufficientPods"
                                      : "InsufficientPods"},
                    {"message", ""},
                    {"observedGeneration", status["observedGeneration"]},
                    {"lastTransitionTime", nowText()}};
  for (const json& c : old_status.value("conditions", json::array())) {
    if (c.value("type", "") == "DisruptionAllowed" &&
        c.value("status", "") == condition["status"]) {
      condition["lastTransitionTime"] = c.value("lastTransitionTime", nowText());
    }
  }
  status["conditions"] = json::array({condition});
  return status;
}

void Store::disruptionControllerPass() {
  std::lock_guard lock(mu_);
  if (!pdbs_dirty_) return;
  pdbs_dirty_ = false;
  auto pdbs = data_.find(kPdbKey);
  auto r = resources_.find(kPdbKey);
  if (pdbs == data_.end() || r == resources_.end()) return;
  std::vector<json> all;
  for (const auto& [key, pdb] : pdbs->second.objects) all.push_back(pdb);
  for (json& pdb : all) {
    json next = pdb;
    next["status"] = pdbStatusLocked(pdb);
    if (next == pdb) continue;
    const std::string ns = str(pdb, {"metadata", "namespace"});
    const std::string name = str(pdb, {"metadata", "name"});
    (void)updateLocked(r->second, ns, name, std::move(next), "status", false);
  }
}

std::optional<Reply> Store::spendBudgetLocked(const json& pod) {
  // (1) Pods that are not running (or already going) are deleted without a budget.
  const std::string phase = str(pod, {"status", "phase"});
  if (phase == "Succeeded" || phase == "Failed" || phase == "Pending" || terminating(pod)) {
    return std::nullopt;
  }
  auto pdbs = data_.find(kPdbKey);
  auto r = resources_.find(kPdbKey);
  if (pdbs == data_.end() || r == resources_.end()) return std::nullopt;
  const std::string ns = str(pod, {"metadata", "namespace"});
  std::vector<const json*> matching;
  for (const auto& [key, pdb] : pdbs->second.objects) {
    if (str(pdb, {"metadata", "namespace"}) != ns) continue;
    if (selects(pdb.value("spec", json::object()).value("selector", json()), pod)) {
      matching.push_back(&pdb);
    }
  }
  if (matching.empty()) return std::nullopt;
  if (matching.size() > 1) {
    return statusReply(500, "InternalError",
                       "This pod has more than one PodDisruptionBudget, which the eviction "
                       "subresource does not support.");
  }
  const json& pdb = *matching[0];
  const std::string pdb_name = str(pdb, {"metadata", "name"});
  const json status = pdb.value("status", json::object());
  const std::int64_t current = status.value("currentHealthy", std::int64_t{0});
  const std::int64_t desired = status.value("desiredHealthy", std::int64_t{0});
  // (2) An unready pod may go without spending the budget while the budget is met
  // (unhealthyPodEvictionPolicy IfHealthyBudget, the default).
  if (!podReady(pod) && current >= desired && desired > 0) return std::nullopt;
  // (3) checkAndDecrement.
  auto too_many = [&](const std::string& cause, int retry) {
    Reply reply = statusReply(429, "TooManyRequests",
                              "Cannot evict pod as it would violate the pod's disruption budget.");
    reply.body["details"] = {{"causes", {{{"reason", "DisruptionBudget"}, {"message", cause}}}}};
    if (retry > 0) reply.body["details"]["retryAfterSeconds"] = retry;
    return reply;
  };
  if (status.value("observedGeneration", std::int64_t{0}) <
      store_detail::metaInt(pdb, "generation", 1)) {
    return too_many(
        "The disruption budget " + pdb_name + " is still being processed by the server.", 10);
  }
  const std::int64_t allowed = status.value("disruptionsAllowed", std::int64_t{0});
  if (allowed < 0) {
    return statusReply(403, "Forbidden",
                       "poddisruptionbudgets.policy \"" + pdb_name +
                           "\" is forbidden: pdb disruptions allowed is negative",
                       pdb_name, &r->second);
  }
  if (allowed == 0) {
    return too_many("The disruption budget " + pdb_name + " needs " + std::to_string(desired) +
                        " healthy pods and has " + std::to_string(current) + " currently",
                    0);
  }
  json next = pdb;
  next["status"]["disruptionsAllowed"] = allowed - 1;
  next["status"]["disruptedPods"][str(pod, {"metadata", "name"})] = nowText();
  (void)updateLocked(r->second, ns, pdb_name, std::move(next), "status", false);
  return std::nullopt;
}

}  // namespace ekco::kubesim
