// RBAC objects for kubesim's RBAC tests (rbac_test.cc, rbac_server_test.cc).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace ekco::kubesim::testing {

// The user ekco's ServiceAccount token authenticates as.
inline constexpr const char* kEkco = "system:serviceaccount:kurl:ekco";

inline nlohmann::json clusterRole(const std::string& name, nlohmann::json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRole"},
          {"metadata", {{"name", name}}},
          {"rules", std::move(rules)}};
}

inline nlohmann::json role(const std::string& ns, const std::string& name, nlohmann::json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "Role"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"rules", std::move(rules)}};
}

inline nlohmann::json binding(const std::string& kind, const std::string& ns,
                              const std::string& name, const std::string& role_kind,
                              const std::string& role_name, nlohmann::json subjects) {
  nlohmann::json meta = {{"name", name}};
  if (!ns.empty()) meta["namespace"] = ns;
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", kind},
          {"metadata", meta},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role_name}}},
          {"subjects", std::move(subjects)}};
}

inline nlohmann::json saSubject(const std::string& ns, const std::string& name) {
  nlohmann::json s = {{"kind", "ServiceAccount"}, {"name", name}};
  if (!ns.empty()) s["namespace"] = ns;
  return s;
}

}  // namespace ekco::kubesim::testing
