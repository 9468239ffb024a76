// Rook custom resources shaped as kURL's rook add-on installs them (CephCluster rook-ceph,
// CephBlockPool, CephFilesystem with the single-node MDS placement, CephObjectStore), the
// operator ConfigMap and a rook-ceph-tools pod, all in namespace rook-ceph. For the rook tests and
// the demo; no test framework here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ekco::rook_testing {

inline nlohmann::json rookObject(const std::string& kind, const std::string& name,
                                 nlohmann::json spec) {
  return {{"apiVersion", "ceph.rook.io/v1"},
          {"kind", kind},
          {"metadata", {{"name", name}, {"namespace", "rook-ceph"}}},
          {"spec", std::move(spec)}};
}

// Rook's toolbox, where ekco runs `ceph` (kubesim's exec runs the real CLI for the Ceph fixture).
inline nlohmann::json rookToolsPod() {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "rook-ceph-tools-5f8d"},
            {"namespace", "rook-ceph"},
            {"labels", {{"app", "rook-ceph-tools"}}}}},
          {"spec", {{"containers", {{{"name", "rook-ceph-tools"}, {"image", "ceph"}}}}}},
          {"status", {{"phase", "Running"}}}};
}

// What the cluster looks like: kURL on its first node has one storage node, one mon, one mgr and
// size-1 pools (the defaults).
struct RookLayout {
  std::vector<std::string> storage_nodes{"node-1"};
  int pool_size = 1;
  int mons = 1;
  int mgrs = 1;
};

inline std::vector<nlohmann::json> kurlRookObjects(const RookLayout& layout = {}) {
  using nlohmann::json;
  const json preferred =
      json::array({{{"weight", 100},
                    {"podAffinityTerm",
                     {{"labelSelector", {{"matchLabels", {{"app", "rook-ceph-mds"}}}}},
                      {"topologyKey", "kubernetes.io/hostname"}}}},
                   {{"weight", 50},
                    {"podAffinityTerm",
                     {{"labelSelector", {{"matchLabels", {{"app", "rook-ceph-mds"}}}}},
                      {"topologyKey", "topology.kubernetes.io/zone"}}}}});
  const json pool = {{"replicated", {{"size", layout.pool_size}}}};
  json nodes = json::array();
  for (const std::string& n : layout.storage_nodes) nodes.push_back({{"name", n}});
  return {
      rookObject("CephCluster", "rook-ceph",
                 {{"mon", {{"count", layout.mons}}},
                  {"mgr", {{"count", layout.mgrs}}},
                  {"storage", {{"useAllNodes", false}, {"nodes", nodes}}}}),
      rookObject("CephBlockPool", "replicapool", pool),
      rookObject("CephFilesystem", "rook-shared-fs",
                 {{"metadataPool", pool},
                  {"dataPools", {pool}},
                  {"metadataServer",
                   {{"activeCount", 1},
                    {"placement",
                     {{"podAntiAffinity",
                       {{"preferredDuringSchedulingIgnoredDuringExecution", preferred}}}}}}}}),
      rookObject("CephObjectStore", "rook-ceph-store",
                 {{"metadataPool", pool}, {"dataPool", pool}}),
      {{"apiVersion", "v1"},
       {"kind", "ConfigMap"},
       {"metadata", {{"name", "rook-ceph-operator-config"}, {"namespace", "rook-ceph"}}},
       {"data", {{"ROOK_LOG_LEVEL", "INFO"}}}},
      rookToolsPod(),
  };
}

}  // namespace ekco::rook_testing
