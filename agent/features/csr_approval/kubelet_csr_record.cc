#include "agent/features/csr_approval/kubelet_csr_record.h"

#include <algorithm>

#include "base/strings.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Result;
using nlohmann::json;

std::vector<std::string> parseSanList(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = base::trimSpace(text.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string formatSanList(const std::vector<std::string>& sans) {
  std::string out;
  for (const auto& s : sans) {
    if (!out.empty()) out += ",";
    out += s;
  }
  return out;
}

ApprovedSans parseApprovedSans(const json& configmap) {
  ApprovedSans record;
  if (!configmap.is_object()) return record;
  record.present = true;
  if (const json* rv = kube::jsonFind(configmap, {"metadata", "resourceVersion"});
      rv != nullptr && rv->is_string()) {
    record.resource_version = rv->get<std::string>();
  }
  const json& data = kube::jsonField(configmap, "data");
  if (!data.is_object()) return record;
  for (const auto& [node, value] : data.items()) {
    if (value.is_string()) record.by_node[node] = parseSanList(value.get<std::string>());
  }
  return record;
}

Result<ApprovedSans> readApprovedSans(kube::KubeClient& client, std::string_view ns) {
  auto cm = client.get(kube::resources::kConfigMaps, ns, kKubeletServingAddressesConfigMap);
  if (!cm) {
    if (cm.error().code() == base::ErrorCode::kNotFound) return ApprovedSans{};
    return std::move(cm).error().wrap("read the approved kubelet serving addresses");
  }
  return parseApprovedSans(*cm);
}

Result<ApprovedSans> writeApprovedSans(
    kube::KubeClient& client, std::string_view ns, const ApprovedSans& current,
    const std::map<std::string, std::vector<std::string>>& by_node) {
  json data = json::object();
  for (const auto& [node, sans] : by_node) data[node] = formatSanList(sans);
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", std::string(kKubeletServingAddressesConfigMap)},
                   {"namespace", std::string(ns)},
                   {"labels", {{"app.kubernetes.io/managed-by", "ekco"}}}}},
                 {"data", std::move(data)}};
  Result<json> written = [&]() -> Result<json> {
    if (!current.present) return client.create(kube::resources::kConfigMaps, ns, object);
    object["metadata"]["resourceVersion"] = current.resource_version;
    return client.update(kube::resources::kConfigMaps, ns, object);
  }();
  if (!written)
    return std::move(written).error().wrap("write the approved kubelet serving addresses");
  return parseApprovedSans(*written);
}

}  // namespace ekco::agent
