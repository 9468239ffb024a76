#include "haproxy/render.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "base/clock.h"
#include "base/os/process.h"

namespace ekco::haproxy {
namespace {

using ::testing::AllOf;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Debian 12's HAProxy 2.6 (scripts/setup installs it): the oldest version the rendered config must
// work with.
constexpr const char* kHaproxyBinary = "/usr/sbin/haproxy";

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Compares `actual` with tests/testdata/haproxy/<name>. EKCO_UPDATE_GOLDEN=1 rewrites the file
// instead (review the diff before committing it).
void expectGolden(const std::string& actual, const std::string& name) {
  std::filesystem::path path = std::filesystem::path(EKCO_TESTDATA_DIR) / "haproxy" / name;
  if (const char* update = std::getenv("EKCO_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing (EKCO_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, readFile(path)) << "golden " << path;
}

struct HaproxyCheck {
  bool valid = false;
  std::string output{};
};

// Runs the real `haproxy -c -f FILE` on `config`.
HaproxyCheck haproxyCheck(const std::string& config) {
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
                               ("ekco-haproxy-" + std::to_string(::getpid()) + ".cfg");
  std::ofstream(path, std::ios::binary) << config;
  base::SystemClock clock;
  base::BoostProcessRunner runner(clock);
  auto result = runner.run(base::ProcessRequest{
      .argv = {kHaproxyBinary, "-c", "-f", path.string()},
      .timeout = std::chrono::seconds(60),
  });
  std::filesystem::remove(path);
  if (!result) return {.valid = false, .output = result.error().message()};
  return {.valid = result->success(), .output = result->stdout_data + result->stderr_data};
}

#define SKIP_WITHOUT_HAPROXY()                                               \
  do {                                                                       \
    if (!std::filesystem::exists(kHaproxyBinary)) {                          \
      GTEST_SKIP() << kHaproxyBinary << " is not installed (scripts/setup)"; \
    }                                                                        \
  } while (false)

// The config is valid for HAProxy 2.6 and draws no warning.
void expectHaproxyAcceptsCleanly(const std::string& config) {
  HaproxyCheck check = haproxyCheck(config);
  EXPECT_TRUE(check.valid) << check.output << "\n--- config ---\n" << config;
  EXPECT_THAT(check.output, Not(HasSubstr("WARNING"))) << config;
}

std::vector<Endpoint> endpoints(const std::vector<std::string>& texts) {
  std::vector<Endpoint> out;
  for (const std::string& t : texts) {
    auto e = parseEndpoint(t);
    EXPECT_TRUE(e) << t << ": " << e.error().message();
    if (e) out.push_back(*e);
  }
  return out;
}

std::string mustRender(const HaproxyConfigOptions& options) {
  auto config = renderHaproxyConfig(options);
  EXPECT_TRUE(config) << config.error().message();
  return config ? *config : std::string();
}

std::vector<std::string> serverLines(const std::string& config) {
  std::vector<std::string> out;
  std::istringstream in(config);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("    server ")) out.push_back(line);
  }
  return out;
}

// --- parseEndpoint ------------------------------------------------------------------------------

TEST(ParseEndpoint, AcceptsAddressesAndNamesWithOrWithoutPort) {
  struct Case {
    std::string text;
    std::string host;
    std::uint16_t port;
  };
  const std::vector<Case> cases = {
      {"10.0.0.1", "10.0.0.1", 6443},
      {"10.0.0.1:6443", "10.0.0.1", 6443},
      {"10.0.0.1:443", "10.0.0.1", 443},
      {"1.2.3.4:1", "1.2.3.4", 1},
      {"1.2.3.4:65535", "1.2.3.4", 65535},
      {"[fd00::1]:6443", "fd00::1", 6443},
      {"[fd00::1]:8443", "fd00::1", 8443},
      {"[fd00::1]", "fd00::1", 6443},
      {"fd00::1", "fd00::1", 6443},
      {"FD00:0:0::1", "fd00::1", 6443},
      {"[2001:db8:0:0:0:0:0:1]:6443", "2001:db8::1", 6443},
      {"::1", "::1", 6443},
      {"::ffff:10.0.0.1", "::ffff:10.0.0.1", 6443},
      {"host.example.com:6443", "host.example.com", 6443},
      {"host.example.com", "host.example.com", 6443},
      {"Host.Example.COM:7443", "host.example.com", 7443},
      {"localhost", "localhost", 6443},
      {"cp-1", "cp-1", 6443},
      {"1cp.example.com", "1cp.example.com", 6443},
      {"10.0.0.1.nip.io", "10.0.0.1.nip.io", 6443},
      {std::string(63, 'a') + ".example.com", std::string(63, 'a') + ".example.com", 6443},
  };
  for (const Case& c : cases) {
    auto e = parseEndpoint(c.text);
    ASSERT_TRUE(e) << c.text << ": " << e.error().message();
    EXPECT_EQ(e->host, c.host) << c.text;
    EXPECT_EQ(e->port, c.port) << c.text;
  }
}

TEST(ParseEndpoint, RejectsAnythingElseWithAOneLineMessageNamingTheValue) {
  std::string long_name;
  while (long_name.size() < 254) long_name += "abcdefghi.";
  long_name += "com";
  const std::vector<std::string> bad = {
      "",
      " ",
      "10.0.0.1 ",
      " 10.0.0.1",
      "10.0.0.1\n    server evil 192.0.2.1:80",
      "10.0.0.1\r",
      "10.0.0.1#comment",
      "\"10.0.0.1\"",
      "'10.0.0.1'",
      "10.0.0.1:0",
      "10.0.0.1:65536",
      "10.0.0.1:99999999",
      "10.0.0.1:",
      ":6443",
      "10.0.0.1:64a3",
      "10.0.0.1:+443",
      "10.0.0.1:-1",
      "10.0.0.1:6443 ",
      "10.0.0.256",
      "1.2.3",
      "1.2.3.4.5",
      "[fd00::1",
      "[fd00::1]6443",
      "[fd00::1]:",
      "[10.0.0.1]:6443",
      "[host.example.com]:6443",
      "[]:6443",
      "fd00::1::2",
      "fd00::1:6443:x",
      "fe80::1%eth0",
      "[fe80::1%eth0]:6443",
      "-host.example.com",
      "host-.example.com",
      "host..example.com",
      ".example.com",
      "host.example.com.",
      "host_name.example.com",
      "h\xc3\xa9llo.example.com",
      std::string(64, 'a') + ".example.com",
      long_name,
      "https://10.0.0.1:6443",
      "10.0.0.1/24",
      "10.0.0.1,10.0.0.2",
      "10.0.0.1;10.0.0.2",
      "host.example.com:6443:1",
      std::string("10.0.0.1\0", 9),
  };
  for (const std::string& text : bad) {
    auto e = parseEndpoint(text);
    ASSERT_FALSE(e) << "accepted: " << text;
    EXPECT_EQ(e.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.error().message(), StartsWith("invalid endpoint \"")) << text;
    EXPECT_THAT(e.error().message(), Not(HasSubstr("\n"))) << e.error().message();
  }
}

TEST(ParseEndpoint, MessageQuotesTheValueAndSaysWhy) {
  auto e = parseEndpoint("10.0.0.1:70000");
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message(),
            R"(invalid endpoint "10.0.0.1:70000": port "70000" is not a number in 1..65535)");
  auto nl = parseEndpoint("10.0.0.1\nx");
  ASSERT_FALSE(nl);
  EXPECT_THAT(nl.error().message(), StartsWith(R"(invalid endpoint "10.0.0.1\nx": )"));
}

TEST(ParseEndpointList, SplitsOnCommasAndRefusesEmptyItems) {
  auto two = parseEndpointList("10.0.0.1,[fd00::1]:7443");
  ASSERT_TRUE(two) << two.error().message();
  EXPECT_EQ(*two, (std::vector<Endpoint>{{.host = "10.0.0.1", .port = 6443},
                                         {.host = "fd00::1", .port = 7443}}));
  auto none = parseEndpointList("");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  for (const char* bad :
       {"10.0.0.1,,10.0.0.2", "10.0.0.1,", ",10.0.0.1", "10.0.0.1, 10.0.0.2", ","}) {
    auto r = parseEndpointList(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().message(), StartsWith("invalid endpoint")) << bad;
  }
}

TEST(FormatEndpoint, BracketsIpv6) {
  EXPECT_EQ(formatEndpoint({.host = "10.0.0.1", .port = 6443}), "10.0.0.1:6443");
  EXPECT_EQ(formatEndpoint({.host = "fd00::1", .port = 6443}), "[fd00::1]:6443");
  EXPECT_EQ(formatEndpoint({.host = "cp-1.example.com", .port = 7443}), "cp-1.example.com:7443");
}

// --- renderHaproxyConfig ------------------------------------------------------------------------

TEST(RenderHaproxyConfig, ThreePrimariesMatchTheGoldenFile) {
  std::string config =
      mustRender({.endpoints = endpoints({"10.0.0.12", "10.0.0.2:6443", "10.0.0.3"})});
  expectGolden(config, "three_primaries.cfg");
}

TEST(RenderHaproxyConfig, Ipv6PrimariesAreBracketedAndLoopbackBindsBothFamilies) {
  std::string config = mustRender({.endpoints = endpoints({"fd00::3", "[fd00::1]:6443", "fd00::2"}),
                                   .bind = "127.0.0.1:6444",
                                   .bind_ipv6_loopback = true});
  expectGolden(config, "ipv6_primaries.cfg");
  EXPECT_THAT(config, HasSubstr("    bind 127.0.0.1:6444\n    bind [::1]:6444\n"));
  EXPECT_THAT(config, HasSubstr(" [fd00::1]:6443 "));
}

TEST(RenderHaproxyConfig, Haproxy29ImageGetsTheZeroCopyWorkaround) {
  std::string config = mustRender({.endpoints = endpoints({"10.0.0.1", "10.0.0.2", "10.0.0.3"}),
                                   .image = "haproxy:2.9.1-alpine"});
  expectGolden(config, "haproxy29.cfg");
  EXPECT_THAT(config, HasSubstr("    tune.disable-zero-copy-forwarding\n"));
}

TEST(RenderHaproxyConfig, HostnamePrimariesStartEvenWhenTheyDoNotResolve) {
  std::string config =
      mustRender({.endpoints = endpoints({"localhost:6443", "10.0.0.1", "cp-2.example.invalid"})});
  expectGolden(config, "hostnames.cfg");
  std::vector<std::string> servers = serverLines(config);
  ASSERT_EQ(servers.size(), 3u);
  EXPECT_THAT(servers[0], AllOf(HasSubstr(" 10.0.0.1:6443 "), Not(HasSubstr("resolvers"))));
  EXPECT_THAT(servers[1], AllOf(HasSubstr(" cp-2.example.invalid:6443 "),
                                EndsWith(" resolvers default init-addr libc,none")));
  EXPECT_THAT(servers[2], AllOf(HasSubstr(" localhost:6443 "),
                                EndsWith(" resolvers default init-addr libc,none")));
}

TEST(RenderHaproxyConfig, KeepsEkcosProvenSettings) {
  std::string config = mustRender({.endpoints = endpoints({"10.0.0.1"})});
  for (const char* line : {
           "global\n",
           "    log stdout format raw local0 notice\n",
           "defaults\n",
           "    log global\n",
           "    maxconn 20000\n",
           "    mode tcp\n",
           "    option dontlognull\n",
           "    retries 3\n",
           "    timeout http-request 30s\n",
           "    timeout queue 1m\n",
           "    timeout connect 10s\n",
           "    timeout client 86400s\n",
           "    timeout server 86400s\n",
           "    timeout tunnel 86400s\n",
           "frontend kubernetes-api\n",
           "    option tcplog\n",
           "    default_backend kubernetes-primaries\n",
           "backend kubernetes-primaries\n",
           "    option httpchk GET /readyz HTTP/1.0\n",
           "    option log-health-checks\n",
           "    balance roundrobin\n",
           "    server k8s-primary-0 10.0.0.1:6443 weight 1 verify none check check-ssl inter 1s "
           "fall 2 rise 3 on-marked-down shutdown-sessions\n",
       }) {
    EXPECT_THAT(config, HasSubstr(line));
  }
  // Loopback by default; foreground master-worker, never `daemon`; no 2.9-only directive for an
  // unknown (lts) version.
  EXPECT_THAT(config, HasSubstr("    bind 127.0.0.1:6444\n"));
  EXPECT_THAT(config, Not(HasSubstr("[::1]")));
  EXPECT_THAT(config, HasSubstr("    master-worker\n"));
  EXPECT_THAT(config, Not(HasSubstr("daemon")));
  EXPECT_THAT(config, Not(HasSubstr("zero-copy")));
}

TEST(RenderHaproxyConfig, EveryServerShutsDownSessionsWhenMarkedDown) {
  std::string config = mustRender(
      {.endpoints = endpoints({"10.0.0.1", "fd00::1", "cp.example.com", "10.0.0.2:7443"})});
  std::vector<std::string> servers = serverLines(config);
  ASSERT_EQ(servers.size(), 4u);
  for (std::size_t i = 0; i < servers.size(); ++i) {
    EXPECT_THAT(servers[i], StartsWith("    server k8s-primary-" + std::to_string(i) + " "));
    EXPECT_THAT(servers[i], HasSubstr(" on-marked-down shutdown-sessions"));
    EXPECT_THAT(servers[i], HasSubstr(" check check-ssl inter 1s fall 2 rise 3 "));
  }
}

TEST(RenderHaproxyConfig, RefusesAnEmptyBackend) {
  auto config = renderHaproxyConfig({.endpoints = {}});
  ASSERT_FALSE(config);
  EXPECT_EQ(config.error().code(), base::ErrorCode::kInvalidArgument);
  EXPECT_EQ(config.error().message(),
            "no apiserver endpoints: refusing to render an empty backend");
}

TEST(RenderHaproxyConfig, SameSetRendersTheSameBytesWhateverTheOrderAndDuplicates) {
  const std::vector<std::string> texts = {"10.0.0.10", "10.0.0.9:6443", "[fd00::1]:6443",
                                          "cp.example.com"};
  std::string want = mustRender({.endpoints = endpoints(texts)});
  std::vector<std::size_t> order(texts.size());
  std::iota(order.begin(), order.end(), 0);
  int permutations = 0;
  do {
    std::vector<std::string> permuted;
    for (std::size_t i : order) permuted.push_back(texts[i]);
    EXPECT_EQ(mustRender({.endpoints = endpoints(permuted)}), want);
    // The same endpoints again, spelled differently.
    permuted.insert(permuted.end(), {"10.0.0.10:6443", "FD00:0::1", "CP.Example.com:6443"});
    EXPECT_EQ(mustRender({.endpoints = endpoints(permuted)}), want);
    ++permutations;
  } while (std::next_permutation(order.begin(), order.end()));
  EXPECT_EQ(permutations, 24);
  // IPv4 by value (10.0.0.9 before 10.0.0.10), then IPv6, then names.
  std::vector<std::string> servers = serverLines(want);
  ASSERT_EQ(servers.size(), 4u);
  EXPECT_THAT(servers[0], HasSubstr(" 10.0.0.9:6443 "));
  EXPECT_THAT(servers[1], HasSubstr(" 10.0.0.10:6443 "));
  EXPECT_THAT(servers[2], HasSubstr(" [fd00::1]:6443 "));
  EXPECT_THAT(servers[3], HasSubstr(" cp.example.com:6443 "));
}

TEST(RenderHaproxyConfig, SameHostOnTwoPortsIsTwoServers) {
  std::string config = mustRender({.endpoints = endpoints({"10.0.0.1:7443", "10.0.0.1:6443"})});
  std::vector<std::string> servers = serverLines(config);
  ASSERT_EQ(servers.size(), 2u);
  EXPECT_THAT(servers[0], HasSubstr(" 10.0.0.1:6443 "));
  EXPECT_THAT(servers[1], HasSubstr(" 10.0.0.1:7443 "));
}

TEST(RenderHaproxyConfig, ValidatesEndpointsBuiltWithoutTheParser) {
  for (const std::string& host :
       {std::string("10.0.0.1\n    server evil 192.0.2.1:80"), std::string(""),
        std::string("[fd00::1]"), std::string("10.0.0.1:6443"), std::string("a b")}) {
    auto config = renderHaproxyConfig({.endpoints = {{.host = host, .port = 6443}}});
    ASSERT_FALSE(config) << host;
    EXPECT_EQ(config.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(config.error().message(), StartsWith("invalid endpoint host \""));
    EXPECT_THAT(config.error().message(), Not(HasSubstr("\n")));
  }
  auto port0 = renderHaproxyConfig({.endpoints = {{.host = "10.0.0.1", .port = 0}}});
  ASSERT_FALSE(port0);
  EXPECT_THAT(port0.error().message(), HasSubstr("port 0"));
}

TEST(RenderHaproxyConfig, BindIsAnAddressWithAPort) {
  for (const char* bind : {"0.0.0.0:6444", "[::1]:6444", "[::]:7444", "10.1.2.3:1"}) {
    EXPECT_TRUE(renderHaproxyConfig({.endpoints = endpoints({"10.0.0.1"}), .bind = bind})) << bind;
  }
  for (const char* bind : {"", "127.0.0.1", "localhost:6444", "127.0.0.1:6444 ssl", "127.0.0.1:0",
                           "*:6444", ":6444", "127.0.0.1:6444\n    bind x"}) {
    auto config = renderHaproxyConfig({.endpoints = endpoints({"10.0.0.1"}), .bind = bind});
    ASSERT_FALSE(config) << bind;
    EXPECT_THAT(config.error().message(), StartsWith("invalid bind address \"")) << bind;
    EXPECT_THAT(config.error().message(), Not(HasSubstr("\n")));
  }
  // [::1] is not bound twice.
  std::string config = mustRender(
      {.endpoints = endpoints({"10.0.0.1"}), .bind = "[::1]:6444", .bind_ipv6_loopback = true});
  EXPECT_THAT(config, HasSubstr("    bind [::1]:6444\n    option tcplog\n"));
}

TEST(RenderHaproxyConfig, RefusesAnInvalidImage) {
  auto config = renderHaproxyConfig(
      {.endpoints = endpoints({"10.0.0.1"}), .image = "haproxy:2.9\n    daemon"});
  ASSERT_FALSE(config);
  EXPECT_THAT(config.error().message(), StartsWith(R"(invalid image "haproxy:2.9\n    daemon": )"));
}

TEST(RenderHaproxyConfig, ZeroCopyDirectiveOnlyWhenTheTagSays29OrLater) {
  const std::string digest = "@sha256:" + std::string(64, '0');
  struct Case {
    std::string image;
    bool directive;
  };
  for (const Case& c : std::vector<Case>{
           {"haproxy:2.9.1-alpine", true},
           {"haproxy:2.9", true},
           {"haproxy:3.0", true},
           {"haproxy:3", true},
           {"registry.local:5000/haproxy:3.2-bookworm", true},
           {"haproxy:2.8", false},
           {"haproxy:2.6.12", false},
           {"haproxy:lts-alpine", false},
           {"haproxy:latest", false},
           {"haproxy", false},
           {"haproxy:2.9.1" + digest, false},
           {"haproxy" + digest, false},
           {"other/proxy:2.9", false},
       }) {
    std::string config = mustRender({.endpoints = endpoints({"10.0.0.1"}), .image = c.image});
    EXPECT_EQ(config.find("tune.disable-zero-copy-forwarding") != std::string::npos, c.directive)
        << c.image;
  }
}

// --- the real haproxy -c
// --------------------------------------------------------------------------

TEST(RenderHaproxyConfig, Haproxy26AcceptsEveryIpConfigWithoutWarnings) {
  SKIP_WITHOUT_HAPROXY();
  for (const char* golden : {"three_primaries.cfg", "ipv6_primaries.cfg"}) {
    SCOPED_TRACE(golden);
    expectHaproxyAcceptsCleanly(
        readFile(std::filesystem::path(EKCO_TESTDATA_DIR) / "haproxy" / golden));
  }
  expectHaproxyAcceptsCleanly(mustRender({.endpoints = endpoints({"10.0.0.1"})}));
  expectHaproxyAcceptsCleanly(mustRender(
      {.endpoints = endpoints({"[::1]:1", "192.0.2.1:65535"}), .bind = "0.0.0.0:16444"}));
  expectHaproxyAcceptsCleanly(mustRender(
      {.endpoints = endpoints({"10.0.0.1"}), .bind = "[::]:16444", .bind_ipv6_loopback = true}));
  expectHaproxyAcceptsCleanly(
      mustRender({.endpoints = endpoints({"localhost"}), .image = "haproxy:2.8"}));
}

TEST(RenderHaproxyConfig, Haproxy26StartsWithUnresolvableNames) {
  SKIP_WITHOUT_HAPROXY();
  // HAProxy resolves names while parsing; without init-addr ...,none a name that does not resolve
  // makes `haproxy -c` (and the static pod) fail. With it, the server starts disabled with a
  // warning.
  std::string config =
      readFile(std::filesystem::path(EKCO_TESTDATA_DIR) / "haproxy" / "hostnames.cfg");
  HaproxyCheck check = haproxyCheck(config);
  EXPECT_TRUE(check.valid) << check.output;
  std::string without = config;
  for (std::size_t at;
       (at = without.find(" resolvers default init-addr libc,none")) != std::string::npos;) {
    without.erase(at, std::string_view(" resolvers default init-addr libc,none").size());
  }
  HaproxyCheck strict = haproxyCheck(without);
  EXPECT_FALSE(strict.valid) << strict.output;
  EXPECT_THAT(strict.output, HasSubstr("could not resolve address 'cp-2.example.invalid'"));
}

TEST(RenderHaproxyConfig, Haproxy26RefusesOnlyThe29DirectiveOfThe29Config) {
  SKIP_WITHOUT_HAPROXY();
  // Why the directive is version-gated: 2.6 does not know it and refuses the whole file.
  std::string config =
      readFile(std::filesystem::path(EKCO_TESTDATA_DIR) / "haproxy" / "haproxy29.cfg");
  HaproxyCheck check = haproxyCheck(config);
  EXPECT_FALSE(check.valid);
  EXPECT_THAT(check.output, HasSubstr("unknown keyword 'tune.disable-zero-copy-forwarding'"));
  std::string without = config;
  std::string_view line = "    tune.disable-zero-copy-forwarding\n";
  without.erase(without.find(line), line.size());
  expectHaproxyAcceptsCleanly(without);
}

// --- renderStaticPodManifest --------------------------------------------------------------------

TEST(RenderStaticPodManifest, DefaultMatchesTheGoldenFile) {
  auto manifest = renderStaticPodManifest({});
  ASSERT_TRUE(manifest) << manifest.error().message();
  expectGolden(*manifest, "manifest.yaml");
}

TEST(RenderStaticPodManifest, IsTheHaproxyStaticPod) {
  auto manifest = renderStaticPodManifest(
      {.image = "registry.example.com:5000/kurl/haproxy:2.9.1-alpine", .bind = "127.0.0.1:7444"});
  ASSERT_TRUE(manifest) << manifest.error().message();
  YAML::Node pod = YAML::Load(*manifest);
  EXPECT_EQ(pod["apiVersion"].as<std::string>(), "v1");
  EXPECT_EQ(pod["kind"].as<std::string>(), "Pod");
  EXPECT_EQ(pod["metadata"]["name"].as<std::string>(), "haproxy");
  EXPECT_EQ(pod["metadata"]["namespace"].as<std::string>(), "kube-system");
  EXPECT_EQ(pod["metadata"]["labels"]["app"].as<std::string>(), "kurl-haproxy");
  EXPECT_EQ(pod["metadata"]["annotations"]["kurl.sh/haproxy-fileversion"].as<std::string>(), "0");
  EXPECT_EQ(pod["metadata"]["annotations"]["kurl.sh/haproxy-fileversion"].Tag(),
            "!");  // quoted
  EXPECT_TRUE(pod["spec"]["hostNetwork"].as<bool>());
  EXPECT_EQ(pod["spec"]["priorityClassName"].as<std::string>(), "system-node-critical");
  ASSERT_EQ(pod["spec"]["containers"].size(), 1u);
  YAML::Node c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "haproxy");
  EXPECT_EQ(c["image"].as<std::string>(), "registry.example.com:5000/kurl/haproxy:2.9.1-alpine");
  YAML::Node probe = c["livenessProbe"];
  EXPECT_EQ(probe["failureThreshold"].as<int>(), 8);
  EXPECT_EQ(probe["httpGet"]["host"].as<std::string>(), "127.0.0.1");  // what haproxy binds
  EXPECT_EQ(probe["httpGet"]["path"].as<std::string>(), "/healthz");
  EXPECT_EQ(probe["httpGet"]["port"].as<int>(), 7444);
  EXPECT_EQ(probe["httpGet"]["scheme"].as<std::string>(), "HTTPS");
  ASSERT_EQ(c["volumeMounts"].size(), 1u);
  EXPECT_EQ(c["volumeMounts"][0]["name"].as<std::string>(), "haproxyconf");
  // The directory: a file bind mount would pin the inode ekco's atomic rename replaces.
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/usr/local/etc/haproxy");
  EXPECT_TRUE(c["volumeMounts"][0]["readOnly"].as<bool>());
  ASSERT_EQ(pod["spec"]["volumes"].size(), 1u);
  YAML::Node v = pod["spec"]["volumes"][0];
  EXPECT_EQ(v["name"].as<std::string>(), "haproxyconf");
  EXPECT_EQ(v["hostPath"]["path"].as<std::string>(), "/etc/haproxy");
  EXPECT_EQ(v["hostPath"]["type"].as<std::string>(), "DirectoryOrCreate");
  // Nothing EKCO's pod did not have but the priority class (and the probe's host).
  EXPECT_EQ(pod.size(), 4u);
  EXPECT_EQ(pod["metadata"].size(), 4u);
  EXPECT_EQ(pod["spec"].size(), 4u);
  EXPECT_EQ(c.size(), 4u);
}

TEST(RenderStaticPodManifest, EveryValidImageStaysOneYamlString) {
  const std::string digest = "@sha256:" + std::string(64, 'f');
  for (const std::string& image :
       {std::string("haproxy"), std::string("[fd00::1]:5000/haproxy:2.6"), "haproxy:2.9" + digest,
        std::string("localhost:5000/a__b/c-d.e:Tag_1.x")}) {
    auto manifest = renderStaticPodManifest({.image = image});
    ASSERT_TRUE(manifest) << image << ": " << manifest.error().message();
    YAML::Node pod = YAML::Load(*manifest);
    EXPECT_EQ(pod["spec"]["containers"][0]["image"].as<std::string>(), image);
  }
}

TEST(RenderStaticPodManifest, RefusesAnInvalidImageOrPort) {
  for (const char* image : {"", "haproxy lts", "haproxy\"\n    command: [sh]", "haproxy:2.9 #x",
                            "haproxy'", "HAProxy"}) {
    auto manifest = renderStaticPodManifest({.image = image});
    ASSERT_FALSE(manifest) << image;
    EXPECT_EQ(manifest.error().code(), base::ErrorCode::kInvalidArgument);
    EXPECT_THAT(manifest.error().message(), StartsWith("invalid image \""));
    EXPECT_THAT(manifest.error().message(), Not(HasSubstr("\n")));
  }
  auto port0 = renderStaticPodManifest({.bind = "127.0.0.1:0"});
  ASSERT_FALSE(port0);
  EXPECT_THAT(port0.error().message(), HasSubstr("invalid bind address \"127.0.0.1:0\""));
}

TEST(ParseConfigServers, ReadsBackWhatWasRendered) {
  auto config = renderHaproxyConfig({.endpoints = {{.host = "10.0.0.2", .port = 6443},
                                                   {.host = "fd00::1", .port = 6443},
                                                   {.host = "cp-1.example.com", .port = 7443}}});
  ASSERT_TRUE(config) << config.error().message();
  EXPECT_EQ(parseConfigServers(*config),
            (std::vector<Endpoint>{{.host = "10.0.0.2", .port = 6443},
                                   {.host = "fd00::1", .port = 6443},
                                   {.host = "cp-1.example.com", .port = 7443}}));
  // EKCO's lines, tabs, and lines that are not servers.
  EXPECT_EQ(parseConfigServers("backend x\n\tserver k8s-primary-0 10.0.0.1:6443 weight 1\n"
                               "    server broken\n    server s not_an_address!\n"
                               "# server k 10.0.0.9:6443\n"),
            (std::vector<Endpoint>{{.host = "10.0.0.1", .port = 6443}}));
  EXPECT_TRUE(parseConfigServers("").empty());
}

TEST(ParseBindAddress, AddressAndPortOnly) {
  auto v4 = parseBindAddress("127.0.0.1:6444");
  ASSERT_TRUE(v4);
  EXPECT_EQ(*v4, (BindAddress{.host = "127.0.0.1", .port = 6444, .ipv6 = false}));
  EXPECT_EQ(formatBindAddress(*v4), "127.0.0.1:6444");
  EXPECT_EQ(localAddressOf(*v4), "127.0.0.1");
  auto v6 = parseBindAddress("[::]:7000");
  ASSERT_TRUE(v6);
  EXPECT_EQ(formatBindAddress(*v6), "[::]:7000");
  EXPECT_EQ(localAddressOf(*v6), "::1");
  EXPECT_EQ(localAddressOf(*parseBindAddress("0.0.0.0:6444")), "127.0.0.1");
  for (const char* bad :
       {"localhost:6444", "127.0.0.1", "127.0.0.1:0", "", "[::1]", "1.2.3.4:6444 x"}) {
    auto r = parseBindAddress(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_THAT(r.error().message(), StartsWith("invalid bind address")) << bad;
  }
}

}  // namespace
}  // namespace ekco::haproxy
