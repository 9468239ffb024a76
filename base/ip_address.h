// IP addresses and prefixes (CIDRs) as values: parsed with inet_pton, compared in binary, shown
// in inet_ntop's canonical text. For the rules that compare addresses from different sources (a
// CSR's SANs, a Node's status, kubeadm's serviceSubnet, a config allow-list), where "fd00::0001"
// and "fd00::1" are the same address.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ekco::base {

struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // an IPv4 address uses the first 4

  std::size_t size() const { return v6 ? 16 : 4; }
  // ::ffff:a.b.c.d. TLS clients take it for a.b.c.d (Go's net.IP.Equal does).
  bool isV4Mapped() const;
  // a.b.c.d for ::ffff:a.b.c.d, else the address itself.
  IpAddress unmapped() const;
  // inet_ntop's text: "10.0.0.1", "fd00::1", "::ffff:10.0.0.1".
  std::string text() const;
  bool operator==(const IpAddress&) const = default;
};

// Exactly an IPv4 or IPv6 address ("10.0.0.1", "fd00::1"); no brackets, port, zone or prefix.
std::optional<IpAddress> parseIpAddress(std::string_view text);

struct IpPrefix {
  IpAddress address{};  // as written: may have host bits set (see network())
  int length = 0;       // 0-32 for IPv4, 0-128 for IPv6

  // The address with the host bits cleared.
  IpAddress network() const;
  bool hasHostBits() const { return !(network() == address); }
  // Same family and the first `length` bits equal.
  bool contains(const IpAddress& ip) const;
  // The address `n` after the network address (kubeadm's first service IP is nth(1)); the
  // arithmetic wraps within the address, as no caller asks past the prefix's size.
  IpAddress nth(std::uint32_t n) const;
  // "10.0.0.0/8" (the address as written).
  std::string text() const;
};

// "10.0.0.0/8", "fd00::/64". The length is required; host bits are allowed here (see
// hasHostBits). Errors are one line quoting the text.
[[nodiscard]] Result<IpPrefix> parseIpPrefix(std::string_view text);

}  // namespace ekco::base
