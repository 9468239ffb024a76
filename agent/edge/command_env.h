// What the one-shot commands (shutdown, startup, upgrade, purge-node) and the agent's runtime
// share:
// reading the process environment and building a Kubernetes client the way the agent does
// (kubeconfig search of kube/transport/kubeconfig.h: --kubeconfig, KUBECONFIG, in-cluster, the
// host's admin.conf and kubelet.conf).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/connection.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent {

// The value of NAME in "NAME=value" entries ("" when absent).
std::string envValue(const std::vector<std::string>& environment, std::string_view name);
// gethostname(), "" when it fails.
std::string hostName();

// --node-name, else $NODE_NAME, else the host name (lower-cased, as kubelet registers it).
// kInvalidArgument when the result is not a valid node name.
base::Result<std::string> resolveNodeName(const std::string& flag, const std::string& env_value,
                                          const std::string& hostname);
// KUBECONFIG and KUBERNETES_SERVICE_HOST/PORT from the environment, for loadConnection.
kube::Environment kubeEnvironment(const std::vector<std::string>& environment);
// The current directory ("/" when it cannot be read), against which a relative KUBECONFIG is
// resolved.
std::string workingDir();

// The host root as a HostFs ("" means "/"); errors name --host-root.
base::Result<std::unique_ptr<hostfs::LocalHostFs>> openHostRoot(const std::string& host_root,
                                                                const base::Clock& clock);

struct CommandClient {
  std::unique_ptr<hostfs::LocalHostFs> process_fs{};
  std::unique_ptr<hostfs::LocalHostFs> host_fs{};
  kube::Connection connection{};
  std::unique_ptr<kube::CurlTransport> transport{};
  std::unique_ptr<kube::RestClient> client{};
};

struct CommandClientOptions {
  std::string host_root = "/";
  std::string kubeconfig{};  // --kubeconfig
  // The node's own kubelet credentials (kube::loadNodeConnection), not the usual search: for a
  // drain by an agent whose own account may not write (leader_election_candidate: false).
  bool node_credentials = false;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  kube::RestClientOptions rest{};
};

// The one client builder, for the agent and every command: opens the host root (unless
// `out.host_fs` is already set), loads the connection (kube/transport/kubeconfig.h's search with
// `env`, a relative KUBECONFIG resolved against `working_dir`) and builds the transport and REST
// client.
base::Status buildClient(CommandClient& out, const CommandClientOptions& options,
                         const kube::Environment& env, const std::string& working_dir,
                         const base::Clock& clock);
// buildClient with the process environment's entries and the current directory.
base::Status buildCommandClient(CommandClient& out, const CommandClientOptions& options,
                                const std::vector<std::string>& environment,
                                const base::Clock& clock);

}  // namespace ekco::agent
