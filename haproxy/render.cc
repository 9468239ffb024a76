#include "haproxy/render.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "base/strings.h"
#include "haproxy/image.h"

namespace ekco::haproxy {
namespace {

constexpr std::size_t kMaxHostnameLength = 253;
constexpr std::size_t kMaxLabelLength = 63;
// tune.disable-zero-copy-forwarding appeared in HAProxy 2.9.
constexpr HaproxyVersion kZeroCopyForwardingVersion{.major = 2, .minor = 9};

enum class HostKind { kIpv4, kIpv6, kName };

// A host in canonical form with its kind.
struct Host {
  std::string text{};
  HostKind kind = HostKind::kName;
};

base::Error invalid(std::string message) {
  return base::Error(std::move(message), base::ErrorCode::kInvalidArgument);
}

// inet_pton reads a C string: a NUL inside `text` would cut it short, so it is refused first.
std::optional<std::string> canonicalIpv4(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  in_addr addr{};
  if (inet_pton(AF_INET, std::string(text).c_str(), &addr) != 1) return std::nullopt;
  std::array<char, INET_ADDRSTRLEN> buf{};
  inet_ntop(AF_INET, &addr, buf.data(), buf.size());
  return std::string(buf.data());
}

std::optional<std::string> canonicalIpv6(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return std::nullopt;
  in6_addr addr{};
  if (inet_pton(AF_INET6, std::string(text).c_str(), &addr) != 1) return std::nullopt;
  std::array<char, INET6_ADDRSTRLEN> buf{};
  inet_ntop(AF_INET6, &addr, buf.data(), buf.size());
  return std::string(buf.data());
}

// RFC 1123 host name, lower-cased. The last label must not be all digits (RFC 3696 §2), so a
// malformed dotted quad is not taken for a name.
std::optional<std::string> canonicalName(std::string_view text) {
  if (text.empty() || text.size() > kMaxHostnameLength) return std::nullopt;
  std::string out;
  out.reserve(text.size());
  std::size_t label_start = 0;
  bool label_all_digits = true;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '.') {
      std::size_t length = i - label_start;
      if (length == 0 || length > kMaxLabelLength) return std::nullopt;
      if (text[label_start] == '-' || text[i - 1] == '-') return std::nullopt;
      if (i == text.size() && label_all_digits) return std::nullopt;
      if (i < text.size()) out += '.';
      label_start = i + 1;
      label_all_digits = true;
      continue;
    }
    char c = text[i];
    bool digit = c >= '0' && c <= '9';
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!digit && !letter && c != '-') return std::nullopt;
    if (!digit) label_all_digits = false;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// A host without brackets or port: an IPv4 address, an IPv6 address or a DNS name.
std::optional<Host> parseHost(std::string_view text) {
  if (auto v4 = canonicalIpv4(text)) return Host{.text = *v4, .kind = HostKind::kIpv4};
  if (auto v6 = canonicalIpv6(text)) return Host{.text = *v6, .kind = HostKind::kIpv6};
  if (auto name = canonicalName(text)) return Host{.text = *name, .kind = HostKind::kName};
  return std::nullopt;
}

std::optional<std::uint16_t> parsePort(std::string_view text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value < 1 || value > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(value);
}

struct Parsed {
  Host host{};
  std::uint16_t port = kDefaultApiserverPort;
  bool has_port = false;
};

// HOST, HOST:PORT, [IPv6]:PORT, [IPv6] or a bare IPv6 address. `what` names the value in messages
// ("endpoint", "bind address").
base::Result<Parsed> parseHostPort(std::string_view text, std::string_view what) {
  auto fail = [&](std::string_view why) {
    return invalid(fmt::format("invalid {} {}: {}", what, base::quoteForMessage(text), why));
  };
  if (text.empty()) return fail("empty");
  Parsed parsed;
  std::string_view port_text;
  if (text.front() == '[') {
    std::size_t close = text.find(']');
    if (close == std::string_view::npos) return fail("missing ']' after the IPv6 address");
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return fail("want [IPv6]:PORT");
      port_text = rest.substr(1);
      parsed.has_port = true;
    }
    auto v6 = canonicalIpv6(text.substr(1, close - 1));
    if (!v6) return fail("not an IPv6 address inside [...]");
    parsed.host = Host{.text = *v6, .kind = HostKind::kIpv6};
  } else if (std::count(text.begin(), text.end(), ':') > 1) {
    auto v6 = canonicalIpv6(text);
    if (!v6) return fail("not an IPv6 address (write [IPv6]:PORT to give a port)");
    parsed.host = Host{.text = *v6, .kind = HostKind::kIpv6};
  } else {
    std::string_view host_text = text;
    if (std::size_t colon = text.find(':'); colon != std::string_view::npos) {
      host_text = text.substr(0, colon);
      port_text = text.substr(colon + 1);
      parsed.has_port = true;
    }
    if (host_text.empty()) return fail("empty host");
    auto host = parseHost(host_text);
    if (!host) {
      return fail(
          "not an IP address or a DNS name (RFC 1123: letters, digits, '-' and '.'); want HOST, "
          "HOST:PORT, [IPv6]:PORT or IPv6");
    }
    parsed.host = std::move(*host);
  }
  if (parsed.has_port) {
    auto port = parsePort(port_text);
    if (!port)
      return fail(
          fmt::format("port {} is not a number in 1..65535", base::quoteForMessage(port_text)));
    parsed.port = *port;
  }
  return parsed;
}

base::Result<Parsed> parseBind(std::string_view text) {
  auto bind = parseHostPort(text, "bind address");
  if (!bind) return std::move(bind).error();
  if (bind->host.kind == HostKind::kName || !bind->has_port) {
    return invalid(fmt::format("invalid bind address {}: want IPv4:PORT or [IPv6]:PORT",
                               base::quoteForMessage(text)));
  }
  return bind;
}

std::string hostPort(const Host& host, std::uint16_t port) {
  if (host.kind == HostKind::kIpv6) return fmt::format("[{}]:{}", host.text, port);
  return fmt::format("{}:{}", host.text, port);
}

// The order servers are rendered in: IPv4 by value, IPv6 by value, names, then port.
struct SortKey {
  HostKind kind = HostKind::kName;
  std::array<unsigned char, 16> address{};
  std::string name{};
  std::uint16_t port = 0;

  friend bool operator<(const SortKey& a, const SortKey& b) {
    return std::tie(a.kind, a.address, a.name, a.port) <
           std::tie(b.kind, b.address, b.name, b.port);
  }
};

SortKey sortKey(const Host& host, std::uint16_t port) {
  SortKey key{.kind = host.kind, .address = {}, .name = {}, .port = port};
  if (host.kind == HostKind::kIpv4) {
    inet_pton(AF_INET, host.text.c_str(), key.address.data());
  } else if (host.kind == HostKind::kIpv6) {
    inet_pton(AF_INET6, host.text.c_str(), key.address.data());
  } else {
    key.name = host.text;
  }
  return key;
}

// The settings below are EKCO's (pkg/internallb/haproxy.cfg, itself from OpenShift's
// machine-config-operator) except where a comment says otherwise.
constexpr std::string_view kConfigHeader =
    "# HAProxy for ekco's internal load balancer: this node's clients reach every kube-apiserver\n"
    "# through it. Rendered by ekco, which overwrites changes.\n";

}  // namespace

base::Result<Endpoint> parseEndpoint(std::string_view text) {
  auto parsed = parseHostPort(text, "endpoint");
  if (!parsed) return std::move(parsed).error();
  return Endpoint{.host = std::move(parsed->host.text), .port = parsed->port};
}

base::Result<std::vector<Endpoint>> parseEndpointList(std::string_view text) {
  std::vector<Endpoint> out;
  if (text.empty()) return out;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? comma : comma - start);
    auto endpoint = parseEndpoint(item);
    if (!endpoint) return std::move(endpoint).error();
    out.push_back(std::move(*endpoint));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string formatEndpoint(const Endpoint& endpoint) {
  bool ipv6 = endpoint.host.find(':') != std::string::npos;
  return ipv6 ? fmt::format("[{}]:{}", endpoint.host, endpoint.port)
              : fmt::format("{}:{}", endpoint.host, endpoint.port);
}

namespace {

// The servers: validated (an Endpoint may have been built without parseEndpoint), canonical,
// sorted and de-duplicated, so the same set always renders the same bytes.
base::Result<std::vector<std::pair<SortKey, Host>>> canonicalServers(
    const std::vector<Endpoint>& endpoints) {
  std::vector<std::pair<SortKey, Host>> servers;
  for (const Endpoint& endpoint : endpoints) {
    auto host = parseHost(endpoint.host);
    if (!host) {
      return invalid(fmt::format("invalid endpoint host {}: not an IP address or a DNS name",
                                 base::quoteForMessage(endpoint.host)));
    }
    if (endpoint.port == 0) {
      return invalid(
          fmt::format("invalid endpoint {}: port 0", base::quoteForMessage(endpoint.host)));
    }
    SortKey key = sortKey(*host, endpoint.port);
    servers.emplace_back(std::move(key), std::move(*host));
  }
  std::sort(servers.begin(), servers.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  servers.erase(std::unique(servers.begin(), servers.end(),
                            [](const auto& a, const auto& b) {
                              return !(a.first < b.first) && !(b.first < a.first);
                            }),
                servers.end());
  return servers;
}

}  // namespace

base::Result<std::string> renderHaproxyConfig(const HaproxyConfigOptions& options) {
  if (options.endpoints.empty()) {
    return invalid("no apiserver endpoints: refusing to render an empty backend");
  }
  auto servers = canonicalServers(options.endpoints);
  if (!servers) return std::move(servers).error();

  auto bind = parseBind(options.bind);
  if (!bind) return std::move(bind).error();
  EKCO_TRY(validateImage(options.image));
  auto version = haproxyVersionOfImage(options.image);
  bool zero_copy_directive = version && *version >= kZeroCopyForwardingVersion;

  std::string out(kConfigHeader);
  out +=
      "global\n"
      "    log stdout format raw local0 notice\n"
      // The official image already starts `haproxy -W -db` (master-worker, foreground); saying so
      // here keeps that true when the image's entrypoint is bypassed, so SIGUSR2 (or SIGHUP) to PID
      // 1 reloads the config without restarting the pod. No `daemon`: a container's process must
      // stay in the foreground.
      "    master-worker\n";
  if (zero_copy_directive) {
    // ekco#214: HAProxy 2.9.1 spun at >100 % CPU with zero-copy forwarding.
    out += "    tune.disable-zero-copy-forwarding\n";
  }
  out +=
      "defaults\n"
      "    log global\n"
      "    maxconn 20000\n"
      "    mode tcp\n"
      "    option dontlognull\n"
      // Not in EKCO: with `retries` alone every retry goes to the server that just failed; with
      // redispatch the last one goes to another, so a connection made in the second before the
      // health check marks a dead apiserver down still succeeds.
      "    option redispatch\n"
      "    retries 3\n"
      "    timeout http-request 30s\n"
      "    timeout queue 1m\n"
      "    timeout connect 10s\n"
      // Watches, exec, logs -f and port-forward hold one connection for a long time; a short idle
      // timeout would cut them and force clients to re-list (kubeadm#2227).
      "    timeout client 86400s\n"
      "    timeout server 86400s\n"
      "    timeout tunnel 86400s\n"
      "frontend kubernetes-api\n";
  out += fmt::format("    bind {}\n", hostPort(bind->host, bind->port));
  if (options.bind_ipv6_loopback &&
      !(bind->host.kind == HostKind::kIpv6 && bind->host.text == "::1")) {
    out += fmt::format("    bind [::1]:{}\n", bind->port);
  }
  out +=
      "    option tcplog\n"
      "    default_backend kubernetes-primaries\n"
      "backend kubernetes-primaries\n"
      // /readyz over TLS: an apiserver that is shutting down or not yet ready is taken out.
      "    option httpchk GET /readyz HTTP/1.0\n"
      "    option log-health-checks\n"
      "    balance roundrobin\n";
  for (std::size_t i = 0; i < servers->size(); ++i) {
    const Host& host = (*servers)[i].second;
    // on-marked-down shutdown-sessions (not in EKCO): connections to an apiserver that fails its
    // checks are closed, so long watches move to a live one instead of hanging on a dead one for up
    // to the 86400 s timeout.
    out += fmt::format(
        "    server k8s-primary-{} {} weight 1 verify none check check-ssl inter 1s fall 2 rise 3 "
        "on-marked-down shutdown-sessions",
        i, hostPort(host, (*servers)[i].first.port));
    if (host.kind == HostKind::kName) {
      // HAProxy resolves names when it starts and refuses to start if one does not resolve.
      // init-addr libc,none starts it with that server down instead, and the default resolvers
      // (/etc/resolv.conf) keep the address current at run time.
      out += " resolvers default init-addr libc,none";
    }
    out += '\n';
  }
  return out;
}

std::vector<Endpoint> parseConfigServers(std::string_view config) {
  std::vector<Endpoint> servers;
  while (!config.empty()) {
    const std::size_t eol = config.find('\n');
    std::string_view line = config.substr(0, eol);
    config = eol == std::string_view::npos ? std::string_view{} : config.substr(eol + 1);
    std::vector<std::string_view> words;
    while (!line.empty()) {
      const std::size_t start = line.find_first_not_of(" \t");
      if (start == std::string_view::npos) break;
      line.remove_prefix(start);
      const std::size_t end = line.find_first_of(" \t");
      words.push_back(line.substr(0, end));
      line = end == std::string_view::npos ? std::string_view{} : line.substr(end);
    }
    if (words.size() < 3 || words[0] != "server") continue;
    if (auto endpoint = parseEndpoint(words[2])) servers.push_back(std::move(*endpoint));
  }
  return servers;
}

base::Result<BindAddress> parseBindAddress(std::string_view text) {
  auto bind = parseBind(text);
  if (!bind) return std::move(bind).error();
  return BindAddress{
      .host = bind->host.text, .port = bind->port, .ipv6 = bind->host.kind == HostKind::kIpv6};
}

std::string formatBindAddress(const BindAddress& bind) {
  return bind.ipv6 ? fmt::format("[{}]:{}", bind.host, bind.port)
                   : fmt::format("{}:{}", bind.host, bind.port);
}

std::string localAddressOf(const BindAddress& bind) {
  if (bind.host == "0.0.0.0") return "127.0.0.1";
  if (bind.host == "::") return "::1";
  return bind.host;
}

base::Result<std::string> renderStaticPodManifest(const ManifestOptions& options) {
  EKCO_TRY(validateImage(options.image));
  auto bind = parseBindAddress(options.bind);
  if (!bind) return std::move(bind).error();
  // The probe goes to the address haproxy listens on: with the default loopback-only bind,
  // EKCO's `host: localhost` could resolve to ::1, where nothing listens.
  const std::string probe_host = localAddressOf(*bind);
  // The image has passed validateImage, so it has no character that needs escaping inside the
  // double quotes; every other value is a constant or a number.
  return fmt::format(
      R"(# HAProxy for ekco's internal load balancer (config: /etc/haproxy/haproxy.cfg).
# Rendered by ekco, which overwrites changes.
apiVersion: v1
kind: Pod
metadata:
  name: haproxy
  namespace: kube-system
  labels:
    app: kurl-haproxy
  annotations:
    kurl.sh/haproxy-fileversion: "{fileversion}"
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: haproxy
    image: "{image}"
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: "{probe_host}"
        path: /healthz
        port: {port}
        scheme: HTTPS
    volumeMounts:
    - mountPath: /usr/local/etc/haproxy
      name: haproxyconf
      readOnly: true
  volumes:
  - hostPath:
      path: /etc/haproxy
      type: DirectoryOrCreate
    name: haproxyconf
)",
      fmt::arg("fileversion", kManifestFileVersion), fmt::arg("image", options.image),
      fmt::arg("port", bind->port), fmt::arg("probe_host", probe_host));
}

}  // namespace ekco::haproxy
