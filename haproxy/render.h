// The internal load balancer's files, rendered from values (pure: no I/O, no clock):
// /etc/haproxy/haproxy.cfg, a TCP proxy on the node's loopback to every kube-apiserver, and the
// static pod /etc/kubernetes/manifests/haproxy.yaml that runs it. Both follow EKCO
// (pkg/internallb/haproxy.cfg and haproxy.yaml) closely enough that a node EKCO set up keeps
// working, with the changes docs/features/load-balancer.md lists.
//
// Every value that reaches a file is validated first (endpoints, bind address, image): nothing is
// spliced in raw, so a value with a space, newline, quote or '#' cannot add a directive or a YAML
// key. The same input always renders the same bytes, so callers can compare before writing.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace ekco::haproxy {

inline constexpr std::string_view kDefaultImage = "haproxy:lts-alpine";
inline constexpr std::uint16_t kDefaultApiserverPort = 6443;
inline constexpr std::uint16_t kDefaultListenPort = 6444;

// One kube-apiserver. `host` is an IPv4 address, an IPv6 address (without brackets) or a DNS name;
// parseEndpoint stores addresses in their canonical form (inet_ntop) and names in lower case, so
// equal endpoints compare equal.
struct Endpoint {
  std::string host{};
  std::uint16_t port = kDefaultApiserverPort;

  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// Parses one endpoint: "10.0.0.1", "10.0.0.1:6443", "[fd00::1]:6443", "fd00::1" (a bare IPv6
// address, port 6443), "cp-1.example.com", "cp-1.example.com:6443". Addresses must pass inet_pton
// (no IPv6 zone such as "%eth0"); names follow RFC 1123 (labels of letters, digits and '-', not
// starting or ending with '-', at most 63 characters, 253 in all, no trailing dot, and a last label
// that is not all digits, so "10.0.0.256" is a bad address rather than a name); ports are 1..65535.
// Anything else is kInvalidArgument with a one-line message naming the value (quoted and escaped).
[[nodiscard]] base::Result<Endpoint> parseEndpoint(std::string_view text);

// A comma-separated list of endpoints ("10.0.0.1,10.0.0.2:6443"). The empty string is the empty
// list (which renderHaproxyConfig refuses); an empty item ("a,,b", "a,") is an error.
[[nodiscard]] base::Result<std::vector<Endpoint>> parseEndpointList(std::string_view text);

// "10.0.0.1:6443", "[fd00::1]:6443", "cp-1.example.com:6443".
std::string formatEndpoint(const Endpoint& endpoint);

// The frontend's listen address: an IPv4 or IPv6 address (not a name) with a port.
struct BindAddress {
  std::string host{};  // canonical, without brackets
  std::uint16_t port = kDefaultListenPort;
  bool ipv6 = false;

  friend bool operator==(const BindAddress&, const BindAddress&) = default;
};

// "127.0.0.1:6444", "[::1]:6444", "0.0.0.0:6444". kInvalidArgument, naming the value, for a
// name, a missing port or anything else.
[[nodiscard]] base::Result<BindAddress> parseBindAddress(std::string_view text);

// "127.0.0.1:6444", "[::1]:6444".
std::string formatBindAddress(const BindAddress& bind);

// The address a local client (the liveness probe) reaches a listener on `bind` at: the bind
// address itself, or loopback for a wildcard (0.0.0.0 -> 127.0.0.1, :: -> ::1).
std::string localAddressOf(const BindAddress& bind);

struct HaproxyConfigOptions {
  // The kube-apiservers. Order and duplicates do not matter: servers are rendered sorted (IPv4
  // addresses by value, then IPv6 addresses by value, then names; then port) and de-duplicated.
  // Must not be empty.
  std::vector<Endpoint> endpoints{};
  // The frontend's listen address: an IPv4 or IPv6 address with a port ("127.0.0.1:6444",
  // "[::1]:6444"). Loopback by default: the load balancer is for this node's own clients (kubelet,
  // kube-proxy, admin.conf), not for the network.
  std::string bind = "127.0.0.1:6444";
  // Also listen on [::1] at the same port, for clients that resolve "localhost" to ::1 first.
  bool bind_ipv6_loopback = false;
  // The image that will run the config; its tag decides version-dependent directives.
  std::string image = std::string(kDefaultImage);
};

// Renders haproxy.cfg. Errors (kInvalidArgument): no endpoints ("no apiserver endpoints: refusing
// to render an empty backend"; an empty backend would turn every API call on the node into a
// connection reset, kURL#3614), an invalid endpoint, bind address or image.
//
// `tune.disable-zero-copy-forwarding` (EKCO's workaround for HAProxy 2.9.1 spinning at 100 % CPU,
// ekco#214) exists only from 2.9 on, and 2.6..2.8 refuse to start on an unknown keyword. It is
// rendered only when the image's tag says 2.9 or later (haproxyVersionOfImage); an unknown version
// (lts-alpine, latest, a digest) gets only directives HAProxy 2.6 accepts.
[[nodiscard]] base::Result<std::string> renderHaproxyConfig(const HaproxyConfigOptions& options);

// The servers of a haproxy.cfg (ekco's or EKCO's): the address of every `server NAME ADDR ...`
// line, in file order, as formatEndpoint writes them. Lines that do not parse are skipped: this
// reads back what was last written, for /status.
std::vector<Endpoint> parseConfigServers(std::string_view config);

struct ManifestOptions {
  std::string image = std::string(kDefaultImage);
  // Where haproxy listens (as HaproxyConfigOptions::bind): the liveness probe's host and port.
  std::string bind = "127.0.0.1:6444";
};

// The value of the manifest's `kurl.sh/haproxy-fileversion` annotation. EKCO rewrites a manifest
// whose annotation differs from its own "0" (or whose image differs), so keeping "0" lets an EKCO
// still running during a migration leave ekco's manifest alone; ekco itself compares the whole
// file.
inline constexpr std::string_view kManifestFileVersion = "0";

// Renders the static pod that runs HAProxy with /etc/haproxy/haproxy.cfg. The pod mounts the
// directory /etc/haproxy (not the file, as EKCO did): ekco replaces haproxy.cfg atomically
// (write a temp file, rename), and a single-file bind mount would keep showing the old inode, so
// a reload would load the old config. Errors (kInvalidArgument): an invalid image
// (validateImage) or bind address.
[[nodiscard]] base::Result<std::string> renderStaticPodManifest(const ManifestOptions& options);

}  // namespace ekco::haproxy
