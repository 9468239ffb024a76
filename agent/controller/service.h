// A feature's long-running part that is not a controller: the agent starts it once, on a thread
// of its own, after the controllers, stops it last (so what it does while the host goes down
// finishes first), and shows its status() under the spec's key in /status. The reboot feature's
// hold on logind's shutdown (features/reboot/shutdown_inhibitor.h) is one. Specs are listed in
// agent/features/table.cc beside the controllers'; the runtime names none of them.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "base/clock.h"
#include "hostfs/host_fs.h"
#include "kube/transport/kubeconfig.h"

namespace ekco::agent {

class AgentService {
 public:
  virtual ~AgentService() = default;
  // Until stop(); on its own thread.
  virtual void run() = 0;
  // From another thread; work in progress may finish first.
  virtual void stop() = 0;
  virtual nlohmann::json status() const = 0;
};

// What a service may be built from; references outlive the service.
struct ServiceDeps {
  const Config& config;
  const std::string& node_name;
  const std::string& host_root;
  const std::string& kubeconfig;  // --kubeconfig ("" = the usual search)
  const kube::Environment& env;
  const std::string& working_dir;
  bool dry_run = false;
  const base::Clock& clock;
  hostfs::HostFs& host_fs;  // the host, under --host-root
};

struct ServiceSpec {
  std::string_view name;        // the thread's name
  std::string_view status_key;  // its object in /status (null when not built)
  // nullptr when the config (or a dry run) leaves it off.
  std::function<std::unique_ptr<AgentService>(const ServiceDeps&)> build{};
};

// The table: every service, in the order they start.
const std::vector<ServiceSpec>& serviceSpecs();

}  // namespace ekco::agent
