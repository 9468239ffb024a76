// Object loading (YAML/JSON), exec scripts and generated clusters for ekco-kubesim.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/strings.h"
#include "tests/kubesim/server/server.h"

namespace ekco::kubesim {
namespace {

using nlohmann::json;

// YAML 1.2 core-schema scalars: plain null/bool/int/float are typed, everything else (and every
// quoted scalar) is a string.
json scalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  char* end = nullptr;
  long long i = std::strtoll(text.c_str(), &end, 10);
  if (end != nullptr && *end == '\0' && (std::isdigit(static_cast<unsigned char>(text.back())))) {
    return i;
  }
  double d = std::strtod(text.c_str(), &end);
  if (end != nullptr && *end == '\0' && text.find_first_of("0123456789") != std::string::npos &&
      text.find_first_not_of("0123456789.eE+-") == std::string::npos) {
    return d;
  }
  return text;
}

json toJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = toJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) out.push_back(toJson(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return scalarToJson(node);
    default:
      return nullptr;
  }
}

}  // namespace

base::Result<std::vector<json>> parseObjects(std::string_view text) {
  std::vector<json> out;
  try {
    for (const YAML::Node& doc : YAML::LoadAll(std::string(text))) {
      json obj = toJson(doc);
      if (obj.is_null()) continue;
      if (!obj.is_object()) {
        return base::Error("a document is not an object", base::ErrorCode::kParse);
      }
      std::string kind = obj.value("kind", "");
      if (kind.size() >= 4 && kind.compare(kind.size() - 4, 4, "List") == 0 &&
          obj.contains("items")) {
        for (json& item : obj["items"]) out.push_back(std::move(item));
      } else {
        out.push_back(std::move(obj));
      }
    }
  } catch (const YAML::Exception& e) {
    return base::Error(std::string("parse objects: ") + e.what(), base::ErrorCode::kParse);
  }
  return out;
}

base::Result<std::vector<json>> loadManifestDir(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  if (ec) return base::Error(dir + ": " + ec.message(), base::ErrorCode::kIo);
  std::sort(files.begin(), files.end());
  std::vector<json> out;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return base::Error(f.string() + ": cannot read the file", base::ErrorCode::kIo);
    std::stringstream text;
    text << in.rdbuf();
    auto objects = parseObjects(text.str());
    if (!objects) return std::move(objects).error().wrap(f.string());
    out.insert(out.end(), objects->begin(), objects->end());
  }
  return out;
}

base::Result<std::vector<ExecReply>> parseExecScript(std::string_view text) {
  std::vector<ExecReply> out;
  json list;
  try {
    list = toJson(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    return base::Error(std::string("parse exec script: ") + e.what(), base::ErrorCode::kParse);
  }
  if (!list.is_array()) {
    return base::Error("exec script: expected a list of {command, stdout, stderr, exitCode}",
                       base::ErrorCode::kParse);
  }
  for (const json& entry : list) {
    if (!entry.is_object())
      return base::Error("exec script: entry is not a map", base::ErrorCode::kParse);
    ExecReply reply;
    const json& command = entry.value("command", json::array());
    if (command.is_string()) {
      reply.command_prefix.push_back(command.get<std::string>());
    } else if (command.is_array()) {
      for (const json& c : command) {
        reply.command_prefix.push_back(c.is_string() ? c.get<std::string>() : c.dump());
      }
    }
    reply.stdout_data = entry.value("stdout", "");
    reply.stderr_data = entry.value("stderr", "");
    reply.exit_code = entry.value("exitCode", 0);
    // Run mode (exec_run.h): {command: [ceph], run: true, env: {CEPH_CONF: ...}, pod: prefix}.
    if (auto run = entry.find("run"); run != entry.end()) {
      if (!run->is_boolean()) {
        return base::Error("exec script: \"run\" must be true or false", base::ErrorCode::kParse);
      }
      reply.run = run->get<bool>();
    }
    if (auto env = entry.find("env"); env != entry.end()) {
      if (!env->is_object()) {
        return base::Error("exec script: \"env\" must be a map of strings",
                           base::ErrorCode::kParse);
      }
      for (const auto& [k, v] : env->items()) {
        if (!v.is_string()) {
          return base::Error("exec script: env." + k + " must be a string",
                             base::ErrorCode::kParse);
        }
        reply.run_env[k] = v.get<std::string>();
      }
    }
    reply.pod_prefix = entry.value("pod", "");
    if (reply.run && reply.command_prefix.empty()) {
      return base::Error("exec script: a run entry needs a command prefix (e.g. [ceph])",
                         base::ErrorCode::kParse);
    }
    out.push_back(std::move(reply));
  }
  return out;
}

// Object literals, one kind after another (nodes, then their pods); read best as one piece.
std::vector<json> generateCluster(int nodes, int pods) {
  std::vector<json> out;
  for (int i = 0; i < nodes; ++i) {
    std::string name = "node-" + std::to_string(i);
    bool control_plane = i == 0;
    json labels = {{"kubernetes.io/hostname", name},
                   {"kubernetes.io/os", "linux"},
                   {"kubernetes.io/arch", "amd64"},
                   {"beta.kubernetes.io/os", "linux"}};
    json taints = json::array();
    if (control_plane) {
      labels["node-role.kubernetes.io/control-plane"] = "";
      taints.push_back(
          {{"key", "node-role.kubernetes.io/control-plane"}, {"effect", "NoSchedule"}});
    }
    json conditions = json::array();
    for (const char* type : {"MemoryPressure", "DiskPressure", "PIDPressure"}) {
      conditions.push_back({{"type", type},
                            {"status", "False"},
                            {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                            {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                            {"reason", std::string("KubeletHasNo") + type},
                            {"message", "kubelet is healthy"}});
    }
    conditions.push_back({{"type", "Ready"},
                          {"status", "True"},
                          {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                          {"lastTransitionTime", "2026-01-01T00:00:00Z"},
                          {"reason", "KubeletReady"},
                          {"message", "kubelet is posting ready status"}});
    json node = {
        {"apiVersion", "v1"},
        {"kind", "Node"},
        {"metadata", {{"name", name}, {"labels", labels}}},
        {"spec", {{"podCIDR", "10.32." + std::to_string(i % 256) + ".0/24"}}},
        {"status",
         {{"conditions", conditions},
          {"addresses",
           {{{"type", "InternalIP"},
             {"address", "10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256 + 1)}},
            {{"type", "Hostname"}, {"address", name}}}},
          {"nodeInfo",
           {{"kubeletVersion", "v1.32.4"},
            {"containerRuntimeVersion", "containerd://1.7.24"},
            {"osImage", "Debian GNU/Linux 12 (bookworm)"},
            {"architecture", "amd64"},
            {"operatingSystem", "linux"}}}}}};
    if (!taints.empty()) node["spec"]["taints"] = taints;
    out.push_back(node);
  }
  for (int i = 0; i < pods; ++i) {
    std::string app = "app-" + std::to_string(i % 20);
    // Names as a ReplicaSet makes them: <app>-<template hash>-<5 random characters>.
    std::string suffix;
    for (int n = i, k = 0; k < 5; ++k, n /= 36)
      suffix += "0123456789abcdefghijklmnopqrstuvwxyz"[n % 36];
    std::string name = app + "-5d8f7c9b4-" + suffix;
    std::string node = nodes > 0 ? "node-" + std::to_string(i % nodes) : "";
    json pod = {
        {"apiVersion", "v1"},
        {"kind", "Pod"},
        {"metadata",
         {{"name", name},
          {"namespace", "ns-" + std::to_string(i % 5)},
          {"labels", {{"app", app}, {"pod-template-hash", "5d8f7c9b4"}}},
          {"ownerReferences",
           {{{"apiVersion", "apps/v1"},
             {"kind", "ReplicaSet"},
             {"name", app + "-5d8f7c9b4"},
             {"uid", "00000000-0000-4000-8000-" + std::to_string(100000000000 + i % 20)},
             {"controller", true},
             {"blockOwnerDeletion", true}}}}}},
        {"spec",
         {{"nodeName", node},
          {"terminationGracePeriodSeconds", 30},
          {"serviceAccountName", "default"},
          {"restartPolicy", "Always"},
          {"dnsPolicy", "ClusterFirst"},
          {"schedulerName", "default-scheduler"},
          {"tolerations",
           {{{"key", "node.kubernetes.io/not-ready"},
             {"operator", "Exists"},
             {"effect", "NoExecute"},
             {"tolerationSeconds", 300}},
            {{"key", "node.kubernetes.io/unreachable"},
             {"operator", "Exists"},
             {"effect", "NoExecute"},
             {"tolerationSeconds", 300}}}},
          {"containers",
           {{{"name", "main"},
             {"image", "registry.k8s.io/pause:3.9"},
             {"resources", {{"requests", {{"cpu", "10m"}, {"memory", "16Mi"}}}}},
             {"volumeMounts", {{{"name", "data"}, {"mountPath", "/data"}}}}}}},
          {"volumes",
           {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", "data-" + name}}}}}}}},
        {"status",
         {{"phase", "Running"},
          {"qosClass", "Burstable"},
          {"hostIP", "10.0.0.1"},
          {"podIP", "10.32.0." + std::to_string(i % 250 + 2)},
          {"startTime", "2026-01-01T00:00:00Z"},
          {"conditions",
           [] {
             json conditions = json::array();
             for (const char* type : {"Initialized", "Ready", "ContainersReady", "PodScheduled"}) {
               conditions.push_back({{"type", type},
                                     {"status", "True"},
                                     {"lastProbeTime", nullptr},
                                     {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
             }
             return conditions;
           }()},
          {"containerStatuses",
           {{{"name", "main"},
             {"ready", true},
             {"started", true},
             {"restartCount", 0},
             {"image", "registry.k8s.io/pause:3.9"},
             {"imageID",
              "registry.k8s.io/"
              "pause@sha256:7031c1b283388d2c2e09b57badb803c05ebed362dc88d84b480cc47f72a21097"},
             {"containerID", "containerd://" + std::string(64, 'a')},
             {"state", {{"running", {{"startedAt", "2026-01-01T00:00:01Z"}}}}}}}}}}};
    out.push_back(pod);
  }
  return out;
}

json namespaceObject(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/metadata.name", name}}}}},
          {"spec", {{"finalizers", {"kubernetes"}}}},
          {"status", {{"phase", "Active"}}}};
}

json configMapObject(const std::string& ns, const std::string& name, json data) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"data", std::move(data)}};
}

json readyNodeObject(const std::string& name, const std::string& internal_ip, bool control_plane) {
  json labels = {{"kubernetes.io/hostname", name}};
  if (control_plane) labels["node-role.kubernetes.io/control-plane"] = "";
  json status = {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}};
  if (!internal_ip.empty()) {
    status["addresses"] = {{{"type", "InternalIP"}, {"address", internal_ip}}};
  }
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status", status}};
}

json runningPodObject(const std::string& ns, const std::string& name, const std::string& node,
                      json labels, json annotations) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name},
            {"namespace", ns},
            {"labels", std::move(labels)},
            {"annotations", std::move(annotations)}}},
          {"spec", {{"nodeName", node}, {"containers", {{{"name", "main"}, {"image", "app:1"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

json unreachableNode(json node, const std::string& since) {
  node["status"]["conditions"] = {{{"type", "Ready"},
                                   {"status", "Unknown"},
                                   {"lastTransitionTime", since},
                                   {"reason", "NodeStatusUnknown"},
                                   {"message", "Kubelet stopped posting node status."}}};
  json taints = json::array();
  for (const json& t : node["spec"].value("taints", json::array())) {
    if (t.value("key", "") != "node.kubernetes.io/unreachable") taints.push_back(t);
  }
  taints.push_back(
      {{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoExecute"}, {"timeAdded", since}});
  taints.push_back({{"key", "node.kubernetes.io/unreachable"}, {"effect", "NoSchedule"}});
  node["spec"]["taints"] = std::move(taints);
  return node;
}

json kubernetesEndpointSlice(const std::string& name, const std::vector<std::string>& addresses,
                             int port) {
  json endpoints = json::array();
  for (const auto& address : addresses) {
    endpoints.push_back({{"addresses", {address}}, {"conditions", {{"ready", true}}}});
  }
  return {{"apiVersion", "discovery.k8s.io/v1"},
          {"kind", "EndpointSlice"},
          {"metadata",
           {{"name", name},
            {"namespace", "default"},
            {"labels", {{"kubernetes.io/service-name", "kubernetes"}}}}},
          {"addressType", "IPv4"},
          {"endpoints", endpoints},
          {"ports", {{{"name", "https"}, {"port", port}, {"protocol", "TCP"}}}}};
}

json nodeLeaseObject(const std::string& node, const std::string& renew_time) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata", {{"name", node}, {"namespace", "kube-node-lease"}}},
          {"spec", {{"holderIdentity", node}, {"renewTime", renew_time}}}};
}

std::string kubeApiserverManifest(const std::string& advertise_address, int port) {
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\n  namespace: "
         "kube-system\nspec:\n  containers:\n  - name: kube-apiserver\n    image: "
         "registry.k8s.io/kube-apiserver:v1.31.0\n    command:\n    - kube-apiserver\n"
         "    - --advertise-address=" +
         advertise_address + "\n    - --secure-port=" + std::to_string(port) + "\n";
}

base::Result<std::uint16_t> freeLoopbackPort(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    return base::Error("not an IPv4 address: " + base::quoteForMessage(address),
                       base::ErrorCode::kInvalidArgument);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return base::Error("socket: " + std::string(std::strerror(errno)));
  socklen_t len = sizeof addr;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return base::Error("no free loopback port: " + std::string(std::strerror(err)));
  return ntohs(addr.sin_port);
}

}  // namespace ekco::kubesim
