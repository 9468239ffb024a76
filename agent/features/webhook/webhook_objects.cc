#include "agent/features/webhook/webhook_objects.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent/features/webhook/webhook_server.h"
#include "kube/decode/json_fields.h"
#include "kube/transport/kubeconfig.h"
#include "pki/certificate.h"

namespace ekco::agent::webhook {

using base::Error;
using base::ErrorCode;

namespace {

Json managedLabels() {
  return {{std::string(kManagedByLabel), "ekco"}, {std::string(kAgentPodLabel), "ekco"}};
}

}  // namespace

std::vector<std::string> serviceDnsNames(std::string_view ns) {
  return {fmt::format("{}.{}.svc", kServiceName, ns),
          fmt::format("{}.{}.svc.cluster.local", kServiceName, ns)};
}

Json caSecret(std::string_view ns, const CaPair& ca) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       {{"name", std::string(kCaSecretName)},
        {"namespace", std::string(ns)},
        {"labels", managedLabels()}}},
      {"type", "kubernetes.io/tls"},
      {"data",
       {{"tls.crt", pki::base64Encode(ca.cert_pem)}, {"tls.key", pki::base64Encode(ca.key_pem)}}}};
}

base::Result<CaPair> caFromSecret(const Json& secret) {
  std::string where = "Secret";
  if (secret.is_object() && secret.contains("metadata") && secret["metadata"].is_object()) {
    const Json& meta = secret["metadata"];
    where = fmt::format("Secret {}/{}", kube::jsonText(meta, "namespace"),
                        kube::jsonText(meta, "name"));
  }
  const Json* data = secret.is_object() && secret.contains("data") ? &secret["data"] : nullptr;
  auto field = [&](const char* key) -> base::Result<std::string> {
    if (data == nullptr || !data->is_object() || !data->contains(key) ||
        !(*data)[key].is_string()) {
      return Error(fmt::format("{}: no data[\"{}\"]", where, key), ErrorCode::kParse);
    }
    auto decoded = kube::base64Decode((*data)[key].get<std::string>());
    if (!decoded) {
      return Error(fmt::format("{}: data[\"{}\"] is not base64", where, key), ErrorCode::kParse);
    }
    return *decoded;
  };
  auto cert = field("tls.crt");
  EKCO_TRY(cert);
  auto key = field("tls.key");
  EKCO_TRY(key);
  if (auto parsed = pki::parseCertificate(*cert, where + " tls.crt"); !parsed) {
    return std::move(parsed).error();
  } else if (!parsed->is_ca) {
    return Error(where + ": tls.crt is not a CA certificate", ErrorCode::kParse);
  }
  return CaPair{.cert_pem = std::move(*cert), .key_pem = std::move(*key)};
}

Json desiredService(std::string_view ns, int target_port, bool selector) {
  Json service = {{"apiVersion", "v1"},
                  {"kind", "Service"},
                  {"metadata",
                   {{"name", std::string(kServiceName)},
                    {"namespace", std::string(ns)},
                    {"labels", managedLabels()}}},
                  {"spec",
                   {{"type", "ClusterIP"},
                    {"ports", Json::array({{{"name", std::string(kPortName)},
                                            {"protocol", "TCP"},
                                            {"port", 443},
                                            {"targetPort", target_port}}})}}}};
  if (selector) service["spec"]["selector"] = {{std::string(kAgentPodLabel), "ekco"}};
  return service;
}

bool isIpv6Address(std::string_view address) { return address.find(':') != std::string_view::npos; }

std::string endpointSliceName(bool ipv6) {
  return fmt::format("{}-webhook-{}", kServiceName, ipv6 ? "ipv6" : "ipv4");
}

Json desiredEndpointSlice(std::string_view ns, bool ipv6, const std::vector<ServingAgent>& agents,
                          int port) {
  std::vector<ServingAgent> family;
  for (const ServingAgent& a : agents) {
    if (isIpv6Address(a.address) == ipv6) family.push_back(a);
  }
  std::sort(family.begin(), family.end(),
            [](const ServingAgent& a, const ServingAgent& b) { return a.node < b.node; });
  Json endpoints = Json::array();
  for (const ServingAgent& a : family) {
    endpoints.push_back(
        {{"addresses", {a.address}},
         {"conditions", {{"ready", true}, {"serving", true}, {"terminating", false}}},
         {"nodeName", a.node}});
  }
  Json labels = managedLabels();
  labels[std::string(kServiceNameLabel)] = std::string(kServiceName);
  labels[std::string(kSliceManagedByLabel)] = std::string(kEndpointSliceManager);
  return {{"apiVersion", "discovery.k8s.io/v1"},
          {"kind", "EndpointSlice"},
          {"metadata",
           {{"name", endpointSliceName(ipv6)}, {"namespace", std::string(ns)}, {"labels", labels}}},
          {"addressType", ipv6 ? "IPv6" : "IPv4"},
          {"endpoints", endpoints},
          {"ports",
           Json::array({{{"name", std::string(kPortName)}, {"protocol", "TCP"}, {"port", port}}})}};
}

Json desiredEndpoints(std::string_view ns, const std::vector<ServingAgent>& agents, int port) {
  std::vector<ServingAgent> sorted = agents;
  std::sort(sorted.begin(), sorted.end(),
            [](const ServingAgent& a, const ServingAgent& b) { return a.address < b.address; });
  Json addresses = Json::array();
  for (const ServingAgent& a : sorted) {
    addresses.push_back({{"ip", a.address}, {"nodeName", a.node}});
  }
  Json subsets = Json::array();
  if (!addresses.empty()) {
    subsets.push_back(
        {{"addresses", addresses},
         {"ports",
          Json::array({{{"name", std::string(kPortName)}, {"port", port}, {"protocol", "TCP"}}})}});
  }
  Json labels = managedLabels();
  labels["endpointslice.kubernetes.io/skip-mirror"] = "true";
  return {
      {"apiVersion", "v1"},
      {"kind", "Endpoints"},
      {"metadata",
       {{"name", std::string(kServiceName)}, {"namespace", std::string(ns)}, {"labels", labels}}},
      {"subsets", subsets}};
}

Json desiredConfiguration(std::string_view ns, std::string_view ca_pem,
                          const std::vector<std::string>& excluded) {
  Json hook = {{"name", std::string(kConfigurationName)},
               {"clientConfig",
                {{"service",
                  {{"namespace", std::string(ns)},
                   {"name", std::string(kServiceName)},
                   {"path", std::string(kImageOverridesPath)},
                   {"port", 443}}},
                 {"caBundle", pki::base64Encode(ca_pem)}}},
               {"rules", Json::array({{{"apiGroups", {""}},
                                       {"apiVersions", {"v1"}},
                                       {"operations", {"CREATE", "UPDATE"}},
                                       {"resources", {"pods"}},
                                       {"scope", "Namespaced"}}})},
               {"failurePolicy", "Ignore"},
               {"sideEffects", "None"},
               {"timeoutSeconds", 10},
               {"matchPolicy", "Equivalent"},
               {"admissionReviewVersions", {"v1"}},
               {"reinvocationPolicy", "Never"}};
  if (!excluded.empty()) {
    hook["namespaceSelector"] = {
        {"matchExpressions", Json::array({{{"key", "kubernetes.io/metadata.name"},
                                           {"operator", "NotIn"},
                                           {"values", excluded}}})}};
  }
  return {{"apiVersion", "admissionregistration.k8s.io/v1"},
          {"kind", "MutatingWebhookConfiguration"},
          {"metadata", {{"name", std::string(kConfigurationName)}, {"labels", managedLabels()}}},
          {"webhooks", Json::array({hook})}};
}

bool containsAll(const Json& have, const Json& want) {
  if (want.is_object()) {
    if (!have.is_object()) return false;
    for (const auto& [key, value] : want.items()) {
      auto it = have.find(key);
      if (it == have.end() || !containsAll(*it, value)) return false;
    }
    return true;
  }
  if (want.is_array()) {
    if (!have.is_array() || have.size() != want.size()) return false;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!containsAll(have[i], want[i])) return false;
    }
    return true;
  }
  return have == want;
}

}  // namespace ekco::agent::webhook
