#include "tests/kubesim/controllers/node_lifecycle.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "tests/kubesim/store/store.h"
#include "tests/kubesim/validation/api_time.h"

namespace ekco::kubesim {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

constexpr const char* kUnreachable = "node.kubernetes.io/unreachable";
constexpr const char* kOutOfService = "node.kubernetes.io/out-of-service";
constexpr const char* kNodeLeaseNs = "kube-node-lease";

std::vector<json> items(const Store& store, std::string_view qualified) {
  auto r = store.findQualified(qualified);
  if (!r) return {};
  Reply reply = store.list(*r, "", {});
  if (reply.code != 200) return {};
  return reply.body.value("items", json::array()).get<std::vector<json>>();
}

std::string name(const json& o) { return o["metadata"].value("name", ""); }
std::string ns(const json& o) { return o["metadata"].value("namespace", ""); }

std::string conditionStatus(const json& node, std::string_view type) {
  for (const json& c : node.value("status", json::object()).value("conditions", json::array())) {
    if (c.value("type", "") == type) return c.value("status", "");
  }
  return "";
}

bool hasTaint(const json& node, std::string_view key) {
  for (const json& t : node.value("spec", json::object()).value("taints", json::array())) {
    if (t.value("key", "") == key) return true;
  }
  return false;
}

bool tolerates(const json& toleration, const json& taint) {
  const std::string key = toleration.value("key", "");
  const std::string op = toleration.value("operator", "Equal");
  const std::string effect = toleration.value("effect", "");
  if (!effect.empty() && effect != taint.value("effect", "")) return false;
  if (key.empty()) return op == "Exists";
  if (key != taint.value("key", "")) return false;
  return op == "Exists" || toleration.value("value", "") == taint.value("value", "");
}

// The PersistentVolume names of the pod's PVCs (those bound).
std::vector<std::string> podVolumes(const Store& store, const json& pod) {
  std::vector<std::string> out;
  for (const json& v : pod.value("spec", json::object()).value("volumes", json::array())) {
    if (!v.contains("persistentVolumeClaim")) continue;
    const std::string claim = v["persistentVolumeClaim"].value("claimName", "");
    auto pvc = store.get("persistentvolumeclaims", ns(pod), claim);
    if (!pvc) continue;
    const std::string pv = pvc->value("spec", json::object()).value("volumeName", "");
    if (!pv.empty()) out.push_back(pv);
  }
  return out;
}

}  // namespace

std::vector<json> statefulSetWithVolume(const std::string& ns, const std::string& name,
                                        int grace_seconds) {
  const std::string pv = "pv-" + name;
  return {
      {{"apiVersion", "v1"},
       {"kind", "PersistentVolume"},
       {"metadata", {{"name", pv}}},
       {"spec",
        {{"capacity", {{"storage", "1Gi"}}},
         {"accessModes", {"ReadWriteOnce"}},
         {"csi", {{"driver", "kubesim.csi"}, {"volumeHandle", "vol-" + name}}}}}},
      {{"apiVersion", "v1"},
       {"kind", "PersistentVolumeClaim"},
       {"metadata", {{"name", "data-" + name + "-0"}, {"namespace", ns}}},
       {"spec",
        {{"accessModes", {"ReadWriteOnce"}},
         {"resources", {{"requests", {{"storage", "1Gi"}}}}},
         {"volumeName", pv}}},
       {"status", {{"phase", "Bound"}}}},
      {{"apiVersion", "apps/v1"},
       {"kind", "StatefulSet"},
       {"metadata", {{"name", name}, {"namespace", ns}}},
       {"spec",
        {{"replicas", 1},
         {"serviceName", name},
         {"selector", {{"matchLabels", {{"app", name}}}}},
         {"template",
          {{"metadata", {{"labels", {{"app", name}}}}},
           {"spec",
            {{"terminationGracePeriodSeconds", grace_seconds},
             {"containers", {{{"name", name}, {"image", "postgres:16"}}}}}}}},
         {"volumeClaimTemplates", {{{"metadata", {{"name", "data"}}}}}}}}},
  };
}

ClusterControllersOptions ClusterControllersOptions::scaled(double factor) {
  ClusterControllersOptions o;
  auto scale = [factor](milliseconds d) {
    return milliseconds(
        std::max<long long>(1, std::llround(static_cast<double>(d.count()) * factor)));
  };
  o.enabled = true;
  o.node_lease_renew_interval = scale(o.node_lease_renew_interval);
  o.node_monitor_grace_period = scale(o.node_monitor_grace_period);
  o.node_monitor_period = scale(o.node_monitor_period);
  o.pod_gc_period = scale(o.pod_gc_period);
  o.max_wait_for_unmount = scale(o.max_wait_for_unmount);
  o.toleration_scale = factor;
  return o;
}

NodeLifecycle::NodeLifecycle(Store& store, const base::Clock& clock,
                             ClusterControllersOptions options)
    : store_(store), clock_(clock), options_(options) {}

void NodeLifecycle::startKubelet(const std::string& node, const std::string& boot_id) {
  std::lock_guard lock(mu_);
  kubelets_[node] = Kubelet{.running = true, .boot_id = boot_id};
}

void NodeLifecycle::stopKubelet(const std::string& node) {
  std::lock_guard lock(mu_);
  kubelets_[node].running = false;
}

bool NodeLifecycle::kubeletRunning(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto it = kubelets_.find(node);
  return it != kubelets_.end() && it->second.running;
}

void NodeLifecycle::pass() {
  if (!options_.enabled) return;
  kubelets();
  nodeLifecycleController();
  taintManager();
  podGc();
  attachDetach();
  statefulSets();
  startPods();
}

// (1)
void NodeLifecycle::kubelets() {
  const base::MonoTime mono = clock_.monoNow();
  const base::WallTime now = clock_.wallNow();
  auto nodes_r = store_.findQualified("nodes");
  if (!nodes_r) return;
  std::map<std::string, Kubelet> running;
  {
    std::lock_guard lock(mu_);
    for (auto& [node, k] : kubelets_) {
      if (!k.running) continue;
      if (k.last_renew && mono - *k.last_renew < options_.node_lease_renew_interval) {
        running.emplace(node, Kubelet{.running = true, .boot_id = k.boot_id});  // status only
        continue;
      }
      k.last_renew = mono;
      running.emplace(node, Kubelet{.running = true, .boot_id = k.boot_id, .last_renew = mono});
    }
  }
  for (const auto& [node, k] : running) {
    if (k.last_renew) {
      json lease = store_.get("leases.coordination.k8s.io", kNodeLeaseNs, node)
                       .value_or(json{{"apiVersion", "coordination.k8s.io/v1"},
                                      {"kind", "Lease"},
                                      {"metadata", {{"name", node}, {"namespace", kNodeLeaseNs}}}});
      lease["spec"]["holderIdentity"] = node;
      lease["spec"]["leaseDurationSeconds"] = 40;
      lease["spec"]["renewTime"] = formatApiTime(now, true);
      (void)store_.put(std::move(lease));
    }
    auto current = store_.get("nodes", "", node);
    if (!current) continue;
    json next = *current;
    bool changed = false;
    if (!next["status"].is_object()) next["status"] = json::object();
    if (next["status"].value("nodeInfo", json::object()).value("bootID", "") != k.boot_id) {
      next["status"]["nodeInfo"]["bootID"] = k.boot_id;
      changed = true;
    }
    json conditions = next["status"].value("conditions", json::array());
    bool found = false;
    for (json& c : conditions) {
      const std::string type = c.value("type", "");
      const std::string want = type == "Ready" ? "True" : "False";
      if (type == "Ready") found = true;
      if (c.value("status", "") != want) {
        c["status"] = want;
        c["reason"] = type == "Ready" ? "KubeletReady" : "KubeletHasSufficient" + type;
        c["message"] = type == "Ready" ? "kubelet is posting ready status" : "";
        c["lastTransitionTime"] = formatApiTime(now, false);
        c["lastHeartbeatTime"] = formatApiTime(now, false);
        changed = true;
      }
    }
    if (!found) {
      conditions.push_back({{"type", "Ready"},
                            {"status", "True"},
                            {"reason", "KubeletReady"},
                            {"message", "kubelet is posting ready status"},
                            {"lastHeartbeatTime", formatApiTime(now, false)},
                            {"lastTransitionTime", formatApiTime(now, false)}});
      changed = true;
    }
    if (!changed) continue;
    next["status"]["conditions"] = conditions;
    (void)store_.update(*nodes_r, "", node, next, "status");  // a conflict: next pass
  }
}

// (2)
void NodeLifecycle::nodeLifecycleController() {
  const base::MonoTime mono = clock_.monoNow();
  if (last_monitor_ && mono - *last_monitor_ < options_.node_monitor_period) return;
  last_monitor_ = mono;
  const base::WallTime now = clock_.wallNow();
  auto nodes_r = store_.findQualified("nodes");
  if (!nodes_r) return;
  for (const json& node : items(store_, "nodes")) {
    auto lease = store_.get("leases.coordination.k8s.io", kNodeLeaseNs, name(node));
    if (!lease) continue;  // not a node this simulation follows
    auto renewed = parseApiTime(lease->value("spec", json::object()).value("renewTime", ""));
    const bool silent = !renewed || now - *renewed > options_.node_monitor_grace_period;
    const std::string ready = conditionStatus(node, "Ready");
    json next = node;
    bool status_changed = false;
    bool spec_changed = false;
    if (silent && ready != "Unknown") {
      for (json& c : next["status"]["conditions"]) {
        c["status"] = "Unknown";
        c["reason"] = "NodeStatusUnknown";
        c["message"] = "Kubelet stopped posting node status.";
        c["lastTransitionTime"] = formatApiTime(now, false);
      }
      status_changed = true;
    }
    json taints = next.value("spec", json::object()).value("taints", json::array());
    if (silent && !hasTaint(node, kUnreachable)) {
      taints.push_back({{"key", kUnreachable},
                        {"effect", "NoExecute"},
                        {"timeAdded", formatApiTime(now, false)}});
      taints.push_back({{"key", kUnreachable}, {"effect", "NoSchedule"}});
      spec_changed = true;
    } else if (!silent && ready == "True" && hasTaint(node, kUnreachable)) {
      json kept = json::array();
      for (const json& t : taints) {
        if (t.value("key", "") != kUnreachable) kept.push_back(t);
      }
      taints = kept;
      spec_changed = true;
    }
    if (status_changed) {
      Reply r = store_.update(*nodes_r, "", name(node), next, "status");
      if (r.code != 200) continue;
      next = r.body;
    }
    if (spec_changed) {
      next["spec"]["taints"] = taints;
      (void)store_.update(*nodes_r, "", name(node), next, "");
    }
  }
}

// (3)
void NodeLifecycle::taintManager() {
  const base::WallTime now = clock_.wallNow();
  auto pods_r = store_.findQualified("pods");
  if (!pods_r) return;
  std::map<std::string, json> tainted;  // node → its NoExecute taints
  for (const json& node : items(store_, "nodes")) {
    json taints = json::array();
    for (const json& t : node.value("spec", json::object()).value("taints", json::array())) {
      if (t.value("effect", "") == "NoExecute") taints.push_back(t);
    }
    if (!taints.empty()) tainted.emplace(name(node), taints);
  }
  if (tainted.empty()) return;
  for (const json& pod : items(store_, "pods")) {
    if (pod["metadata"].contains("deletionTimestamp")) continue;
    auto it = tainted.find(pod.value("spec", json::object()).value("nodeName", ""));
    if (it == tainted.end()) continue;
    std::optional<base::WallTime> evict_at;
    for (const json& taint : it->second) {
      std::optional<base::WallTime> at = now;  // not tolerated: now
      for (const json& tol : pod["spec"].value("tolerations", json::array())) {
        if (!tolerates(tol, taint)) continue;
        if (!tol.contains("tolerationSeconds")) {
          at.reset();  // tolerated for ever
          break;
        }
        auto added = parseApiTime(taint.value("timeAdded", "")).value_or(now);
        const double secs = tol["tolerationSeconds"].get<double>() * options_.toleration_scale;
        at = added + std::chrono::duration_cast<base::WallTime::duration>(
                         std::chrono::duration<double>(secs));
        break;
      }
      if (at && (!evict_at || *at < *evict_at)) evict_at = at;
    }
    if (evict_at && *evict_at <= now) {
      (void)store_.remove(*pods_r, ns(pod), name(pod), {});
    }
  }
}

// (4)
void NodeLifecycle::podGc() {
  const base::MonoTime mono = clock_.monoNow();
  if (last_gc_ && mono - *last_gc_ < options_.pod_gc_period) return;
  last_gc_ = mono;
  auto pods_r = store_.findQualified("pods");
  if (!pods_r) return;
  std::set<std::string> out_of_service;
  for (const json& node : items(store_, "nodes")) {
    if (hasTaint(node, kOutOfService) && conditionStatus(node, "Ready") != "True") {
      out_of_service.insert(name(node));
    }
  }
  if (out_of_service.empty()) return;
  for (const json& pod : items(store_, "pods")) {
    if (!pod["metadata"].contains("deletionTimestamp")) continue;
    if (out_of_service.count(pod["spec"].value("nodeName", "")) == 0) continue;
    (void)store_.remove(*pods_r, ns(pod), name(pod), {.grace_period_seconds = 0});
  }
}

void NodeLifecycle::attachDetach() {
  auto va_r = store_.findQualified("volumeattachments.storage.k8s.io");
  if (!va_r) return;
  const base::WallTime now = clock_.wallNow();
  std::map<std::string, std::set<std::string>> in_use;  // node → PVs its pods use
  for (const json& pod : items(store_, "pods")) {
    for (const std::string& pv : podVolumes(store_, pod)) {
      in_use[pod["spec"].value("nodeName", "")].insert(pv);
    }
  }
  std::map<std::string, bool> released;  // node → its kubelet unmounted, or out of service
  for (const json& node : items(store_, "nodes")) {
    released[name(node)] = hasTaint(node, kOutOfService) || kubeletRunning(name(node));
  }
  std::set<std::string> seen;
  for (const json& va : items(store_, "volumeattachments.storage.k8s.io")) {
    const json spec = va.value("spec", json::object());
    const std::string n = spec.value("nodeName", "");
    const std::string pv = spec.value("source", json::object()).value("persistentVolumeName", "");
    seen.insert(name(va));
    if (in_use[n].count(pv) != 0) {
      unused_since_.erase(name(va));
      continue;
    }
    auto since = unused_since_.emplace(name(va), now).first->second;
    if (released[n] || now - since >= options_.max_wait_for_unmount) {
      (void)store_.remove(*va_r, "", name(va), {.grace_period_seconds = 0});
      unused_since_.erase(name(va));
    }
  }
  std::erase_if(unused_since_, [&](const auto& e) { return seen.count(e.first) == 0; });
}

// (5)
void NodeLifecycle::statefulSets() {
  auto pods_r = store_.findQualified("pods");
  if (!pods_r) return;
  std::vector<json> nodes = items(store_, "nodes");
  std::sort(nodes.begin(), nodes.end(),
            [](const json& a, const json& b) { return name(a) < name(b); });
  auto schedulable = [](const json& node) {
    if (node.value("spec", json::object()).value("unschedulable", false)) return false;
    if (conditionStatus(node, "Ready") != "True") return false;
    for (const json& t : node.value("spec", json::object()).value("taints", json::array())) {
      const std::string effect = t.value("effect", "");
      if (effect == "NoSchedule" || effect == "NoExecute") return false;
    }
    return true;
  };
  for (const json& sts : items(store_, "statefulsets.apps")) {
    const std::int64_t replicas = sts["spec"].value("replicas", 1);
    for (std::int64_t i = 0; i < replicas; ++i) {
      const std::string pod_name = name(sts) + "-" + std::to_string(i);
      if (store_.get("pods", ns(sts), pod_name)) continue;
      auto node = std::find_if(nodes.begin(), nodes.end(), schedulable);
      if (node == nodes.end()) continue;  // Pending, unschedulable: not created here
      json tmpl = sts["spec"].value("template", json::object());
      json pod = {
          {"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", pod_name},
            {"namespace", ns(sts)},
            {"labels", tmpl.value("metadata", json::object()).value("labels", json::object())},
            {"ownerReferences", json::array({{{"apiVersion", "apps/v1"},
                                              {"kind", "StatefulSet"},
                                              {"name", name(sts)},
                                              {"uid", sts["metadata"].value("uid", "")},
                                              {"controller", true},
                                              {"blockOwnerDeletion", true}}})}}},
          {"spec", tmpl.value("spec", json::object())}};
      pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] = pod_name;
      for (const json& vct : sts["spec"].value("volumeClaimTemplates", json::array())) {
        const std::string vname = name(vct);
        pod["spec"]["volumes"].push_back(
            {{"name", vname}, {"persistentVolumeClaim", {{"claimName", vname + "-" + pod_name}}}});
      }
      pod["spec"]["nodeName"] = name(*node);
      (void)store_.create(*pods_r, ns(sts), std::move(pod));
    }
  }
}

void NodeLifecycle::startPods() {
  auto pods_r = store_.findQualified("pods");
  if (!pods_r) return;
  const base::WallTime now = clock_.wallNow();
  for (const json& pod : items(store_, "pods")) {
    if (pod["metadata"].contains("deletionTimestamp")) continue;
    if (pod.value("status", json::object()).value("phase", "") != "Pending") continue;
    bool owned = false;
    for (const json& o : pod["metadata"].value("ownerReferences", json::array())) {
      owned = owned || o.value("kind", "") == "StatefulSet";
    }
    const std::string node = pod["spec"].value("nodeName", "");
    if (!owned || node.empty() || !kubeletRunning(node)) continue;
    bool attached = true;
    for (const std::string& pv : podVolumes(store_, pod)) {
      bool held_elsewhere = false;
      bool here = false;
      for (const json& va : items(store_, "volumeattachments.storage.k8s.io")) {
        const json spec = va.value("spec", json::object());
        if (spec.value("source", json::object()).value("persistentVolumeName", "") != pv) continue;
        (spec.value("nodeName", "") == node ? here : held_elsewhere) = true;
      }
      if (held_elsewhere) {
        attached = false;  // Multi-Attach error: the volume is still attached to another node
        continue;
      }
      if (!here) {
        (void)store_.put({{"apiVersion", "storage.k8s.io/v1"},
                          {"kind", "VolumeAttachment"},
                          {"metadata", {{"name", "csi-" + pv + "-" + node}}},
                          {"spec",
                           {{"attacher", "kubesim.csi"},
                            {"nodeName", node},
                            {"source", {{"persistentVolumeName", pv}}}}},
                          {"status", {{"attached", true}}}});
      }
    }
    if (!attached) continue;
    json next = pod;
    next["status"]["phase"] = "Running";
    next["status"]["startTime"] = formatApiTime(now, false);
    next["status"]["conditions"] =
        json::array({{{"type", "Ready"},
                      {"status", "True"},
                      {"lastTransitionTime", formatApiTime(now, false)}}});
    (void)store_.update(*pods_r, ns(pod), name(pod), next, "status");
  }
}

}  // namespace ekco::kubesim
