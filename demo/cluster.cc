#include "demo/cluster.h"

#include "bench/bench_support.h"
#include "tests/kubesim/server/server.h"

namespace ekco::demo {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<NodeSpec> kNodes = {{"cp-1", "127.0.0.11", true},
                                      {"cp-2", "127.0.0.12", true},
                                      {"cp-3", "127.0.0.13", true},
                                      {"worker-1", "127.0.0.21", false},
                                      {"worker-2", "127.0.0.22", false}};
const NodeSpec kJoining = {"worker-3", "127.0.0.23", false};
const std::vector<std::pair<int, std::string>> kFirstOsds = {{0, "cp-1"}, {1, "cp-2"}};

json nodeObject(const NodeSpec& n) {
  json labels = {{"kubernetes.io/hostname", n.name}, {"kubernetes.io/os", "linux"}};
  if (n.primary) labels["node-role.kubernetes.io/control-plane"] = "";
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", n.name}, {"labels", labels}}},
               {"spec", json::object()},
               {"status",
                {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}},
                 {"addresses",
                  {{{"type", "InternalIP"}, {"address", n.ip}},
                   {{"type", "Hostname"}, {"address", n.name}}}}}}};
  if (n.primary) {
    node["spec"]["taints"] = {
        {{"key", "node-role.kubernetes.io/control-plane"}, {"effect", "NoSchedule"}}};
  }
  return node;
}

json apiserverSlice(const std::vector<std::string>& ips) {
  return kubesim::kubernetesEndpointSlice("kubernetes", ips, 6443);
}

std::string clusterStatus(const std::vector<NodeSpec>& primaries) {
  std::string out = "apiEndpoints:\n";
  for (const auto& n : primaries) {
    out += "  " + n.name + ": {advertiseAddress: " + n.ip + ", bindPort: 6443}\n";
  }
  return out + "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterStatus\n";
}

std::vector<json> workloads() {
  std::vector<json> out;
  for (const auto& n : kNodes) {
    out.push_back(
        kubesim::runningPodObject("default", "web-5d8f7-" + n.name, n.name, {{"app", "web"}}));
    out.push_back(kubesim::runningPodObject("kube-system", "kube-proxy-" + n.name, n.name,
                                            {{"k8s-app", "kube-proxy"}}));
    if (n.primary) {
      out.push_back(kubesim::runningPodObject(
          "kube-system", "kube-apiserver-" + n.name, n.name,
          {{"component", "kube-apiserver"}, {"tier", "control-plane"}},
          {{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint", n.ip + ":6443"}}));
    }
  }
  out.push_back(kubesim::runningPodObject("default", "db-0", "cp-3", {{"app", "db"}}));
  return out;
}

std::vector<json> manifests(const fs::path& dir) {
  auto objects = kubesim::loadManifestDir(dir.string());
  if (!objects) bench::fail(objects.error().message());
  return std::move(*objects);
}

}  // namespace ekco::demo
