// The agent's pure pieces (node name resolution, socket path, host checks) and `ekco agent`'s
// start-up errors, in-process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/cli/cli.h"
#include "agent/features/host_checks/host_checks.h"
#include "agent/runtime/agent.h"
#include "kube/decode/timestamp.h"
#include "tests/agent/cli_support.h"
#include "tests/kubesim/server/pki.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;

TEST(NodeName, FlagThenEnvironmentThenLowerCasedHostName) {
  EXPECT_EQ(*resolveNodeName("node-a", "node-b", "host"), "node-a");
  EXPECT_EQ(*resolveNodeName("", "node-b", "host"), "node-b");
  EXPECT_EQ(*resolveNodeName("", "", "Host-1.Example.COM"), "host-1.example.com");
  auto bad = resolveNodeName("Node_A", "", "");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "node name from --node-name: \"Node_A\" is not a valid Node name (RFC 1123 subdomain)");
  EXPECT_FALSE(resolveNodeName("", "", ""));
  EXPECT_FALSE(resolveNodeName("", "-x", "h"));
  EXPECT_FALSE(resolveNodeName("a..b", "", ""));
}

TEST(SocketPath, LivesUnderTheHostRoot) {
  EXPECT_EQ(healthSocketPath("/", "/run/ekco/ekco.sock"), "/run/ekco/ekco.sock");
  EXPECT_EQ(healthSocketPath("/host", "/run/ekco/ekco.sock"), "/host/run/ekco/ekco.sock");
  EXPECT_EQ(healthSocketPath("/host/", "/run/ekco/ekco.sock"), "/host/run/ekco/ekco.sock");
}

kube::NodeRecord readyNode(const std::string& status) {
  kube::NodeRecord n;
  n.name = kube::Atom("node-a");
  n.conditions.push_back({.type = kube::Atom("Ready"),
                          .status = kube::Atom(status),
                          .last_transition_time = *kube::parseRfc3339("2026-11-22T10:00:00Z")});
  return n;
}

std::string summary(const std::vector<HostCheck>& checks) {
  std::string out;
  for (const auto& c : checks) out += (c.ok ? "ok " : "FAIL ") + c.name + ": " + c.message + "\n";
  return out;
}

TEST(HostChecksTest, AReadyJoinedWorker) {
  const auto now = *kube::parseRfc3339("2026-11-22T10:05:00Z");
  auto checks = evaluateHostChecks("node-a", {.synced = true, .node = readyNode("True")}, true,
                                   std::nullopt, {}, now);
  EXPECT_EQ(summary(checks),
            "ok node-registered: Node node-a exists\n"
            "ok node-ready: Ready=True for 5m\n"
            "ok kubelet-kubeconfig: /etc/kubernetes/kubelet.conf present\n");
}

TEST(HostChecksTest, WhatFailsIsSaid) {
  const auto now = *kube::parseRfc3339("2026-11-22T10:05:00Z");
  EXPECT_THAT(
      summary(evaluateHostChecks("node-a", {.synced = false}, false, std::nullopt, {}, now)),
      HasSubstr("FAIL node-registered: the node cache has not synced yet"));
  auto missing =
      summary(evaluateHostChecks("node-a", {.synced = true}, false, std::nullopt, {}, now));
  EXPECT_THAT(missing, HasSubstr("FAIL node-registered: Node node-a does not exist in the API"));
  EXPECT_THAT(missing, HasSubstr("FAIL kubelet-kubeconfig: /etc/kubernetes/kubelet.conf missing"));
  EXPECT_THAT(summary(evaluateHostChecks("node-a", {.synced = true, .node = readyNode("Unknown")},
                                         true, std::nullopt, {}, now)),
              HasSubstr("FAIL node-ready: Ready=Unknown for 5m"));
}

TEST(HostChecksTest, TheApiserverCertificateIsCheckedForExpiry) {
  auto pki = kubesim::generatePki();
  ASSERT_TRUE(pki) << pki.error().message();
  const auto now = std::chrono::system_clock::now();
  const ObservedNode node{.synced = true, .node = readyNode("True")};
  auto fresh = summary(evaluateHostChecks("node-a", node, true, pki->server_cert_pem,
                                          {.certificate_warning = std::chrono::hours(1)}, now));
  EXPECT_THAT(fresh,
              HasSubstr("ok apiserver-certificate: /etc/kubernetes/pki/apiserver.crt expires"));
  EXPECT_THAT(fresh, ::testing::Not(HasSubstr("within rotate_certs_ttl")));
  auto soon =
      summary(evaluateHostChecks("node-a", node, true, pki->server_cert_pem,
                                 {.certificate_warning = std::chrono::hours(24 * 365 * 50)}, now));
  EXPECT_THAT(soon, HasSubstr("within rotate_certs_ttl"));
  auto expired = summary(evaluateHostChecks("node-a", node, true, pki->server_cert_pem, {},
                                            now + std::chrono::hours(24 * 365 * 50)));
  EXPECT_THAT(expired,
              HasSubstr("FAIL apiserver-certificate: /etc/kubernetes/pki/apiserver.crt expired"));
  auto garbage =
      summary(evaluateHostChecks("node-a", node, true, std::string("not a cert"), {}, now));
  EXPECT_THAT(garbage, HasSubstr("FAIL apiserver-certificate: /etc/kubernetes/pki/apiserver.crt: "
                                 "not a PEM certificate"));
}

testing::CliRun runAgentCli(std::vector<std::string> args,
                            std::vector<std::string> environment = {}) {
  args.insert(args.begin(), "agent");
  return testing::cli(std::move(args), std::move(environment));
}

TEST(AgentCommand, ABadConfigIsAUsageErrorBeforeAnythingStarts) {
  auto r = runAgentCli({"--node-name", "node-a", "--leader-election-retry-period", "0s"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("leader_election_retry_period: must be greater than 0"));
}

TEST(AgentCommand, ABadNodeNameIsAUsageError) {
  auto r = runAgentCli({}, {"NODE_NAME=Bad_Name"});
  EXPECT_EQ(r.code, kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("node name from NODE_NAME: \"Bad_Name\""));
}

TEST(AgentCommand, NoKubeconfigAnywhereFailsWithOneLine) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ekco-agent-root-XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  auto r = runAgentCli({"--node-name", "node-a", "--host-root", tmpl});
  std::filesystem::remove_all(tmpl);
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.err, ::testing::StartsWith("error: "));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace ekco::agent
