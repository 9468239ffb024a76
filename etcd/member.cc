#include "etcd/member.h"
#include "base/strings.h"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>

namespace ekco::etcd {

std::string formatMemberId(std::uint64_t id) { return fmt::format("{:x}", id); }

std::string describeMember(const Member& member) {
  if (member.name.empty()) return formatMemberId(member.id);
  // The name is etcd's, escaped: a message stays one line whatever it holds.
  return base::escapeForMessage(member.name) + " (" + formatMemberId(member.id) + ")";
}

namespace {

std::string_view stripBrackets(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

}  // namespace

std::optional<UrlParts> parseUrl(std::string_view url) {
  const auto sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  UrlParts parts;
  parts.scheme = base::asciiLower(url.substr(0, sep));
  std::string_view rest = url.substr(sep + 3);
  rest = rest.substr(0, rest.find_first_of("/?#"));
  std::string_view host;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return std::nullopt;
      port = after.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else {
    const auto colon = rest.find(':');
    host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return std::nullopt;
    }
  }
  if (host.empty()) return std::nullopt;
  parts.host = std::string(host);
  if (port.empty()) {
    if (parts.scheme == "https") {
      parts.port = 443;
    } else if (parts.scheme == "http") {
      parts.port = 80;
    } else {
      return std::nullopt;
    }
  } else {
    int value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value <= 0 || value > 65535) {
      return std::nullopt;
    }
    parts.port = value;
  }
  return parts;
}

bool sameHost(std::string_view a, std::string_view b) {
  const std::string ha(stripBrackets(a));
  const std::string hb(stripBrackets(b));
  unsigned char ba[16] = {0};
  unsigned char bb[16] = {0};
  if (::inet_pton(AF_INET, ha.c_str(), ba) == 1 && ::inet_pton(AF_INET, hb.c_str(), bb) == 1) {
    return std::memcmp(ba, bb, 4) == 0;
  }
  if (::inet_pton(AF_INET6, ha.c_str(), ba) == 1 && ::inet_pton(AF_INET6, hb.c_str(), bb) == 1) {
    return std::memcmp(ba, bb, 16) == 0;
  }
  return base::asciiLower(ha) == base::asciiLower(hb);
}

std::string urlFor(std::string_view ip, int port, std::string_view scheme) {
  const std::string_view host = stripBrackets(ip);
  const bool v6 = host.find(':') != std::string_view::npos;
  return fmt::format("{}://{}{}{}:{}", scheme, v6 ? "[" : "", host, v6 ? "]" : "", port);
}

}  // namespace ekco::etcd
