#include "agent/features/api_address/kubeconfig_server.h"

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include "base/ip_address.h"
#include "base/strings.h"
#include "pki/renew.h"

namespace ekco::agent::api_address {

using base::Error;
using base::ErrorCode;

namespace {

// "  server: https://x:6443  # c" -> the value as written ("https://x:6443"), unquoted; nullopt
// for a line that is not a `server:` key.
std::optional<std::string> serverValue(std::string_view line) {
  std::string_view rest = line;
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  if (rest.starts_with("- ")) rest.remove_prefix(2);  // "- server: ..." in a sequence item
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (!rest.starts_with("server:")) return std::nullopt;
  rest.remove_prefix(7);
  while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
  if (const auto hash = rest.find(" #"); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r')) {
    rest.remove_suffix(1);
  }
  if (rest.size() >= 2 && (rest.front() == '"' || rest.front() == '\'') &&
      rest.back() == rest.front()) {
    rest = rest.substr(1, rest.size() - 2);
  }
  return std::string(rest);
}

}  // namespace

base::Result<std::vector<std::string>> kubeconfigServers(std::string_view text,
                                                         std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return Error(fmt::format("{}: not YAML: {}", source, e.msg), ErrorCode::kParse);
  }
  if (!root.IsMap() || !root["clusters"] || !root["clusters"].IsSequence() ||
      root["clusters"].size() == 0) {
    return Error(fmt::format("{}: not a kubeconfig (no clusters)", source), ErrorCode::kParse);
  }
  std::vector<std::string> out;
  for (const YAML::Node& c : root["clusters"]) {
    const YAML::Node server =
        c.IsMap() && c["cluster"] && c["cluster"].IsMap() ? c["cluster"]["server"] : YAML::Node();
    if (!server || !server.IsScalar()) {
      return Error(fmt::format("{}: a cluster without a server", source), ErrorCode::kParse);
    }
    out.push_back(server.as<std::string>());
  }
  return out;
}

base::Result<std::string> withServer(std::string_view text, std::string_view from,
                                     std::string_view to, std::string_view source) {
  auto servers = kubeconfigServers(text, source);
  if (!servers) return std::move(servers).error();
  std::size_t wanted = 0;
  for (const std::string& s : *servers) wanted += s == from ? 1 : 0;
  if (wanted == 0 || from == to) return std::string(text);
  std::string out;
  std::size_t replaced = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string_view line = text.substr(start, end - start);
    if (auto value = serverValue(line); value && *value == from) {
      const std::size_t at = line.find(*value);
      out.append(line.substr(0, at));
      out.append(to);
      out.append(line.substr(at + value->size()));
      ++replaced;
    } else {
      out.append(line);
    }
    if (end < text.size()) out.push_back('\n');
    start = end + 1;
  }
  // What yaml-cpp reads from the result must be what was meant: every `from` is now `to`.
  auto after = kubeconfigServers(out, source);
  if (!after || replaced != wanted ||
      std::count(after->begin(), after->end(), std::string(to)) !=
          static_cast<std::ptrdiff_t>(
              wanted + std::count(servers->begin(), servers->end(), std::string(to)))) {
    return Error(fmt::format("{}: the server line of {} is not written as ekco can rewrite it "
                             "(one `server: URL` line per cluster)",
                             source, base::quoteForMessage(from)),
                 ErrorCode::kParse);
  }
  return out;
}

base::Status checkServerUrl(std::string_view url, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Error(fmt::format("{}: {} is not an https://HOST[:PORT] URL ({})", what,
                             base::quoteForMessage(url), why),
                 ErrorCode::kInvalidArgument);
  };
  if (!url.starts_with("https://")) return bad("want https://");
  std::string_view rest = url.substr(8);
  if (rest.empty()) return bad("no host");
  for (char c : rest) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '/' || c == '?' || c == '#' || c == '@' ||
        c == '"' || c == '\'' || c == '\\') {
      return bad("no path, query, user, quotes or whitespace");
    }
  }
  std::string_view host = rest;
  std::string_view port;
  if (rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("an unclosed [");
    host = rest.substr(1, close - 1);
    if (!base::parseIpAddress(host) || base::parseIpAddress(host)->v6 == false) {
      return bad("want an IPv6 address in brackets");
    }
    if (close + 1 < rest.size()) {
      if (rest[close + 1] != ':') return bad("want :PORT after ]");
      port = rest.substr(close + 2);
    }
  } else {
    const auto colon = rest.find(':');
    if (colon != std::string_view::npos) {
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
    }
    if (!base::parseIpAddress(host)) {
      if (host.starts_with("*") || !pki::canonicalAltName(host, what)) {
        return bad("a bad host name");
      }
    }
  }
  if (!port.empty() || rest.back() == ':') {
    int value = 0;
    if (port.empty() || port.size() > 5) return bad("a bad port");
    for (char c : port) {
      if (c < '0' || c > '9') return bad("a bad port");
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return bad("a port from 1 to 65535");
  }
  return base::ok();
}

std::string serverHost(std::string_view url) {
  std::string_view rest = url.starts_with("https://") ? url.substr(8) : url;
  if (!rest.empty() && rest.front() == '[') {
    return std::string(rest.substr(1, rest.find(']') - 1));
  }
  return std::string(rest.substr(0, rest.find(':')));
}

}  // namespace ekco::agent::api_address
