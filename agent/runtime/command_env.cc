#include "agent/runtime/command_env.h"

#include <unistd.h>

namespace ekco::agent {

std::string envValue(const std::vector<std::string>& environment, std::string_view name) {
  for (const std::string& entry : environment) {
    if (entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
        entry[name.size()] == '=') {
      return entry.substr(name.size() + 1);
    }
  }
  return {};
}

std::string hostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

kube::Environment kubeEnvironment(const std::vector<std::string>& environment) {
  kube::Environment out;
  for (const char* name : {"KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}) {
    std::string value = envValue(environment, name);
    if (!value.empty()) out[name] = value;
  }
  return out;
}

std::string workingDir() {
  char cwd[4096] = {0};
  return ::getcwd(cwd, sizeof cwd - 1) != nullptr ? std::string(cwd) : std::string("/");
}

base::Result<std::unique_ptr<hostfs::LocalHostFs>> openHostRoot(const std::string& host_root,
                                                                const base::Clock& clock) {
  auto host_fs = hostfs::LocalHostFs::open(host_root.empty() ? "/" : host_root, clock);
  if (!host_fs) return std::move(host_fs).error().wrap("--host-root " + host_root);
  return std::move(*host_fs);
}

base::Status buildCommandClient(CommandClient& out, const CommandClientOptions& options,
                                const std::vector<std::string>& environment,
                                const base::Clock& clock) {
  return buildClient(out, options, kubeEnvironment(environment), workingDir(), clock);
}

base::Status buildClient(CommandClient& out, const CommandClientOptions& options,
                         const kube::Environment& env, const std::string& working_dir,
                         const base::Clock& clock) {
  auto process_fs = hostfs::LocalHostFs::open("/", clock);
  if (!process_fs) return std::move(process_fs).error();
  out.process_fs = std::move(*process_fs);
  if (!out.host_fs) {
    auto host_fs = openHostRoot(options.host_root, clock);
    if (!host_fs) return std::move(host_fs).error();
    out.host_fs = std::move(*host_fs);
  }
  auto connection = options.node_credentials
                        ? kube::loadNodeConnection(*out.host_fs, env)
                        : kube::loadConnection({.process_fs = *out.process_fs,
                                                .host_fs = *out.host_fs,
                                                .env = env,
                                                .explicit_kubeconfig = options.kubeconfig,
                                                .working_dir = working_dir});
  if (!connection) return std::move(connection).error();
  out.connection = *connection;
  auto transport = kube::CurlTransport::create(std::move(*connection), out.process_fs.get(), clock,
                                               {.connect_timeout = options.connect_timeout});
  if (!transport) return std::move(transport).error();
  out.transport = std::move(*transport);
  out.client = std::make_unique<kube::RestClient>(*out.transport, clock, options.rest);
  return base::ok();
}

}  // namespace ekco::agent
