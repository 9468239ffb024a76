#include "agent/features/internal_lb/internal_lb.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>
#include <algorithm>
#include <charconv>

#include "base/log/log.h"
#include "kube/decode/json_fields.h"
#include "kube/decode/timestamp.h"

namespace ekco::agent {

using base::Error;
using base::ErrorCode;
using haproxy::Endpoint;
using nlohmann::json;

namespace {

std::string joinEndpoints(const std::vector<Endpoint>& endpoints) {
  std::string out;
  for (const Endpoint& e : endpoints) {
    if (!out.empty()) out += ',';
    out += haproxy::formatEndpoint(e);
  }
  return out.empty() ? "-" : out;
}

std::vector<Endpoint> normalized(std::vector<Endpoint> endpoints) {
  std::sort(endpoints.begin(), endpoints.end(), [](const Endpoint& a, const Endpoint& b) {
    return std::tie(a.host, a.port) < std::tie(b.host, b.port);
  });
  endpoints.erase(std::unique(endpoints.begin(), endpoints.end()), endpoints.end());
  return endpoints;
}

std::string objectName(const json& object) {
  const json* meta = object.contains("metadata") ? &object["metadata"] : nullptr;
  std::string ns = meta && meta->contains("namespace") && (*meta)["namespace"].is_string()
                       ? (*meta)["namespace"].get<std::string>()
                       : "";
  std::string name = meta && meta->contains("name") && (*meta)["name"].is_string()
                         ? (*meta)["name"].get<std::string>()
                         : "?";
  return ns.empty() ? name : ns + "/" + name;
}

// The list under `key`; absent or null is the empty list.
json listAt(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? json::array() : *it;
}

// The apiserver port of a ports list: the one named "https", else the only one, else 6443.
base::Result<std::uint16_t> pickPort(const json& ports, const std::string& what) {
  if (!ports.is_array() || ports.empty()) return haproxy::kDefaultApiserverPort;
  const json* chosen = &ports[0];
  for (const json& p : ports) {
    if (p.is_object() && p.value("name", "") == "https") chosen = &p;
  }
  if (!chosen->is_object() || !chosen->contains("port") || !(*chosen)["port"].is_number_integer()) {
    return Error(what + ": a port without a numeric \"port\"", ErrorCode::kParse);
  }
  const auto port = (*chosen)["port"].get<std::int64_t>();
  if (port < 1 || port > 65535) {
    return Error(fmt::format("{}: port {} out of range", what, port), ErrorCode::kParse);
  }
  return static_cast<std::uint16_t>(port);
}

// An object's address is a bare host: an IP (or, in an FQDN EndpointSlice, a name), no port.
base::Result<Endpoint> endpointOf(const json& address, std::uint16_t port,
                                  const std::string& what) {
  if (!address.is_string())
    return Error(what + ": an address that is not a string", ErrorCode::kParse);
  const std::string text = address.get<std::string>();
  auto endpoint = haproxy::parseEndpoint(text);
  const bool has_port =
      text.find('[') != std::string::npos || std::count(text.begin(), text.end(), ':') == 1;
  if (!endpoint || has_port) {
    return Error(fmt::format("{}: invalid address {}", what, kube::jsonDump(address)),
                 ErrorCode::kParse);
  }
  endpoint->port = port;
  return std::move(*endpoint);
}

// node[key] for a map; an undefined node otherwise (yaml-cpp throws when indexing an undefined
// node, so a path through absent keys needs this at every step).
YAML::Node child(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node[key];
}

std::string flagValue(const std::vector<std::string>& args, std::string_view flag) {
  const std::string prefix = std::string(flag) + "=";
  std::string value;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind(prefix, 0) == 0) {
      value = args[i].substr(prefix.size());
    } else if (args[i] == flag && i + 1 < args.size()) {
      value = args[i + 1];
    }
  }
  return value;
}

// A source that lists no object calls no handler, so nothing would wake the controller when the
// last source settles: until all have, it looks again every 250 ms (in-memory state only).
std::optional<std::chrono::milliseconds> unsettledPoll(const DiscoveredApiservers& found) {
  if (found.settled) return std::nullopt;
  return std::chrono::milliseconds(250);
}

}  // namespace

DiscoveredApiservers discoverApiservers(const ObservedApiservers& observed) {
  const std::pair<const ApiserverSource*, const char*> order[] = {
      {&observed.slices, "endpointslices"},
      {&observed.endpoints, "endpoints"},
      {&observed.nodes, "nodes"}};
  for (const auto& [source, name] : order) {
    // A source of higher rank that has not listed yet could still win.
    if (!source->settled) return {};
    if (!source->endpoints.empty()) {
      return {.settled = true, .endpoints = normalized(source->endpoints), .source = name};
    }
  }
  return {.settled = true};
}

base::Result<std::vector<Endpoint>> endpointsOfSlice(const json& slice) {
  const std::string what = "EndpointSlice " + objectName(slice);
  if (!slice.is_object()) return Error(what + ": not an object", ErrorCode::kParse);
  auto port = pickPort(listAt(slice, "ports"), what);
  if (!port) return std::move(port).error();
  std::vector<Endpoint> out;
  const json endpoints = listAt(slice, "endpoints");
  if (!endpoints.is_array()) return Error(what + ": endpoints is not a list", ErrorCode::kParse);
  for (const json& e : endpoints) {
    if (!e.is_object())
      return Error(what + ": an endpoint that is not an object", ErrorCode::kParse);
    const json conditions = e.value("conditions", json::object());
    // Unset means ready (discovery.k8s.io/v1: "nil should be interpreted as true").
    if (conditions.is_object() && conditions.contains("ready") &&
        conditions["ready"].is_boolean() && !conditions["ready"].get<bool>()) {
      continue;
    }
    const json addresses = listAt(e, "addresses");
    if (!addresses.is_array()) return Error(what + ": addresses is not a list", ErrorCode::kParse);
    for (const json& a : addresses) {
      auto endpoint = endpointOf(a, *port, what);
      if (!endpoint) return std::move(endpoint).error();
      out.push_back(std::move(*endpoint));
    }
  }
  return normalized(std::move(out));
}

base::Result<std::vector<Endpoint>> endpointsOfEndpoints(const json& object) {
  const std::string what = "Endpoints " + objectName(object);
  if (!object.is_object()) return Error(what + ": not an object", ErrorCode::kParse);
  const json subsets = listAt(object, "subsets");
  if (!subsets.is_array()) return Error(what + ": subsets is not a list", ErrorCode::kParse);
  std::vector<Endpoint> out;
  for (const json& subset : subsets) {
    if (!subset.is_object())
      return Error(what + ": a subset that is not an object", ErrorCode::kParse);
    auto port = pickPort(listAt(subset, "ports"), what);
    if (!port) return std::move(port).error();
    const json addresses = listAt(subset, "addresses");  // notReadyAddresses: skipped
    if (!addresses.is_array()) return Error(what + ": addresses is not a list", ErrorCode::kParse);
    for (const json& a : addresses) {
      if (!a.is_object() || !a.contains("ip")) {
        return Error(what + ": an address without \"ip\"", ErrorCode::kParse);
      }
      auto endpoint = endpointOf(a["ip"], *port, what);
      if (!endpoint) return std::move(endpoint).error();
      out.push_back(std::move(*endpoint));
    }
  }
  return normalized(std::move(out));
}

std::vector<Endpoint> endpointsOfNodes(const std::vector<kube::NodeRecord>& nodes) {
  std::vector<Endpoint> out;
  for (const kube::NodeRecord& node : nodes) {
    const std::string_view ip = node.address("InternalIP");
    if (ip.empty()) continue;
    auto endpoint = haproxy::parseEndpoint(ip);
    if (!endpoint) continue;  // kube/decode/records keeps what the API said; never render it raw
    endpoint->port = haproxy::kDefaultApiserverPort;
    out.push_back(std::move(*endpoint));
  }
  return normalized(std::move(out));
}

base::Result<std::optional<Endpoint>> localApiserver(const hostfs::HostFs& fs) {
  auto exists = fs.exists(kApiserverManifestPath);
  if (!exists) return std::move(exists).error();
  if (!*exists) return std::optional<Endpoint>{};
  auto text = fs.read(kApiserverManifestPath);
  if (!text) return std::move(text).error();
  const std::string file = fs.realPath(kApiserverManifestPath);
  try {
    const YAML::Node pod = YAML::Load(*text);
    const YAML::Node annotation =
        child(child(child(pod, "metadata"), "annotations"),
              "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint");
    if (annotation && annotation.IsScalar()) {
      auto endpoint = haproxy::parseEndpoint(annotation.as<std::string>());
      if (endpoint) return std::optional<Endpoint>(std::move(*endpoint));
    }
    std::vector<std::string> args;
    const YAML::Node containers = child(child(pod, "spec"), "containers");
    if (containers && containers.IsSequence() && containers.size() > 0) {
      for (const char* key : {"command", "args"}) {
        const YAML::Node list = child(containers[0], key);
        if (!list || !list.IsSequence()) continue;
        for (const YAML::Node& a : list) {
          if (a.IsScalar()) args.push_back(a.as<std::string>());
        }
      }
    }
    std::string host = flagValue(args, "--bind-address");
    if (host.empty() || host == "0.0.0.0" || host == "::")
      host = flagValue(args, "--advertise-address");
    if (host.empty()) host = "127.0.0.1";
    auto endpoint = haproxy::parseEndpoint(host);
    if (!endpoint) return endpoint.error().wrap(file);
    if (const std::string port = flagValue(args, "--secure-port"); !port.empty()) {
      int value = 0;
      const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
      if (ec != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535) {
        return Error(file + ": --secure-port \"" + port + "\" is not a port", ErrorCode::kParse);
      }
      endpoint->port = static_cast<std::uint16_t>(value);
    }
    return std::optional<Endpoint>(std::move(*endpoint));
  } catch (const YAML::Exception& e) {
    return Error(file + ": not a valid static pod manifest: " + e.what(), ErrorCode::kParse);
  }
}

bool hasIpv6Loopback(const hostfs::HostFs& process_fs) {
  auto text = process_fs.read("/proc/net/if_inet6");
  if (!text) return false;
  std::string_view rest = *text;
  while (!rest.empty()) {
    const std::size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 1);
    if (line.rfind("00000000000000000000000000000001 ", 0) == 0) return true;
  }
  return false;
}

namespace {

class ProcReloader : public HaproxyReloader {
 public:
  ProcReloader(std::string config_path, const base::Clock& clock, haproxy::ReloadOptions options)
      : config_path_(std::move(config_path)), clock_(clock), options_(std::move(options)) {}
  base::Result<haproxy::ReloadResult> reload() override {
    return haproxy::reloadHaproxy(config_path_, clock_, options_);
  }

 private:
  std::string config_path_;
  const base::Clock& clock_;
  haproxy::ReloadOptions options_;
};

}  // namespace

std::unique_ptr<HaproxyReloader> makeProcReloader(std::string config_path, const base::Clock& clock,
                                                  haproxy::ReloadOptions options) {
  return std::make_unique<ProcReloader>(std::move(config_path), clock, std::move(options));
}

InternalLoadBalancer::InternalLoadBalancer(hostfs::HostFs& fs,
                                           std::function<ObservedApiservers()> observe,
                                           HaproxyReloader& reloader, const base::Clock& clock,
                                           InternalLbOptions options)
    : fs_(fs),
      observe_(std::move(observe)),
      reloader_(reloader),
      clock_(clock),
      options_(std::move(options)) {}

base::Result<ReconcileResult> InternalLoadBalancer::reconcile() {
  {
    std::lock_guard lock(mu_);
    if (!loaded_) {
      // What HAProxy was last given, from the file (a restart of the agent, or EKCO's file).
      auto exists = fs_.exists(kHaproxyConfigPath);
      if (!exists) return std::move(exists).error();
      if (*exists) {
        auto text = fs_.read(kHaproxyConfigPath);
        if (!text) return std::move(text).error();
        backends_ = haproxy::parseConfigServers(*text);
        source_ = "file";
      }
      loaded_ = true;
    }
  }
  const DiscoveredApiservers found = discoverApiservers(observe_());
  if (found.settled && !found.endpoints.empty()) {
    // Changes come in bursts (a new EndpointSlice, then the old one removed): a set is applied
    // once it has stayed the same for `settle`, so a burst costs one HAProxy reload, not one per
    // event (measured: two reloads back to back doubled the p95, BENCHMARKS.md).
    if (options_.settle.count() > 0) {
      const auto now = clock_.monoNow();
      if (found.endpoints != settling_) {
        settling_ = found.endpoints;
        settling_since_ = now;
      }
      const auto waited = now - settling_since_;
      if (waited < options_.settle) {
        bool differs = false;
        {
          std::lock_guard lock(mu_);
          differs = backends_ != found.endpoints;
        }
        if (differs) {
          return ReconcileResult{.summary = "settling: " + joinEndpoints(found.endpoints),
                                 .requeue_after = std::chrono::ceil<std::chrono::milliseconds>(
                                     options_.settle - waited)};
        }
      }
    }
    return apply(found.endpoints, found.source);
  }

  const std::string why =
      found.settled
          ? "no kube-apiserver in the default/kubernetes EndpointSlices or Endpoints, and no "
            "control-plane node with an InternalIP"
          : "the apiserver sources have not been listed yet";
  std::vector<Endpoint> kept;
  {
    std::lock_guard lock(mu_);
    kept = backends_;
  }
  if (!kept.empty()) {
    // Never an empty backend: the last config stays until an endpoint is known again.
    {
      std::lock_guard lock(mu_);
      problem_ = found.settled ? why + "; keeping the last config" : "";
    }
    if (found.settled) {
      base::logWarn("no apiserver endpoints, keeping the haproxy config",
                    {{"backends", joinEndpoints(kept)}, {"reason", why}});
    }
    return ReconcileResult{.summary = "kept " + joinEndpoints(kept) + ": " + why,
                           .requeue_after = unsettledPoll(found)};
  }
  auto local = localApiserver(fs_);
  if (!local) return std::move(local).error();
  if (*local) return apply({**local}, "local-apiserver");
  {
    std::lock_guard lock(mu_);
    problem_ = "no apiserver endpoint known and no previous " + std::string(kHaproxyConfigPath) +
               ": refusing to write an empty backend (" + why + ")";
  }
  if (!found.settled) {
    // Not a failure yet: the caches are still listing.
    return ReconcileResult{.summary = "waiting: " + why, .requeue_after = unsettledPoll(found)};
  }
  return Error("no apiserver endpoint known and no previous " + std::string(kHaproxyConfigPath) +
                   ": refusing to write an empty backend (" + why + ")",
               ErrorCode::kUnavailable);
}

base::Result<ReconcileResult> InternalLoadBalancer::apply(const std::vector<Endpoint>& endpoints,
                                                          const std::string& source) {
  auto config = haproxy::renderHaproxyConfig({.endpoints = endpoints,
                                              .bind = options_.bind,
                                              .bind_ipv6_loopback = options_.bind_ipv6_loopback,
                                              .image = options_.image});
  if (!config) return std::move(config).error();
  auto manifest =
      haproxy::renderStaticPodManifest({.image = options_.image, .bind = options_.bind});
  if (!manifest) return std::move(manifest).error();
  const std::string backends = joinEndpoints(endpoints);

  if (options_.dry_run) {
    std::string plan;
    for (const auto& [path, content] :
         {std::pair{kHaproxyConfigPath, &*config}, std::pair{kHaproxyManifestPath, &*manifest}}) {
      auto current = fs_.read(path);
      if (!current || *current != *content) plan += fmt::format("write {}\n", path);
    }
    if (plan.empty()) return ReconcileResult{.summary = "up to date: " + backends};
    plan += "reload haproxy (backends " + backends + ", from " + source + ")\n";
    base::logInfo("dry run: would update the internal load balancer",
                  {{"backends", backends}, {"source", source}});
    return ReconcileResult{.summary = "dry run: would write " + backends, .plan = plan};
  }

  EKCO_TRY(fs_.makeDirs("/etc/haproxy", 0755));
  // 0644: the image runs HAProxy as a non-root user (kURL fixed 0640 under umask 0027).
  auto config_changed = fs_.write(kHaproxyConfigPath, *config, {.mode = 0644});
  if (!config_changed) return std::move(config_changed).error();
  bool reload_needed = false;
  {
    std::lock_guard lock(mu_);
    if (*config_changed == hostfs::Changed::kYes) {
      backends_ = endpoints;
      source_ = source;
      written_at_ = clock_.wallNow();
      reload_pending_ = true;
      base::logInfo(
          "haproxy config written",
          {{"path", fs_.realPath(kHaproxyConfigPath)}, {"backends", backends}, {"source", source}});
    } else if (source_ == "file") {
      source_ = source;  // the file already said this; now we know where it comes from
    }
    reload_needed = reload_pending_;
  }
  // After the config, so a pod the manifest (re)starts reads the new config. kubeadm's 0600.
  EKCO_TRY(fs_.makeDirs("/etc/kubernetes/manifests", 0755));
  auto manifest_changed = fs_.write(kHaproxyManifestPath, *manifest, {.mode = 0600});
  if (!manifest_changed) return std::move(manifest_changed).error();
  if (*manifest_changed == hostfs::Changed::kYes) {
    base::logInfo("haproxy static pod written",
                  {{"path", fs_.realPath(kHaproxyManifestPath)}, {"image", options_.image}});
  }

  ReconcileResult result{.summary = fmt::format("backends {} from {}", backends, source)};
  if (reload_needed) {
    auto reloaded = reloader_.reload();
    if (!reloaded) return reloaded.error().wrap("reloading haproxy");
    const bool none_running = reloaded->masters.empty() && reloaded->not_ready.empty();
    const bool done = reloaded->confirmed || none_running;
    std::lock_guard lock(mu_);
    last_reload_ = reloaded->detail;
    reloaded_at_ = clock_.wallNow();
    // No HAProxy running: the static pod reads the file when kubelet starts it. Otherwise the
    // reload is owed until a new worker confirms it: a master that was starting or re-executing
    // (not_ready) is tried again in a second; one that rejected the config in ten.
    reload_pending_ = !done;
    problem_ = done ? "" : reloaded->detail;
    if (done) {
      base::logInfo("haproxy reloaded", {{"detail", reloaded->detail}});
    } else {
      base::logWarn("haproxy reload not confirmed", {{"detail", reloaded->detail}});
      result.requeue_after =
          reloaded->not_ready.empty() ? std::chrono::seconds(10) : std::chrono::seconds(1);
    }
    result.summary += "; " + reloaded->detail;
  } else {
    std::lock_guard lock(mu_);
    problem_.clear();
  }
  return result;
}

json InternalLoadBalancer::status() const {
  std::lock_guard lock(mu_);
  json backends = json::array();
  for (const Endpoint& e : backends_) backends.push_back(haproxy::formatEndpoint(e));
  return {{"config", fs_.realPath(kHaproxyConfigPath)},
          {"bind", options_.bind},
          {"backends", backends},
          {"source", source_},
          {"written_at", kube::rfc3339OrNull(written_at_)},
          {"last_reload", last_reload_},
          {"reloaded_at", kube::rfc3339OrNull(reloaded_at_)},
          {"problem", problem_}};
}

ControllerSpec internalLbSpec() {
  return {.name = "internal-lb",
          .scope = Scope::kNode,
          .status_key = "internal_load_balancer",
          .enabled = [](const Config& c) { return c.enable_internal_load_balancer; },
          .watches = {apiserversWatch()},
          .build = [](const ControllerDeps& d) -> base::Result<std::shared_ptr<Controller>> {
            const Config& c = d.config;
            auto apiservers = d.watches.require<ApiserverWatch>(apiserversWatch());
            if (!apiservers) return std::move(apiservers).error();
            std::shared_ptr<HaproxyReloader> reloader =
                makeProcReloader(d.host_fs.realPath(kHaproxyConfigPath), d.clock);
            // The default loopback bind also listens on [::1] when this network namespace has
            // it (a client resolving "localhost" may try ::1 first); binding [::1] without IPv6
            // would stop HAProxy from starting.
            const bool ipv6_loopback = c.internal_load_balancer_bind.rfind("127.0.0.1:", 0) == 0 &&
                                       hasIpv6Loopback(d.process_fs);
            // The reloader lives as long as the controller (the deleter holds it).
            return std::shared_ptr<Controller>(
                new InternalLoadBalancer(
                    d.host_fs, [watch = std::move(*apiservers)] { return watch->observe(); },
                    *reloader, d.clock,
                    InternalLbOptions{.image = c.internal_load_balancer_haproxy_image,
                                      .bind = c.internal_load_balancer_bind,
                                      .bind_ipv6_loopback = ipv6_loopback,
                                      .dry_run = d.dry_run}),
                [reloader](Controller* p) { delete p; });
          }};
}

}  // namespace ekco::agent
