// The cluster the demo simulates: its nodes (names, loopback addresses, roles), the Rook layout,
// and the objects the API holds for them (Nodes, kubeadm's ClusterStatus, the kubernetes
// EndpointSlice, the workloads, a folder of manifests). The narrative (demo.cc) starts the API
// with them and changes them as the story goes (cp-3 dies, worker-3 joins).
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ekco::demo {

struct NodeSpec {
  std::string name;
  std::string ip;
  bool primary;
};

// cp-1..cp-3 (127.0.0.11-13) and worker-1/-2 (127.0.0.21-22).
extern const std::vector<NodeSpec> kNodes;
inline constexpr std::size_t kDead = 2;  // cp-3, the primary that dies
// The node that joins later, and the OSDs: Rook runs one on cp-1 and cp-2 from the start and one
// on the new node once ekco has added it to the CephCluster's storage nodes.
extern const NodeSpec kJoining;
extern const std::vector<std::pair<int, std::string>> kFirstOsds;
inline constexpr int kJoiningOsd = 12;  // an id above 9: EKCO's parser missed those

// The node as its kubelet registers it: Ready, its addresses, a primary's role label and taint.
nlohmann::json nodeObject(const NodeSpec& n);
// default/kubernetes with one ready endpoint per live apiserver.
nlohmann::json apiserverSlice(const std::vector<std::string>& ips);
// kubeadm-config's ClusterStatus listing these primaries' apiEndpoints.
std::string clusterStatus(const std::vector<NodeSpec>& primaries);
// The workloads: on every node a web replica and a kube-proxy; on the primaries their
// kube-apiserver (kubeadm's advertise-address annotation); db-0 on cp-3.
std::vector<nlohmann::json> workloads();
// Every object in the YAML files of `dir` (kubesim::loadManifestDir); the demo stops on an error.
std::vector<nlohmann::json> manifests(const std::filesystem::path& dir);

}  // namespace ekco::demo
