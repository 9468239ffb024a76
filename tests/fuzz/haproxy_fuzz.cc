// haproxy endpoints and rendering (haproxy/render.h, haproxy/image.h): the internal load
// balancer turns apiserver addresses (from the API and from `ekco render haproxy --endpoints`),
// the bind address and the image (from config.yaml) into haproxy.cfg and a static pod manifest.
// The input's lines: (1) a comma-separated endpoint list, (2) the bind address (empty: the
// default), (3) the image (empty: the default), (4) "ipv6" to also bind [::1].
//
// Checks: errors are one line; formatEndpoint → parseEndpoint gives the endpoint back and writes
// nothing but address characters; a rendered haproxy.cfg consists only of the directives ekco
// writes (a value cannot add a line, a directive or a comment), binds where asked, and lists
// every endpoint exactly once (parseConfigServers reads back the de-duplicated set); a rendered
// manifest is YAML whose image and probe port are the ones given.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "haproxy/image.h"
#include "haproxy/render.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using ekco::fuzz::check;
using ekco::fuzz::checkOneLine;
using ekco::haproxy::Endpoint;

// Characters of addresses, names, ports and image references: nothing that could end a line,
// start a comment, quote or separate words in haproxy.cfg or YAML.
bool plainValue(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '-' || c == '_' || c == ':' || c == '/' || c == '@' || c == '[' || c == ']';
  });
}

// Every line of ekco's haproxy.cfg is one of these: the two header comments, a section, or an
// indented directive with one of these keywords.
void checkConfigShape(const std::string& cfg) {
  static const std::set<std::string, std::less<>> kSections = {
      "global", "defaults", "frontend kubernetes-api", "backend kubernetes-primaries"};
  static const std::set<std::string, std::less<>> kDirectives = {
      "log",
      "master-worker",
      "tune.disable-zero-copy-forwarding",
      "maxconn",
      "mode",
      "option",
      "retries",
      "timeout",
      "bind",
      "default_backend",
      "balance",
      "server"};
  check(!cfg.empty() && cfg.back() == '\n', "haproxy.cfg does not end in a newline", cfg);
  std::string_view rest = cfg;
  for (int n = 0; !rest.empty(); ++n) {
    const std::size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest.remove_prefix(eol + 1);
    for (char c : line) {
      check(c >= 0x20 && c < 0x7f, "a non-printable byte in haproxy.cfg", std::string(line));
    }
    if (n < 2) {
      check(line.starts_with("# "), "haproxy.cfg's header is not two comment lines", cfg);
      continue;
    }
    check(line.find('#') == std::string_view::npos, "a '#' in haproxy.cfg", std::string(line));
    if (!line.starts_with("    ")) {
      check(kSections.contains(line), "an unknown section in haproxy.cfg", std::string(line));
      continue;
    }
    const std::string_view body = line.substr(4);
    const std::string_view keyword = body.substr(0, body.find(' '));
    check(kDirectives.contains(keyword), "an unknown directive in haproxy.cfg", std::string(line));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [endpoints_text, rest1] = ekco::fuzz::firstLine(ekco::fuzz::asText(data, size));
  const auto [bind_text, rest2] = ekco::fuzz::firstLine(rest1);
  const auto [image_text, rest3] = ekco::fuzz::firstLine(rest2);
  const bool ipv6 = ekco::fuzz::firstLine(rest3).first == "ipv6";

  auto endpoints = ekco::haproxy::parseEndpointList(endpoints_text);
  if (!endpoints) {
    checkOneLine(endpoints.error().message(), "parseEndpointList error");
    return 0;
  }
  std::set<std::string> distinct;
  for (const Endpoint& e : *endpoints) {
    const std::string text = ekco::haproxy::formatEndpoint(e);
    check(plainValue(text), "formatEndpoint wrote a character outside addresses", text);
    auto again = ekco::haproxy::parseEndpoint(text);
    check(again && *again == e, "parseEndpoint(formatEndpoint(e)) != e", text);
    distinct.insert(text);
  }

  ekco::haproxy::HaproxyConfigOptions options{.endpoints = *endpoints, .bind_ipv6_loopback = ipv6};
  if (!bind_text.empty()) options.bind = std::string(bind_text);
  if (!image_text.empty()) options.image = std::string(image_text);

  auto bind = ekco::haproxy::parseBindAddress(options.bind);
  if (bind) {
    const std::string text = ekco::haproxy::formatBindAddress(*bind);
    check(plainValue(text), "formatBindAddress wrote a character outside addresses", text);
    auto again = ekco::haproxy::parseBindAddress(text);
    check(again && *again == *bind, "parseBindAddress(formatBindAddress(b)) != b", text);
  } else {
    checkOneLine(bind.error().message(), "parseBindAddress error");
  }
  auto image_ok = ekco::haproxy::validateImage(options.image);
  if (image_ok) {
    check(plainValue(options.image), "validateImage accepted a character outside references",
          options.image);
  } else {
    checkOneLine(image_ok.error().message(), "validateImage error");
  }
  (void)ekco::haproxy::haproxyVersionOfImage(options.image);

  auto cfg = ekco::haproxy::renderHaproxyConfig(options);
  if (!cfg) {
    checkOneLine(cfg.error().message(), "renderHaproxyConfig error");
  } else {
    check(bind.has_value() && image_ok.has_value() && !endpoints->empty(),
          "rendered with an invalid bind address, image or no endpoint", *cfg);
    checkConfigShape(*cfg);
    check(cfg->find("    bind " + ekco::haproxy::formatBindAddress(*bind) + "\n") !=
              std::string::npos,
          "haproxy.cfg does not bind where asked", *cfg);
    std::set<std::string> servers;
    std::size_t lines = 0;
    for (const Endpoint& e : ekco::haproxy::parseConfigServers(*cfg)) {
      servers.insert(ekco::haproxy::formatEndpoint(e));
      ++lines;
    }
    check(servers == distinct && lines == distinct.size(),
          "haproxy.cfg's servers are not the endpoints, once each", *cfg);
  }

  auto manifest =
      ekco::haproxy::renderStaticPodManifest({.image = options.image, .bind = options.bind});
  if (!manifest) {
    checkOneLine(manifest.error().message(), "renderStaticPodManifest error");
    return 0;
  }
  check(bind.has_value() && image_ok.has_value(), "manifest with an invalid bind or image",
        *manifest);
  try {
    const YAML::Node pod = YAML::Load(*manifest);
    const YAML::Node container = pod["spec"]["containers"][0];
    check(container["image"].as<std::string>() == options.image,
          "the manifest's image is not the one given", *manifest);
    check(container["livenessProbe"]["httpGet"]["port"].as<int>() == bind->port,
          "the manifest's probe port is not the bind port", *manifest);
    check(pod.size() == 4 && pod["spec"].size() == 4 && container.size() == 4,
          "the manifest has keys ekco does not write", *manifest);
  } catch (const YAML::Exception& e) {
    ekco::fuzz::fail("the manifest is not the YAML ekco writes", *manifest + "\n" + e.what());
  }
  return 0;
}
