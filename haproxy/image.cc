#include "haproxy/image.h"

#include <arpa/inet.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "base/strings.h"

namespace ekco::haproxy {
namespace {

constexpr std::size_t kMaxNameLength = 255;
constexpr std::size_t kMaxTagLength = 128;
constexpr std::size_t kMinDigestHex = 32;

bool isLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlnum(char c) { return isAlpha(c) || isDigit(c); }
bool isWord(char c) { return isAlnum(c) || c == '_'; }
bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// path-component := [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
bool validPathComponent(std::string_view s) {
  std::size_t i = 0;
  while (true) {
    std::size_t start = i;
    while (i < s.size() && isLowerAlnum(s[i])) ++i;
    if (i == start) return false;  // empty, or a separator not followed by an alphanumeric
    if (i == s.size()) return true;
    if (s[i] == '.') {
      ++i;
    } else if (s[i] == '_') {
      ++i;
      if (i < s.size() && s[i] == '_') ++i;
    } else if (s[i] == '-') {
      while (i < s.size() && s[i] == '-') ++i;
    } else {
      return false;
    }
  }
}

// domain-component := [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]
bool validDomainComponent(std::string_view s) {
  if (s.empty() || !isAlnum(s.front()) || !isAlnum(s.back())) return false;
  for (char c : s) {
    if (!isAlnum(c) && c != '-') return false;
  }
  return true;
}

// domain := (domain-name | "[" IPv6 "]") [":" port]
bool validDomain(std::string_view s) {
  std::string_view host = s;
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    std::size_t close = s.find(']');
    if (close == std::string_view::npos) return false;
    host = s.substr(1, close - 1);
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return false;
      port = rest.substr(1);
      if (port.empty()) return false;
    }
    in6_addr addr{};
    if (host.find('\0') != std::string_view::npos) return false;
    if (inet_pton(AF_INET6, std::string(host).c_str(), &addr) != 1) return false;
  } else {
    std::size_t colon = s.find(':');
    if (colon != std::string_view::npos) {
      host = s.substr(0, colon);
      port = s.substr(colon + 1);
      if (port.empty()) return false;
    }
    std::size_t start = 0;
    while (true) {
      std::size_t dot = host.find('.', start);
      std::string_view part = host.substr(start, dot == std::string_view::npos ? dot : dot - start);
      if (!validDomainComponent(part)) return false;
      if (dot == std::string_view::npos) break;
      start = dot + 1;
    }
  }
  for (char c : port) {
    if (!isDigit(c)) return false;
  }
  return true;
}

// tag := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
bool validTag(std::string_view s) {
  if (s.empty() || s.size() > kMaxTagLength || !isWord(s.front())) return false;
  for (char c : s) {
    if (!isWord(c) && c != '.' && c != '-') return false;
  }
  return true;
}

// digest := algorithm ":" hex{32,}; algorithm := [A-Za-z][A-Za-z0-9]* ([+._-]
// [A-Za-z][A-Za-z0-9]*)*
bool validDigest(std::string_view s) {
  std::size_t colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  std::string_view algorithm = s.substr(0, colon);
  std::string_view hex = s.substr(colon + 1);
  bool component_start = true;
  for (char c : algorithm) {
    if (component_start) {
      if (!isAlpha(c)) return false;
      component_start = false;
    } else if (c == '+' || c == '.' || c == '_' || c == '-') {
      component_start = true;
    } else if (!isAlnum(c)) {
      return false;
    }
  }
  if (algorithm.empty() || component_start) return false;
  if (hex.size() < kMinDigestHex) return false;
  for (char c : hex) {
    if (!isHex(c)) return false;
  }
  return true;
}

// An image reference split into its parts; the parts are views into the original text.
struct ImageParts {
  std::vector<std::string_view> path{};  // path components, without the domain
  std::string_view tag{};
  bool has_digest = false;
};

// Parses `image`, or explains in a few words why it is not a reference.
base::Result<ImageParts> splitImage(std::string_view image) {
  if (image.empty()) return base::Error("empty", base::ErrorCode::kInvalidArgument);
  ImageParts parts;
  std::string_view name = image;
  if (std::size_t at = image.find('@'); at != std::string_view::npos) {
    if (!validDigest(image.substr(at + 1))) {
      return base::Error("bad digest (want ALGORITHM:HEX, e.g. sha256:<64 hex digits>)",
                         base::ErrorCode::kInvalidArgument);
    }
    parts.has_digest = true;
    name = image.substr(0, at);
  }
  std::size_t last_slash = name.rfind('/');
  std::size_t last_colon = name.rfind(':');
  if (last_colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || last_colon > last_slash)) {
    parts.tag = name.substr(last_colon + 1);
    name = name.substr(0, last_colon);
    if (!validTag(parts.tag)) {
      return base::Error("bad tag (want letters, digits, '_', '.' or '-', at most 128)",
                         base::ErrorCode::kInvalidArgument);
    }
  }
  if (name.size() > kMaxNameLength) {
    return base::Error("name longer than 255 characters", base::ErrorCode::kInvalidArgument);
  }
  std::vector<std::string_view> components;
  std::size_t start = 0;
  while (true) {
    std::size_t slash = name.find('/', start);
    components.push_back(
        name.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::size_t first_path = 0;
  if (components.size() > 1) {
    std::string_view first = components.front();
    if (first.find_first_of(".:[") != std::string_view::npos || first == "localhost") {
      if (!validDomain(first)) {
        return base::Error("bad registry host", base::ErrorCode::kInvalidArgument);
      }
      first_path = 1;
    }
  }
  for (std::size_t i = first_path; i < components.size(); ++i) {
    if (!validPathComponent(components[i])) {
      return base::Error(
          "bad repository name (want lower-case letters and digits joined by '.', '_', '__' or "
          "'-', components separated by '/')",
          base::ErrorCode::kInvalidArgument);
    }
    parts.path.push_back(components[i]);
  }
  return parts;
}

// Reads a decimal number at the front of `s` (at most 4 digits), advancing `s`.
std::optional<int> takeNumber(std::string_view& s) {
  std::size_t n = 0;
  while (n < s.size() && isDigit(s[n])) ++n;
  if (n == 0 || n > 4) return std::nullopt;
  int value = 0;
  for (std::size_t i = 0; i < n; ++i) value = value * 10 + (s[i] - '0');
  s.remove_prefix(n);
  return value;
}

}  // namespace

base::Status validateImage(std::string_view image) {
  auto parts = splitImage(image);
  if (!parts) {
    return base::Error(
        fmt::format("invalid image {}: {}", base::quoteForMessage(image), parts.error().message()),
        base::ErrorCode::kInvalidArgument);
  }
  return base::ok();
}

std::optional<HaproxyVersion> haproxyVersionOfImage(std::string_view image) {
  auto parts = splitImage(image);
  if (!parts || parts->has_digest || parts->tag.empty()) return std::nullopt;
  // The official image is "haproxy"; HAProxy Technologies publishes haproxy-alpine, haproxy-debian
  // and haproxy-ubuntu, all tagged with the HAProxy version.
  std::string_view repo = parts->path.back();
  if (repo != "haproxy" && !repo.starts_with("haproxy-")) return std::nullopt;
  std::string_view tag = parts->tag;
  auto major = takeNumber(tag);
  if (!major) return std::nullopt;
  if (tag.empty() || tag.front() == '-') {
    // "3" or "3-alpine": every 3.x. A bare "2" could be any 2.x, so it says nothing.
    if (*major >= 3) return HaproxyVersion{.major = *major, .minor = 0};
    return std::nullopt;
  }
  if (tag.front() != '.') return std::nullopt;
  tag.remove_prefix(1);
  auto minor = takeNumber(tag);
  if (!minor) return std::nullopt;
  if (!tag.empty() && tag.front() != '.' && tag.front() != '-') return std::nullopt;
  return HaproxyVersion{.major = *major, .minor = *minor};
}

}  // namespace ekco::haproxy
