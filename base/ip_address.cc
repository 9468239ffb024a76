#include "base/ip_address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

#include "base/strings.h"

namespace ekco::base {

namespace {

constexpr std::array<std::uint8_t, 12> kV4MappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

}  // namespace

bool IpAddress::isV4Mapped() const {
  return v6 && std::memcmp(bytes.data(), kV4MappedPrefix.data(), kV4MappedPrefix.size()) == 0;
}

IpAddress IpAddress::unmapped() const {
  if (!isV4Mapped()) return *this;
  IpAddress v4;
  std::memcpy(v4.bytes.data(), bytes.data() + 12, 4);
  return v4;
}

std::string IpAddress::text() const {
  char out[INET6_ADDRSTRLEN] = {};
  if (inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), out, sizeof(out)) == nullptr) return {};
  return out;
}

std::optional<IpAddress> parseIpAddress(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  const std::string s(text);
  IpAddress ip;
  if (inet_pton(AF_INET, s.c_str(), ip.bytes.data()) == 1) return ip;
  ip.v6 = true;
  if (inet_pton(AF_INET6, s.c_str(), ip.bytes.data()) == 1) return ip;
  return std::nullopt;
}

IpAddress IpPrefix::network() const {
  IpAddress out = address;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int bits = length - static_cast<int>(i) * 8;
    if (bits >= 8) continue;
    out.bytes[i] = bits <= 0 ? 0 : static_cast<std::uint8_t>(out.bytes[i] & (0xffU << (8 - bits)));
  }
  return out;
}

bool IpPrefix::contains(const IpAddress& ip) const {
  if (ip.v6 != address.v6) return false;
  return IpPrefix{.address = ip, .length = length}.network() == network();
}

IpAddress IpPrefix::nth(std::uint32_t n) const {
  IpAddress out = network();
  std::uint64_t carry = n;
  for (std::size_t i = out.size(); i-- > 0 && carry != 0;) {
    carry += out.bytes[i];
    out.bytes[i] = static_cast<std::uint8_t>(carry & 0xffU);
    carry >>= 8U;
  }
  return out;
}

std::string IpPrefix::text() const { return address.text() + "/" + std::to_string(length); }

Result<IpPrefix> parseIpPrefix(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) {
    return Error("want an IP prefix such as 10.0.0.0/16 or fd00::/64, got " + quoteForMessage(text),
                 ErrorCode::kInvalidArgument);
  }
  auto ip = parseIpAddress(text.substr(0, slash));
  if (!ip) {
    return Error("not an IP address before the '/' in " + quoteForMessage(text),
                 ErrorCode::kInvalidArgument);
  }
  const std::string_view digits = text.substr(slash + 1);
  int length = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), length);
  const int max = ip->v6 ? 128 : 32;
  if (digits.empty() || digits.size() > 3 || ec != std::errc() ||
      end != digits.data() + digits.size() || length < 0 || length > max) {
    return Error("the prefix length in " + quoteForMessage(text) + " is not a number from 0 to " +
                     std::to_string(max),
                 ErrorCode::kInvalidArgument);
  }
  return IpPrefix{.address = *ip, .length = length};
}

}  // namespace ekco::base
