#include "agent/features/purge/purge_kubeadm.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>

#include "haproxy/render.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using nlohmann::json;

namespace {

struct ApiEndpoint {
  std::string address{};
  int port = 6443;
};

// node[a] or node[b] (kubeadm's key, or the lower-case one of ekco#107).
YAML::Node either(const YAML::Node& node, const char* a, const char* b) {
  if (!node || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  if (node[a]) return node[a];
  return node[b];
}

// "10.0.0.1:6443" or "[fd00::1]:6443" → the address; "" when it does not parse.
std::string hostOf(const std::string& endpoint) {
  auto parsed = haproxy::parseEndpoint(endpoint);
  return parsed ? parsed->host : std::string();
}

}  // namespace

base::Result<ClusterStatusEdit> removeApiEndpoint(std::string_view cluster_status_yaml,
                                                  std::string_view node) {
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(cluster_status_yaml));
  } catch (const YAML::Exception& e) {
    return Error(std::string("kubeadm-config ClusterStatus: not YAML: ") + e.what(),
                 ErrorCode::kParse);
  }
  if (!doc.IsMap()) return Error("kubeadm-config ClusterStatus: not a mapping", ErrorCode::kParse);
  const bool malformed = !doc["apiEndpoints"] && doc["apiendpoints"];
  const YAML::Node endpoints = either(doc, "apiEndpoints", "apiendpoints");
  std::map<std::string, ApiEndpoint> entries;
  if (endpoints) {
    if (!endpoints.IsMap()) {
      return Error("kubeadm-config ClusterStatus: apiEndpoints is not a mapping",
                   ErrorCode::kParse);
    }
    try {
      for (const auto& kv : endpoints) {
        ApiEndpoint e;
        const YAML::Node addr = either(kv.second, "advertiseAddress", "advertiseaddress");
        const YAML::Node port = either(kv.second, "bindPort", "bindport");
        if (addr) e.address = addr.as<std::string>();
        if (port) e.port = port.as<int>();
        entries[kv.first.as<std::string>()] = e;
      }
    } catch (const YAML::Exception& e) {
      return Error(std::string("kubeadm-config ClusterStatus: apiEndpoints: ") + e.what(),
                   ErrorCode::kParse);
    }
  }
  ClusterStatusEdit edit;
  auto it = entries.find(std::string(node));
  if (it != entries.end()) {
    edit.had_entry = true;
    edit.removed_address = it->second.address;
    entries.erase(it);
  }
  for (const auto& [name, e] : entries) {
    if (!e.address.empty()) edit.remaining_addresses.push_back(e.address);
  }
  std::sort(edit.remaining_addresses.begin(), edit.remaining_addresses.end());
  if (!edit.had_entry && !malformed) return edit;

  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiEndpoints" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, e] : entries) {
    out << YAML::Key << name << YAML::Value << YAML::BeginMap << YAML::Key << "advertiseAddress"
        << YAML::Value << e.address << YAML::Key << "bindPort" << YAML::Value << e.port
        << YAML::EndMap;
  }
  out << YAML::EndMap;
  const YAML::Node api_version = either(doc, "apiVersion", "apiversion");
  out << YAML::Key << "apiVersion" << YAML::Value
      << (api_version && api_version.IsScalar() ? api_version.as<std::string>()
                                                : std::string("kubeadm.k8s.io/v1beta2"));
  out << YAML::Key << "kind" << YAML::Value << "ClusterStatus";
  out << YAML::EndMap;
  edit.rewritten = std::string(out.c_str()) + "\n";
  return edit;
}

base::Result<KubeadmStepResult> removeFromKubeadmConfig(kube::KubeClient& client,
                                                        std::string_view node, bool dry_run) {
  KubeadmStepResult result;
  auto cm = client.get(kube::resources::kConfigMaps, "kube-system", "kubeadm-config");
  if (!cm) {
    if (cm.error().code() == ErrorCode::kNotFound) return result;
    return std::move(cm).error();  // the client names the operation
  }
  const json* data = cm->contains("data") ? &(*cm)["data"] : nullptr;
  if (data == nullptr || !data->is_object() || !data->contains("ClusterStatus") ||
      !(*data)["ClusterStatus"].is_string()) {
    return result;  // kubeadm >= 1.22: no ClusterStatus
  }
  auto edit = removeApiEndpoint((*data)["ClusterStatus"].get<std::string>(), node);
  if (!edit) return std::move(edit).error();
  result.removed_address = edit->removed_address;
  result.remaining_addresses = edit->remaining_addresses;
  if (edit->rewritten.empty()) return result;
  const std::string what = edit->had_entry
                               ? "remove " + std::string(node) + " (" + edit->removed_address +
                                     ") from kube-system/kubeadm-config ClusterStatus.apiEndpoints"
                               : "repair the malformed kube-system/kubeadm-config ClusterStatus";
  if (dry_run) {
    result.actions.push_back("would " + what);
    return result;
  }
  json updated = *cm;
  updated["data"]["ClusterStatus"] = edit->rewritten;
  auto written = client.update(kube::resources::kConfigMaps, "kube-system", updated);
  if (!written) return std::move(written).error();
  result.actions.push_back(what);
  return result;
}

base::Result<std::vector<std::string>> apiserverAddresses(kube::KubeClient& client,
                                                          std::string_view except_node) {
  auto pods = client.list(kube::resources::kPods, "kube-system",
                          {.label_selector = "component=kube-apiserver,tier=control-plane"});
  if (!pods) return std::move(pods).error().wrap("list kube-apiserver pods");
  std::vector<std::string> out;
  const json& items = kube::jsonArray(*pods, "items");
  for (const json& pod : items) {
    if (kube::jsonText(kube::jsonField(pod, "spec"), "nodeName") == except_node) continue;
    const std::string endpoint =
        kube::jsonText(kube::jsonField(kube::jsonField(pod, "metadata"), "annotations"),
                       "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint");
    if (std::string host = hostOf(endpoint); !host.empty()) out.push_back(host);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace ekco::agent
