#include "agent/edge/cluster_config.h"

#include <chrono>
#include <vector>

#include "agent/edge/command_env.h"
#include "base/clock.h"
#include "kube/resource.h"

namespace ekco::agent {

ClusterConfig readClusterConfig(const ClusterConfigRequest& request) {
  ClusterConfig out;
  base::SystemClock clock;
  CommandClient c;
  kube::RestClientOptions rest{.request_timeout = std::chrono::seconds(5)};
  rest.retry.max_attempts = 1;
  if (auto built =
          buildCommandClient(c,
                             {.host_root = request.host_root.empty() ? "/" : request.host_root,
                              .kubeconfig = request.kubeconfig,
                              .connect_timeout = std::chrono::seconds(3),
                              .rest = rest},
                             request.environment, clock);
      !built) {
    out.skipped = "no API client: " + built.error().message();
    return out;
  }
  auto cm =
      c.client->get(kube::resources::kConfigMaps, kClusterConfigNamespace, kClusterConfigName);
  if (!cm) {
    out.skipped = cm.error().code() == base::ErrorCode::kNotFound
                      ? "it does not exist"
                      : "the API did not answer: " + cm.error().message();
    return out;
  }
  const auto data = cm->find("data");
  const nlohmann::json* text = nullptr;
  if (data != cm->end() && data->is_object()) {
    if (auto it = data->find(kClusterConfigKey); it != data->end()) text = &*it;
  }
  if (text == nullptr || !text->is_string()) {
    out.problem = std::string(kClusterConfigSource) + ": has no data." + kClusterConfigKey +
                  " text; fix or delete the ConfigMap";
    return out;
  }
  out.text = text->get<std::string>();
  return out;
}

std::string describeConfigSources(const std::map<std::string, std::string>& sources,
                                  const ClusterConfig& cluster) {
  // Origins in the order they are layered, with how many keys each one decided.
  std::vector<std::pair<std::string, int>> origins;
  auto count = [&](const std::string& origin) {
    for (auto& [name, n] : origins) {
      if (name == origin) {
        ++n;
        return;
      }
    }
    origins.emplace_back(origin, 1);
  };
  for (const auto& [key, source] : sources) {
    if (source.starts_with("environment")) {
      count("environment");
    } else if (source.starts_with("flag")) {
      count("flags");
    } else {
      count(source.substr(0, source.rfind(':')));  // "<file>:<line>"
    }
  }
  auto rank = [](const std::string& origin) {
    if (origin == kClusterConfigSource) return 0;
    if (origin == "environment") return 2;
    if (origin == "flags") return 3;
    return 1;
  };
  std::stable_sort(origins.begin(), origins.end(),
                   [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });
  std::string out;
  for (const auto& [origin, n] : origins) {
    if (!out.empty()) out += ", ";
    out += origin + " (" + std::to_string(n) + (n == 1 ? " key)" : " keys)");
  }
  out += out.empty() ? "defaults" : "; defaults for the rest";
  if (!cluster.text && !cluster.problem) {
    out += std::string(" (") + kClusterConfigSource + " not used: " + cluster.skipped + ")";
  }
  return out;
}

}  // namespace ekco::agent
