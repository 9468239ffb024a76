#include "agent/edge/command_env.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

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

namespace {

bool isNodeName(const std::string& name) {
  // An RFC 1123 subdomain, as Node names are.
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (c == '.') {
      if (label == 0 || name[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && label > 0)) return false;
    if (++label > 63) return false;
  }
  return name.back() != '-' && name.back() != '.';
}

}  // namespace

base::Result<std::string> resolveNodeName(const std::string& flag, const std::string& env_value,
                                          const std::string& hostname) {
  std::string name = !flag.empty() ? flag : !env_value.empty() ? env_value : hostname;
  const char* from = !flag.empty()        ? "--node-name"
                     : !env_value.empty() ? "NODE_NAME"
                                          : "the host name";
  std::string lowered = name;
  std::transform(lowered.begin(), lowered.end(), lowered.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // kubelet lower-cases the host name it registers; a flag or env value must already be exact.
  if (flag.empty() && env_value.empty()) name = lowered;
  if (!isNodeName(name)) {
    return base::Error("node name from " + std::string(from) + ": \"" + name +
                           "\" is not a valid Node name (RFC 1123 subdomain)",
                       base::ErrorCode::kInvalidArgument);
  }
  return name;
}

}  // namespace ekco::agent
