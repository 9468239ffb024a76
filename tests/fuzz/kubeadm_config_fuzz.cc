// kubeadm's ClusterConfiguration as kubelet-serving CSR approval reads it
// (agent/features/csr_approval/kubelet_csr_apiserver.h): the text of ConfigMap
// kube-system/kubeadm-config, key ClusterConfiguration, from which the API server's names are
// taken.
//
// Checks: a rejected text gets one line naming kubeadm-config; an accepted one always holds the
// kubernetes Service's names and IP, every key is non-empty, and no name is both the Service's
// and an endpoint's.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/features/csr_approval/kubelet_csr_apiserver.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ekco::fuzz::check;
  static const nlohmann::json kService = {
      {"spec", {{"clusterIP", "10.96.0.1"}, {"clusterIPs", {"10.96.0.1"}}}}};
  auto names = ekco::agent::apiServerNamesFrom(kService, ekco::fuzz::asText(data, size));
  if (!names) {
    ekco::fuzz::checkOneLine(names.error().message(), "apiServerNamesFrom error");
    check(names.error().message().starts_with("kube-system/kubeadm-config ClusterConfiguration: "),
          "apiServerNamesFrom error does not name kubeadm-config", names.error().message());
    return 0;
  }
  for (const char* key :
       {"10.96.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}) {
    check(names->service.count(key) == 1, "a Service name is missing", key);
  }
  for (const auto& [key, where] : names->service) {
    check(!key.empty(), "an empty Service name");
    ekco::fuzz::checkOneLine(where, "where a Service name comes from");
  }
  for (const auto& [key, where] : names->endpoint) {
    check(!key.empty(), "an empty endpoint name");
    check(names->service.count(key) == 0, "a name both the Service's and an endpoint's", key);
  }
  return 0;
}
