// What the api_address tests share: a Ready Node object, and the leader's (or a node's) cached
// record of one, as the node watches decode it (the control-plane role, Ready, the
// ekco.kurl.sh/ annotations, sorted).
#pragma once

#include <algorithm>
#include <string>

#include <nlohmann/json.hpp>

#include "kube/decode/json_fields.h"
#include "kube/decode/records.h"

namespace ekco::agent::testing {

inline nlohmann::json readyNode(const std::string& name, bool primary) {
  nlohmann::json labels = nlohmann::json::object();
  if (primary) labels["node-role.kubernetes.io/control-plane"] = "";
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", name}, {"labels", labels}}},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

inline kube::NodeRecord nodeRecordOf(const nlohmann::json& node) {
  kube::NodeRecord r;
  const nlohmann::json& meta = kube::jsonField(node, "metadata");
  r.name = kube::Atom(kube::jsonText(meta, "name"));
  r.control_plane =
      kube::jsonField(kube::jsonField(meta, "labels"), "node-role.kubernetes.io/control-plane")
          .is_string();
  r.conditions.push_back({.type = kube::Atom("Ready"), .status = kube::Atom("True")});
  const nlohmann::json& a = kube::jsonField(meta, "annotations");
  if (a.is_object()) {
    for (const auto& [k, v] : a.items()) {
      if (k.starts_with(kube::kEkcoAnnotationPrefix) && v.is_string()) {
        r.ekco_annotations.emplace_back(k, v.get<std::string>());
      }
    }
  }
  std::sort(r.ekco_annotations.begin(), r.ekco_annotations.end());
  return r;
}

}  // namespace ekco::agent::testing
