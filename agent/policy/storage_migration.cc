#include "agent/policy/storage_migration.h"

#include <utility>

#include "kube/resource.h"

namespace ekco::agent {

using base::ErrorCode;
using base::Result;
using nlohmann::json;

std::string StorageMigrationState::describe() const {
  if (!present) return "none";
  return (migration.empty() ? std::string("storage") : migration) + " migration " +
         (phase.empty() ? std::string("(no phase)") : phase);
}

std::string StorageMigrationState::value(const std::string& key) const {
  auto it = data.find(key);
  return it == data.end() ? std::string() : it->second;
}

StorageMigrationState parseStorageMigration(const json& configmap) {
  StorageMigrationState state;
  if (!configmap.is_object()) return state;
  state.present = true;
  if (auto meta = configmap.find("metadata"); meta != configmap.end() && meta->is_object()) {
    if (auto rv = meta->find("resourceVersion"); rv != meta->end() && rv->is_string()) {
      state.resource_version = rv->get<std::string>();
    }
  }
  if (auto data = configmap.find("data"); data != configmap.end() && data->is_object()) {
    for (auto it = data->begin(); it != data->end(); ++it) {
      if (it->is_string()) state.data[it.key()] = it->get<std::string>();
    }
  }
  state.migration = state.value("migration");
  state.phase = state.value("phase");
  return state;
}

Result<StorageMigrationState> readStorageMigration(kube::KubeClient& client, std::string_view ns) {
  auto cm = client.get(kube::resources::kConfigMaps, ns, kStorageMigrationConfigMap);
  if (!cm) {
    if (cm.error().code() == ErrorCode::kNotFound) return StorageMigrationState{};
    return std::move(cm).error().wrap("read the storage migration state");
  }
  return parseStorageMigration(*cm);
}

Result<StorageMigrationState> writeStorageMigration(
    kube::KubeClient& client, std::string_view ns, const StorageMigrationState& current,
    const std::map<std::string, std::string>& data) {
  json object = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", std::string(kStorageMigrationConfigMap)},
                   {"namespace", std::string(ns)},
                   {"labels", {{"app.kubernetes.io/managed-by", "ekco"}}}}},
                 {"data", data}};
  Result<json> written = [&]() -> Result<json> {
    if (!current.present) return client.create(kube::resources::kConfigMaps, ns, object);
    object["metadata"]["resourceVersion"] = current.resource_version;
    return client.update(kube::resources::kConfigMaps, ns, object);
  }();
  if (!written) return std::move(written).error().wrap("write the storage migration state");
  return parseStorageMigration(*written);
}

base::Status clearStorageMigration(kube::KubeClient& client, std::string_view ns) {
  auto removed = client.remove(kube::resources::kConfigMaps, ns, kStorageMigrationConfigMap);
  if (!removed && removed.error().code() != ErrorCode::kNotFound) {
    return std::move(removed).error().wrap("delete the storage migration state");
  }
  return {};
}

}  // namespace ekco::agent
