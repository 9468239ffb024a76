// What a host command (purge-node, shutdown, startup, upgrade, `config show --effective`) takes
// from the cluster: the agents' ConfigMap kurl/ekco-config (key config.yaml, as deploy/ ships
// it), so that in a DaemonSet-only install the command enforces the guards the agents enforce
// (seeds: "ekco-purge-node inherits all of the configuration from the EKCO operator running in
// the cluster"). Layering, later wins: the ConfigMap, the local file (--config, else
// /etc/ekco/config.yaml when it exists), the environment, the flags.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ekco::agent {

inline constexpr const char* kClusterConfigNamespace = "kurl";
inline constexpr const char* kClusterConfigName = "ekco-config";
inline constexpr const char* kClusterConfigKey = "config.yaml";
// How the ConfigMap is named in problems and in the sources line.
inline constexpr const char* kClusterConfigSource = "configmap kurl/ekco-config";

struct ClusterConfig {
  // The ConfigMap's config.yaml; nullopt when it was not used.
  std::optional<std::string> text{};
  // Why it was not used ("the API did not answer: ..." / "it does not exist"), for the sources
  // line; "" when it was.
  std::string skipped{};
  // A ConfigMap that exists but cannot be used (no config.yaml key, not a string): an error.
  std::optional<std::string> problem{};
};

struct ClusterConfigRequest {
  std::string kubeconfig{};  // --kubeconfig ("" = the usual search)
  std::string host_root{};   // --host-root
  std::vector<std::string> environment{};
};

// One GET with a short deadline (3 s to connect, 5 s for the answer, no retries): an API that
// does not answer leaves the command as it was without the ConfigMap, a few seconds later.
ClusterConfig readClusterConfig(const ClusterConfigRequest& request);

// The one line that says what made the effective configuration, from ConfigLoader::sources()
// (key -> winning source): "configmap kurl/ekco-config (2 keys), flags (1 key); defaults for
// the rest", and why the ConfigMap was not used when it was not.
std::string describeConfigSources(const std::map<std::string, std::string>& sources,
                                  const ClusterConfig& cluster);

}  // namespace ekco::agent
