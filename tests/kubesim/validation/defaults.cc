#include "tests/kubesim/validation/defaults.h"

#include <algorithm>
#include <set>
#include <string>

#include "tests/kubesim/validation/types.h"

namespace ekco::kubesim {

using nlohmann::json;

namespace {

bool isCore(const ResourceInfo& r, const char* plural) {
  return r.group.empty() && r.plural == plural;
}

// Sets obj[key] to value when it is absent or null.
void setDefault(json& obj, const char* key, const json& value) {
  if (!obj.is_object()) return;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) obj[key] = value;
}

json& child(json& obj, const char* key) {
  json& c = obj[key];
  if (!c.is_object()) c = json::object();
  return c;
}

// "nginx" and "nginx:latest" pull Always; a tag or digest otherwise IfNotPresent.
std::string pullPolicy(const std::string& image) {
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  auto slash = image.rfind('/');
  auto colon = image.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return "Always";
  return image.substr(colon + 1) == "latest" ? "Always" : "IfNotPresent";
}

void defaultContainers(json& containers) {
  if (!containers.is_array()) return;
  for (json& c : containers) {
    if (!c.is_object()) continue;
    setDefault(c, "terminationMessagePath", "/dev/termination-log");
    setDefault(c, "terminationMessagePolicy", "File");
    if (c.contains("image") && c["image"].is_string()) {
      setDefault(c, "imagePullPolicy", pullPolicy(c["image"].get<std::string>()));
    }
    setDefault(c, "resources", json::object());
    json& res = c["resources"];
    // Requests default to the limits (SetDefaults_Pod).
    if (res.is_object() && res.contains("limits") && res["limits"].is_object()) {
      json& requests = child(res, "requests");
      for (const auto& [name, q] : res["limits"].items()) setDefault(requests, name.c_str(), q);
    }
    if (c.contains("ports") && c["ports"].is_array()) {
      for (json& p : c["ports"]) setDefault(p, "protocol", "TCP");
    }
  }
}

void defaultPodSpec(json& spec) {
  if (!spec.is_object()) return;
  setDefault(spec, "restartPolicy", "Always");
  setDefault(spec, "dnsPolicy", "ClusterFirst");
  setDefault(spec, "terminationGracePeriodSeconds", 30);
  setDefault(spec, "securityContext", json::object());
  setDefault(spec, "schedulerName", "default-scheduler");
  setDefault(spec, "enableServiceLinks", true);
  defaultContainers(spec["containers"]);
  if (spec.contains("initContainers")) defaultContainers(spec["initContainers"]);
  if (spec.contains("volumes") && spec["volumes"].is_array()) {
    for (json& v : spec["volumes"]) {
      if (!v.is_object()) continue;
      for (const char* source : {"configMap", "secret"}) {
        if (v.contains(source) && v[source].is_object()) setDefault(v[source], "defaultMode", 420);
      }
    }
  }
}

void defaultTemplate(json& spec) {
  if (!spec.is_object() || !spec.contains("template") || !spec["template"].is_object()) return;
  defaultPodSpec(child(spec["template"], "spec"));
}

void defaultService(json& svc) {
  json& spec = child(svc, "spec");
  setDefault(spec, "type", "ClusterIP");
  setDefault(spec, "sessionAffinity", "None");
  if (spec["type"] != "ExternalName") setDefault(spec, "internalTrafficPolicy", "Cluster");
  if (spec["type"] == "NodePort" || spec["type"] == "LoadBalancer") {
    setDefault(spec, "externalTrafficPolicy", "Cluster");
  }
  if (spec["type"] == "LoadBalancer") setDefault(spec, "allocateLoadBalancerNodePorts", true);
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (json& p : spec["ports"]) {
      if (!p.is_object()) continue;
      setDefault(p, "protocol", "TCP");
      if (p.contains("port")) setDefault(p, "targetPort", p["port"]);
    }
  }
}

void foldStringData(json& secret) {
  setDefault(secret, "type", "Opaque");
  auto it = secret.find("stringData");
  if (it == secret.end()) return;
  if (it->is_object()) {
    json& data = child(secret, "data");
    for (const auto& [k, v] : it->items()) {
      if (v.is_string()) data[k] = encodeBase64(v.get<std::string>());
    }
  }
  secret.erase("stringData");
}

bool hasResources(const json& c, const char* kind) {
  const json& res = c.value("resources", json::object());
  return res.is_object() && res.contains(kind) && res[kind].is_object() && !res[kind].empty();
}

}  // namespace

void applyDefaults(const ResourceInfo& r, json& object) {
  if (!object.is_object()) return;
  if (isCore(r, "pods")) {
    defaultPodSpec(child(object, "spec"));
  } else if (isCore(r, "services")) {
    defaultService(object);
  } else if (isCore(r, "secrets")) {
    foldStringData(object);
  } else if (isCore(r, "namespaces")) {
    json& labels = child(child(object, "metadata"), "labels");
    if (object["metadata"].contains("name")) {
      labels["kubernetes.io/metadata.name"] = object["metadata"]["name"];
    }
  } else if (isCore(r, "replicationcontrollers")) {
    setDefault(child(object, "spec"), "replicas", 1);
    defaultTemplate(object["spec"]);
  } else if (r.group == "apps") {
    json& spec = child(object, "spec");
    if (r.plural == "deployments") {
      setDefault(spec, "replicas", 1);
      json& strategy = child(spec, "strategy");
      setDefault(strategy, "type", "RollingUpdate");
      if (strategy["type"] == "RollingUpdate") {
        json& rolling = child(strategy, "rollingUpdate");
        setDefault(rolling, "maxUnavailable", "25%");
        setDefault(rolling, "maxSurge", "25%");
      }
      setDefault(spec, "revisionHistoryLimit", 10);
      setDefault(spec, "progressDeadlineSeconds", 600);
    } else if (r.plural == "statefulsets") {
      setDefault(spec, "replicas", 1);
      setDefault(spec, "podManagementPolicy", "OrderedReady");
      json& strategy = child(spec, "updateStrategy");
      setDefault(strategy, "type", "RollingUpdate");
      if (strategy["type"] == "RollingUpdate")
        setDefault(child(strategy, "rollingUpdate"), "partition", 0);
      setDefault(spec, "revisionHistoryLimit", 10);
      json& retention = child(spec, "persistentVolumeClaimRetentionPolicy");
      setDefault(retention, "whenDeleted", "Retain");
      setDefault(retention, "whenScaled", "Retain");
    } else if (r.plural == "daemonsets") {
      json& strategy = child(spec, "updateStrategy");
      setDefault(strategy, "type", "RollingUpdate");
      if (strategy["type"] == "RollingUpdate") {
        json& rolling = child(strategy, "rollingUpdate");
        setDefault(rolling, "maxUnavailable", 1);
        setDefault(rolling, "maxSurge", 0);
      }
      setDefault(spec, "revisionHistoryLimit", 10);
    } else if (r.plural == "replicasets") {
      setDefault(spec, "replicas", 1);
    }
    defaultTemplate(spec);
  } else if (r.group == "batch" && r.plural == "jobs") {
    defaultTemplate(child(object, "spec"));
  }
}

void admitPod(json& pod, bool create) {
  json& spec = child(pod, "spec");
  if (create) {
    setDefault(spec, "serviceAccountName", "default");
    spec["serviceAccount"] = spec["serviceAccountName"];
    if (!spec.contains("priorityClassName")) setDefault(spec, "priority", 0);
    setDefault(spec, "preemptionPolicy", "PreemptLowerPriority");
  }
  bool not_ready = false;
  bool unreachable = false;
  json& tolerations = spec["tolerations"];
  if (!tolerations.is_array()) tolerations = json::array();
  for (const json& t : tolerations) {
    if (!t.is_object()) continue;
    std::string key = t.value("key", "");
    std::string effect = t.value("effect", "");
    bool effect_ok = effect.empty() || effect == "NoExecute";
    if ((key == "node.kubernetes.io/not-ready" || key.empty()) && effect_ok) not_ready = true;
    if ((key == "node.kubernetes.io/unreachable" || key.empty()) && effect_ok) unreachable = true;
  }
  for (auto [have, key] : {std::pair{not_ready, "node.kubernetes.io/not-ready"},
                           std::pair{unreachable, "node.kubernetes.io/unreachable"}}) {
    if (have) continue;
    tolerations.push_back({{"key", key},
                           {"operator", "Exists"},
                           {"effect", "NoExecute"},
                           {"tolerationSeconds", 300}});
  }
}

std::string qosClass(const json& pod) {
  const json& spec = pod.value("spec", json::object());
  bool any = false;
  bool guaranteed = true;
  for (const char* list : {"containers", "initContainers"}) {
    for (const json& c : spec.value(list, json::array())) {
      if (!c.is_object()) continue;
      bool requests = hasResources(c, "requests");
      bool limits = hasResources(c, "limits");
      if (requests || limits) any = true;
      const json& res = c.value("resources", json::object());
      for (const char* name : {"cpu", "memory"}) {
        const json& l = res.value("limits", json::object());
        const json& q = res.value("requests", json::object());
        if (!l.contains(name) || (q.contains(name) && q[name] != l[name])) guaranteed = false;
      }
    }
  }
  if (!any) return "BestEffort";
  return guaranteed ? "Guaranteed" : "Burstable";
}

void prepareForCreate(const ResourceInfo& r, json& object) {
  json& meta = child(object, "metadata");
  if (tracksGeneration(r)) meta["generation"] = 1;
  if (isCore(r, "pods")) {
    object["status"] = {{"phase", "Pending"}, {"qosClass", qosClass(object)}};
  } else if (isCore(r, "namespaces")) {
    object["status"] = {{"phase", "Active"}};
    json& finalizers = child(object, "spec")["finalizers"];
    if (!finalizers.is_array()) finalizers = json::array();
    if (std::find(finalizers.begin(), finalizers.end(), json("kubernetes")) == finalizers.end()) {
      finalizers.push_back("kubernetes");
    }
  } else if (isCore(r, "services")) {
    object["status"] = {{"loadBalancer", json::object()}};
  } else if (isCore(r, "persistentvolumeclaims") || isCore(r, "persistentvolumes")) {
    object["status"] = {{"phase", "Pending"}};
  } else if (r.hasSubresource("status") && !isCore(r, "nodes")) {
    object.erase("status");
  }
}

namespace {

bool isBuiltinGroup(const std::string& group) {
  static const std::set<std::string> kBuiltinGroups = {"",
                                                       "apps",
                                                       "batch",
                                                       "policy",
                                                       "autoscaling",
                                                       "admissionregistration.k8s.io",
                                                       "apiextensions.k8s.io",
                                                       "apiregistration.k8s.io",
                                                       "authentication.k8s.io",
                                                       "authorization.k8s.io",
                                                       "certificates.k8s.io",
                                                       "coordination.k8s.io",
                                                       "discovery.k8s.io",
                                                       "events.k8s.io",
                                                       "flowcontrol.apiserver.k8s.io",
                                                       "internal.apiserver.k8s.io",
                                                       "networking.k8s.io",
                                                       "node.k8s.io",
                                                       "rbac.authorization.k8s.io",
                                                       "resource.k8s.io",
                                                       "scheduling.k8s.io",
                                                       "storage.k8s.io",
                                                       "storagemigration.k8s.io"};
  return kBuiltinGroups.count(group) != 0;
}

}  // namespace

bool tracksGeneration(const ResourceInfo& r) {
  if (!isBuiltinGroup(r.group)) return true;  // a custom resource
  static const std::set<std::string> kTracked = {
      "apps/deployments",
      "apps/replicasets",
      "apps/statefulsets",
      "apps/daemonsets",
      "/replicationcontrollers",
      "batch/jobs",
      "batch/cronjobs",
      "policy/poddisruptionbudgets",
      "apiextensions.k8s.io/customresourcedefinitions",
      "discovery.k8s.io/endpointslices",
      "networking.k8s.io/ingresses",
      "networking.k8s.io/networkpolicies",
      "admissionregistration.k8s.io/mutatingwebhookconfigurations",
      "admissionregistration.k8s.io/validatingwebhookconfigurations",
      "admissionregistration.k8s.io/validatingadmissionpolicies",
      "flowcontrol.apiserver.k8s.io/flowschemas",
      "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations"};
  return kTracked.count(r.group + "/" + r.plural) != 0;
}

bool bumpsGeneration(const ResourceInfo& r, const json& next, const json& old) {
  if (!tracksGeneration(r)) return false;
  auto without = [](json obj, bool status) {
    obj.erase("metadata");
    if (status) obj.erase("status");
    obj.erase("apiVersion");
    obj.erase("kind");
    return obj;
  };
  const bool strip_status = isBuiltinGroup(r.group) || r.hasSubresource("status");
  if (without(next, strip_status) != without(old, strip_status)) return true;
  if (r.group == "apps" && r.plural == "deployments") {
    return next["metadata"].value("annotations", json::object()) !=
           old["metadata"].value("annotations", json::object());
  }
  return false;
}

}  // namespace ekco::kubesim
