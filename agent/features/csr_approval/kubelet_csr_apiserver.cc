#include "agent/features/csr_approval/kubelet_csr_apiserver.h"

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "base/ip_address.h"
#include "base/strings.h"
#include "haproxy/render.h"
#include "kube/decode/json_fields.h"
#include "kube/resource.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using base::Result;
using nlohmann::json;

namespace {

constexpr std::string_view kWhere = "kube-system/kubeadm-config ClusterConfiguration";

Error malformed(const std::string& what) {
  return Error(std::string(kWhere) + ": " + what, ErrorCode::kParse);
}

// A scalar field as text; absent (or null) is nullopt; any other kind is an error.
Result<std::optional<std::string>> scalar(const YAML::Node& map, const char* key,
                                          const std::string& path) {
  const YAML::Node v = map[key];
  if (!v || v.IsNull()) return std::optional<std::string>();
  if (!v.IsScalar()) return malformed(path + " is not a string");
  return std::optional<std::string>(v.Scalar());
}

Result<YAML::Node> mapping(const YAML::Node& parent, const char* key, const std::string& path) {
  const YAML::Node v = parent[key];
  if (!v || v.IsNull()) return YAML::Node(YAML::NodeType::Map);
  if (!v.IsMap()) return malformed(path + " is not a mapping");
  return v;
}

void add(std::map<std::string, std::string>& into, std::string_view san, const std::string& where) {
  const std::string t(base::trimSpace(san));
  if (!t.empty()) into.emplace(sanKey(t), where);
}

Result<ApiServerNames> parse(const json& service, std::string_view text) {
  ApiServerNames names;
  // The Service.
  const json& spec = kube::jsonField(service, "spec");
  std::vector<std::string> cluster_ips;
  if (std::string ip = kube::jsonText(spec, "clusterIP"); !ip.empty()) cluster_ips.push_back(ip);
  for (const json& ip : kube::jsonArray(spec, "clusterIPs")) {
    if (ip.is_string()) cluster_ips.push_back(ip.get<std::string>());
  }
  for (const auto& ip : cluster_ips) {
    if (!base::parseIpAddress(ip)) {
      return Error("Service default/kubernetes: spec.clusterIPs holds " +
                       base::quoteForMessage(ip) + ", not an IP address",
                   ErrorCode::kParse);
    }
    add(names.service, ip, "Service default/kubernetes clusterIP");
  }
  if (cluster_ips.empty()) {
    return Error("Service default/kubernetes has no spec.clusterIP", ErrorCode::kParse);
  }
  // kubeadm's ClusterConfiguration.
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return malformed("not YAML: " + base::escapeForMessage(e.what()));
  }
  if (!doc.IsMap()) return malformed("not a mapping");
  auto networking = mapping(doc, "networking", "networking");
  if (!networking) return std::move(networking).error();
  auto subnets = scalar(*networking, "serviceSubnet", "networking.serviceSubnet");
  if (!subnets) return std::move(subnets).error();
  const std::string subnet_text = subnets->value_or("10.96.0.0/12");
  std::string_view rest = subnet_text;
  while (true) {
    const auto comma = rest.find(',');
    const std::string one(base::trimSpace(rest.substr(0, comma)));
    auto prefix = base::parseIpPrefix(one);
    if (!prefix) {
      return malformed("networking.serviceSubnet " + base::quoteForMessage(subnet_text) + ": " +
                       prefix.error().message());
    }
    add(names.service, prefix->nth(1).text(),
        "the first IP of kubeadm's serviceSubnet " + prefix->text());
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  auto domain = scalar(*networking, "dnsDomain", "networking.dnsDomain");
  if (!domain) return std::move(domain).error();
  const std::string dns_domain = domain->value_or("cluster.local");
  for (std::string name : {"kubernetes", "kubernetes.default", "kubernetes.default.svc"}) {
    add(names.service, name, "the kubernetes Service's DNS name");
  }
  if (!dns_domain.empty()) {
    add(names.service, "kubernetes.default.svc." + dns_domain, "the kubernetes Service's DNS name");
  }
  auto endpoint = scalar(doc, "controlPlaneEndpoint", "controlPlaneEndpoint");
  if (!endpoint) return std::move(endpoint).error();
  if (endpoint->has_value() && !base::trimSpace(**endpoint).empty()) {
    auto parsed = haproxy::parseEndpoint(base::trimSpace(**endpoint));
    if (!parsed) {
      return malformed("controlPlaneEndpoint " + base::quoteForMessage(**endpoint) + ": " +
                       parsed.error().message());
    }
    add(names.endpoint, parsed->host, "kubeadm's controlPlaneEndpoint");
  }
  auto apiserver = mapping(doc, "apiServer", "apiServer");
  if (!apiserver) return std::move(apiserver).error();
  const YAML::Node& apiserver_map = *apiserver;
  const YAML::Node sans = apiserver_map["certSANs"];
  if (sans && !sans.IsNull()) {
    if (!sans.IsSequence()) return malformed("apiServer.certSANs is not a list");
    for (const auto& san : sans) {
      if (!san.IsScalar()) return malformed("apiServer.certSANs holds an entry that is no string");
      add(names.endpoint, san.Scalar(), "kubeadm's apiServer.certSANs");
    }
  }
  // A name in both lists is the API server's only.
  for (const auto& [key, where] : names.service) names.endpoint.erase(key);
  return names;
}

}  // namespace

Result<ApiServerNames> apiServerNamesFrom(const json& kubernetes_service,
                                          std::string_view cluster_configuration) {
  try {
    return parse(kubernetes_service, cluster_configuration);
  } catch (const YAML::Exception& e) {
    return malformed(base::escapeForMessage(e.what()));
  }
}

Result<ApiServerNames> readApiServerNames(kube::KubeClient& client) {
  auto service = client.get(kube::resources::kServices, "default", "kubernetes");
  if (!service) return std::move(service).error().wrap("read Service default/kubernetes");
  auto cm = client.get(kube::resources::kConfigMaps, "kube-system", "kubeadm-config");
  if (!cm) return std::move(cm).error().wrap("read ConfigMap kube-system/kubeadm-config");
  const json* text = kube::jsonFind(*cm, {"data", "ClusterConfiguration"});
  if (text == nullptr || !text->is_string()) {
    return Error("ConfigMap kube-system/kubeadm-config has no data.ClusterConfiguration",
                 ErrorCode::kNotFound);
  }
  return apiServerNamesFrom(*service, text->get<std::string>());
}

}  // namespace ekco::agent
