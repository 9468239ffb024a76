// kubelet-csr-approval: the rules as a table over real requests made with OpenSSL (RSA and EC),
// the advisory's attacks (GHSA-x7j5-fww5-mqmv) among them, and issue 34's (a node that writes the
// API server's names and other nodes' addresses into its own status); the API server's names
// read from kubeadm's ClusterConfiguration; then the controller's decisions over the fake API:
// approval through the approval subresource, one Event per refused CSR, the fresh re-read, the
// record of approved addresses and its Events, fail-closed reads, dry run, the Lease, conflicts
// and a storm.
#include "agent/features/csr_approval/kubelet_csr_approval.h"

#include "agent/features/csr_approval/kubelet_csr_apiserver.h"
#include "agent/features/csr_approval/kubelet_csr_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "kube/decode/objects.h"
#include "kube/decode/records.h"
#include "pki/certificate.h"
#include "tests/fakes/fake_kube.h"
#include "tests/pki/csr_support.h"

namespace ekco::agent {
namespace {

using kube::testing::FakeKube;
using kube::testing::Verb;
using nlohmann::json;
using pki::testing::CsrSpec;
using pki::testing::makeCsrPem;
using ::testing::HasSubstr;
using Kind = KubeletCsrVerdict::Kind;

const kube::Resource& kCsrs = kube::resources::kCertificateSigningRequests;
const std::vector<std::string> kRsaUsages = {"digital signature", "key encipherment",
                                             "server auth"};
const std::vector<std::string> kEcUsages = {"digital signature", "server auth"};

kube::NodeRecord nodeRecord(const std::string& name,
                            std::vector<std::pair<std::string, std::string>> addresses,
                            bool control_plane = false) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  n.uid = "node-uid-" + name;
  n.control_plane = control_plane;
  for (auto& [type, address] : addresses) {
    n.addresses.push_back({.type = kube::Atom(type), .address = address});
  }
  return n;
}

// node-a (the primary) and node-b (a worker) as a kubeadm cluster has them.
std::vector<kube::NodeRecord> clusterNodes() {
  return {nodeRecord("node-a",
                     {{"Hostname", "node-a"},
                      {"InternalIP", "10.0.0.1"},
                      {"ExternalIP", "203.0.113.5"},
                      {"InternalDNS", "node-a.internal"},
                      {"InternalIP", "fd00::0001"}},
                     /*control_plane=*/true),
          nodeRecord("node-b", {{"Hostname", "node-b"}, {"InternalIP", "10.0.0.2"}})};
}

// kubeadm's ClusterConfiguration as kURL writes it for an HA cluster behind a load balancer
// (controlPlaneEndpoint), with a certSAN for the load balancer's name and the primary's address.
constexpr const char* kClusterConfiguration = R"(apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
controlPlaneEndpoint: 10.0.0.100:6443
apiServer:
  certSANs:
  - api.example.com
  - 10.0.0.1
networking:
  dnsDomain: cluster.local
  podSubnet: 10.32.0.0/20
  serviceSubnet: 10.96.0.0/12
)";

json kubernetesService(std::string ip = "10.96.0.1") {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", {{"name", "kubernetes"}, {"namespace", "default"}}},
          {"spec", {{"clusterIP", ip}, {"clusterIPs", {ip}}}}};
}

json kubeadmConfig(const std::string& cluster_configuration = kClusterConfiguration) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", "kubeadm-config"}, {"namespace", "kube-system"}}},
          {"data", {{"ClusterConfiguration", cluster_configuration}}}};
}

ApiServerNames clusterApiServer() {
  auto names = apiServerNamesFrom(kubernetesService(), kClusterConfiguration);
  EXPECT_TRUE(names) << names.error().message();
  return names.value_or(ApiServerNames{});
}

CsrSpec nodeA(std::string key = "RSA") {
  return {.key = std::move(key),
          .subject = {{"O", "system:nodes"}, {"CN", "system:node:node-a"}},
          .dns = {"node-a"},
          .ips = {"10.0.0.1"}};
}

CsrSpec with_ips(CsrSpec spec, std::vector<std::string> ips) {
  spec.ips = std::move(ips);
  return spec;
}

kube::CertificateSigningRequest request(const CsrSpec& spec,
                                        std::vector<std::string> usages = kRsaUsages,
                                        std::string user = "system:node:node-a",
                                        std::vector<std::string> groups = {
                                            "system:nodes", "system:authenticated"}) {
  return {.name = "csr-1",
          .uid = "uid-1",
          .signer_name = std::string(kKubeletServingSigner),
          .username = std::move(user),
          .groups = std::move(groups),
          .usages = std::move(usages),
          .request = makeCsrPem(spec)};
}

TEST(KubeletCsrRules, ApproveOnlyWhenEveryRuleHoldsAndRefuseTheAdvisorysAttacks) {
  const std::vector<kube::NodeRecord> nodes = clusterNodes();
  const NodeLookup lookup = [&](std::string_view name) -> const kube::NodeRecord* {
    for (const auto& n : nodes) {
      if (n.name == name) return &n;
    }
    return nullptr;
  };
  const ApiServerNames apiserver = clusterApiServer();
  const SanClaims claims = sanClaims(nodes, {});
  const KubeletCsrPolicy policy{.node = lookup, .apiserver = &apiserver, .claims = &claims};
  auto with = [](CsrSpec spec, auto&& change) {
    change(spec);
    return spec;
  };
  struct Case {
    std::string what;
    kube::CertificateSigningRequest csr;
    Kind want;
    std::string rule{};
    std::string reason_part{};
  };
  std::vector<Case> cases = {
      {"a kubelet's RSA request", request(nodeA()), Kind::kApprove},
      {"a kubelet's EC request", request(nodeA("EC"), kEcUsages), Kind::kApprove},
      {"RSA without key encipherment (kube-controller-manager's NoRSA set)",
       request(nodeA(), kEcUsages), Kind::kApprove},
      {"every address kind, IPv6 in another spelling, DNS in upper case",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.dns = {"NODE-A", "node-a.internal"};
                      s.ips = {"10.0.0.1", "203.0.113.5", "fd00::1"};
                    })),
       Kind::kApprove},
      {"only an IP SAN", request(with(nodeA(), [](CsrSpec& s) { s.dns.clear(); })), Kind::kApprove},
      // The advisory: a node asking for the apiserver's names or another node's.
      {"the apiserver's name",
       request(with(nodeA(), [](CsrSpec& s) { s.dns.push_back("kubernetes.default.svc"); })),
       Kind::kRefuse, "apiserver", "\"kubernetes.default.svc\""},
      {"the apiserver's service IP",
       request(with(nodeA(), [](CsrSpec& s) { s.ips.push_back("10.96.0.1"); })), Kind::kRefuse,
       "apiserver", "\"10.96.0.1\""},
      {"another node's IP", request(with(nodeA(), [](CsrSpec& s) { s.ips = {"10.0.0.2"}; })),
       Kind::kRefuse, "other-node", "\"10.0.0.2\""},
      {"another node's hostname",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.dns = {"node-a", "node-b"};
                    })),
       Kind::kRefuse, "other-node", "\"node-b\""},
      {"an address nobody has",
       request(with(nodeA(), [](CsrSpec& s) { s.ips.push_back("10.0.0.77"); })), Kind::kRefuse,
       "addresses", "\"10.0.0.77\""},
      {"the CN of another node",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-b"}};
                    })),
       Kind::kRefuse, "subject", "CN=system:node:node-b"},
      {"a requester outside system:nodes",
       request(nodeA(), kRsaUsages, "system:node:node-a", {"system:authenticated"}), Kind::kRefuse,
       "requester", "not in group system:nodes"},
      {"a service account as requester",
       request(nodeA(), kRsaUsages, "system:serviceaccount:default:evil",
               {"system:serviceaccounts", "system:nodes"}),
       Kind::kRefuse, "requester", "is not a node"},
      {"client usages with the kubelet-serving signer",
       request(nodeA(), {"digital signature", "key encipherment", "client auth"}), Kind::kRefuse,
       "usages", "\"client auth\""},
      {"server and client auth",
       request(nodeA(), {"digital signature", "server auth", "client auth"}), Kind::kRefuse,
       "usages"},
      {"key encipherment on an EC key", request(nodeA("EC"), kRsaUsages), Kind::kRefuse, "usages",
       "this is EC"},
      {"an extra email SAN",
       request(with(nodeA(), [](CsrSpec& s) { s.emails = {"admin@example.com"}; })), Kind::kRefuse,
       "sans", "email"},
      {"an extra URI SAN",
       request(with(nodeA(), [](CsrSpec& s) { s.uris = {"spiffe://cluster/ns/kube-system"}; })),
       Kind::kRefuse, "sans", "URI"},
      {"no SAN at all",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.dns.clear();
                      s.ips.clear();
                    })),
       Kind::kRefuse, "sans", "no DNS or IP SAN"},
      {"an unknown node",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-z"}};
                    }),
               kRsaUsages, "system:node:node-z"),
       Kind::kRefuse, "node", "\"node-z\" does not exist"},
      {"O missing",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.subject = {{"CN", "system:node:node-a"}};
                    })),
       Kind::kRefuse, "subject"},
      {"an extra OU",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.subject.push_back({"OU", "x"});
                    })),
       Kind::kRefuse, "subject"},
      {"O=system:masters",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.subject = {{"O", "system:masters"}, {"CN", "system:node:node-a"}};
                    })),
       Kind::kRefuse, "subject"},
      {"a broken signature", request(with(nodeA(), [](CsrSpec& s) { s.break_signature = true; })),
       Kind::kRefuse, "request", "signature does not verify"},
  };
  // A corrupt request, and CSRs that are not ekco's to decide.
  auto corrupt = request(nodeA());
  corrupt.request =
      "-----BEGIN CERTIFICATE REQUEST-----\nnot der\n-----END CERTIFICATE REQUEST-----";
  cases.push_back(
      {"a corrupt request", corrupt, Kind::kRefuse, "request", "not a PEM certificate request"});
  auto other_signer = request(nodeA());
  other_signer.signer_name = "kubernetes.io/kube-apiserver-client-kubelet";
  cases.push_back({"another signer", other_signer, Kind::kIgnore});
  auto approved = request(with(nodeA(), [](CsrSpec& s) { s.dns = {"kubernetes"}; }));
  approved.approved = true;
  cases.push_back(
      {"already approved (even a bad one: not ekco's to undo)", approved, Kind::kIgnore});
  auto denied = request(nodeA());
  denied.denied = true;
  cases.push_back({"already denied", denied, Kind::kIgnore});

  for (const Case& c : cases) {
    const KubeletCsrVerdict v = decideKubeletServingCsr(c.csr, policy);
    EXPECT_EQ(v.kind, c.want) << c.what << ": " << v.rule << ": " << v.reason;
    EXPECT_EQ(v.rule, c.rule) << c.what << ": " << v.reason;
    EXPECT_THAT(v.reason, HasSubstr(c.reason_part)) << c.what;
    EXPECT_EQ(v.reason.find('\n'), std::string::npos) << c.what;
  }
}

// Issue 34 item 4: node-b, with only its kubelet credentials, wrote the API server's names and
// node-a's addresses into its own status.addresses (NodeRestriction lets it) and asked for them.
// Each class of SAN is refused by the rule that names it, however the SAN is spelled.
TEST(KubeletCsrRules, ANodeCannotGetTheApiServersOrAnotherNodesNamesByWritingThemIntoItsStatus) {
  std::vector<kube::NodeRecord> nodes = clusterNodes();
  nodes[1] = nodeRecord("node-b", {{"Hostname", "node-b"},
                                   {"InternalIP", "10.0.0.2"},
                                   // what node-b added to its own status:
                                   {"Hostname", "kubernetes.default.svc"},
                                   {"InternalDNS", "kubernetes"},
                                   {"InternalDNS", "KUBERNETES.default.svc.cluster.local."},
                                   {"InternalDNS", "kubernetes.default"},
                                   {"InternalDNS", "10.96.0.1"},
                                   {"InternalDNS", "api.example.com"},
                                   {"InternalDNS", "*.default.svc"},
                                   {"InternalDNS", "node-a"},
                                   {"InternalIP", "10.96.0.1"},
                                   {"InternalIP", "::ffff:10.96.0.1"},
                                   {"InternalIP", "10.0.0.1"},
                                   {"ExternalIP", "10.0.0.100"},
                                   {"ExternalIP", "203.0.113.5"},
                                   {"InternalIP", "10.0.0.50"}});
  const NodeLookup lookup = [&](std::string_view name) -> const kube::NodeRecord* {
    for (const auto& n : nodes) {
      if (n.name == name) return &n;
    }
    return nullptr;
  };
  const ApiServerNames apiserver = clusterApiServer();
  // node-a's last approved certificate also named 10.0.0.50, an address its status lost since.
  const SanClaims claims =
      sanClaims(nodes, {{"node-a", {"10.0.0.1", "10.0.0.50", "203.0.113.5", "node-a"}}});
  const KubeletCsrPolicy policy{.node = lookup, .apiserver = &apiserver, .claims = &claims};
  auto nodeB = [](std::vector<std::string> dns, std::vector<std::string> ips) {
    dns.insert(dns.begin(), "node-b");
    ips.insert(ips.begin(), "10.0.0.2");
    return request({.key = "EC",
                    .subject = {{"O", "system:nodes"}, {"CN", "system:node:node-b"}},
                    .dns = std::move(dns),
                    .ips = std::move(ips)},
                   kEcUsages, "system:node:node-b");
  };
  struct Case {
    std::string what;
    kube::CertificateSigningRequest csr;
    std::string rule;
    std::string reason_part;
  };
  const std::vector<Case> cases = {
      {"the issue's attack", nodeB({"kubernetes.default.svc"}, {"10.96.0.1", "10.0.0.1"}),
       "apiserver", "\"kubernetes.default.svc\" (the kubernetes Service's DNS name)"},
      {"kubernetes", nodeB({"kubernetes"}, {}), "apiserver", "\"kubernetes\""},
      {"kubernetes.default", nodeB({"kubernetes.default"}, {}), "apiserver",
       "\"kubernetes.default\""},
      {"kubernetes.default.svc.<dnsDomain>, in upper case with a trailing dot",
       nodeB({"KUBERNETES.default.svc.cluster.local."}, {}), "apiserver",
       "\"KUBERNETES.default.svc.cluster.local.\" (the kubernetes Service's DNS name)"},
      {"the Service's IP", nodeB({}, {"10.96.0.1"}), "apiserver",
       "\"10.96.0.1\" (Service default/kubernetes clusterIP)"},
      {"the Service's IP as an IPv4-mapped IPv6 address", nodeB({}, {"::ffff:10.96.0.1"}),
       "apiserver", "\"::ffff:10.96.0.1\""},
      {"the Service's IP written as a DNS name", nodeB({"10.96.0.1"}, {}), "apiserver",
       "\"10.96.0.1\""},
      {"controlPlaneEndpoint's host, to a worker", nodeB({}, {"10.0.0.100"}), "apiserver",
       "\"10.0.0.100\" (kubeadm's controlPlaneEndpoint; Node \"node-b\" is not a control-plane "
       "node)"},
      {"a certSAN, to a worker", nodeB({"api.example.com"}, {}), "apiserver",
       "\"api.example.com\" (kubeadm's apiServer.certSANs;"},
      {"a wildcard", nodeB({"*.default.svc"}, {}), "sans", "\"*.default.svc\""},
      {"another node's name", nodeB({"node-a"}, {}), "other-node",
       "\"node-a\" (the name of Node \"node-a\")"},
      {"another node's address, in both statuses", nodeB({}, {"203.0.113.5"}), "other-node",
       "\"203.0.113.5\" (last approved for Node \"node-a\")"},
      {"another node's address, last approved for it but gone from its status",
       nodeB({}, {"10.0.0.50"}), "other-node", "\"10.0.0.50\" (last approved for Node \"node-a\")"},
  };
  for (const Case& c : cases) {
    const KubeletCsrVerdict v = decideKubeletServingCsr(c.csr, policy);
    EXPECT_EQ(v.kind, Kind::kRefuse) << c.what << ": " << v.reason;
    EXPECT_EQ(v.rule, c.rule) << c.what << ": " << v.reason;
    EXPECT_THAT(v.reason, HasSubstr(c.reason_part)) << c.what;
    EXPECT_EQ(v.reason.find('\n'), std::string::npos) << c.what;
  }
  // Its own names are still approved, and the verdict says what to record.
  const KubeletCsrVerdict own = decideKubeletServingCsr(nodeB({}, {}), policy);
  EXPECT_EQ(own.kind, Kind::kApprove) << own.rule << ": " << own.reason;
  EXPECT_THAT(own.sans, ::testing::ElementsAre("10.0.0.2", "node-b"));
  // node-a keeps the address node-b squats in its status: it was last approved for node-a.
  const KubeletCsrVerdict a = decideKubeletServingCsr(request(nodeA()), policy);
  EXPECT_EQ(a.kind, Kind::kApprove) << a.rule << ": " << a.reason;
  const KubeletCsrVerdict squatted =
      decideKubeletServingCsr(request(with_ips(nodeA(), {"10.0.0.1", "203.0.113.5"})), policy);
  EXPECT_EQ(squatted.kind, Kind::kApprove) << squatted.rule << ": " << squatted.reason;
  // Without that record the squatted address is approved for neither.
  const SanClaims unrecorded = sanClaims(nodes, {});
  const KubeletCsrVerdict contested =
      decideKubeletServingCsr(request(with_ips(nodeA(), {"10.0.0.1", "203.0.113.5"})),
                              {.node = lookup, .apiserver = &apiserver, .claims = &unrecorded});
  EXPECT_EQ(contested.rule, "other-node") << contested.reason;
  EXPECT_THAT(contested.reason,
              HasSubstr("\"203.0.113.5\" (in the status.addresses of Node \"node-b\")"));
}

// controlPlaneEndpoint and certSANs often name a primary's own address (a single primary, or the
// primaries listed for the load balancer): a control-plane node gets its own, never another name.
TEST(KubeletCsrRules, AControlPlaneNodeMayHaveItsOwnAddressThatKubeadmListsForTheApiServer) {
  std::vector<kube::NodeRecord> nodes = clusterNodes();
  nodes[0].addresses.push_back({.type = kube::Atom("ExternalIP"), .address = "10.0.0.100"});
  const NodeLookup lookup = [&](std::string_view name) -> const kube::NodeRecord* {
    return name == "node-a" ? &nodes[0] : name == "node-b" ? &nodes[1] : nullptr;
  };
  const ApiServerNames apiserver = clusterApiServer();
  const SanClaims claims = sanClaims(nodes, {});
  const KubeletCsrPolicy policy{.node = lookup, .apiserver = &apiserver, .claims = &claims};
  // 10.0.0.1 is a certSAN and 10.0.0.100 the controlPlaneEndpoint; both are node-a's own.
  auto own =
      decideKubeletServingCsr(request(with_ips(nodeA(), {"10.0.0.1", "10.0.0.100"})), policy);
  EXPECT_EQ(own.kind, Kind::kApprove) << own.rule << ": " << own.reason;
  // A certSAN that is not its own, and the Service's names, stay refused to a primary too.
  CsrSpec lb = nodeA();
  lb.dns.push_back("api.example.com");
  auto v = decideKubeletServingCsr(request(lb), policy);
  EXPECT_EQ(v.rule, "apiserver");
  EXPECT_THAT(v.reason, HasSubstr("\"api.example.com\" (kubeadm's apiServer.certSANs, not one of "
                                  "this control-plane Node's status.addresses)"));
  nodes[0].addresses.push_back({.type = kube::Atom("InternalDNS"), .address = "kubernetes"});
  CsrSpec svc = nodeA();
  svc.dns.push_back("kubernetes");
  EXPECT_EQ(decideKubeletServingCsr(request(svc), policy).rule, "apiserver");
}

TEST(KubeletCsrRules, NothingIsApprovedWhileTheApiServersNamesAreUnknown) {
  const std::vector<kube::NodeRecord> nodes = clusterNodes();
  const NodeLookup lookup = [&](std::string_view name) -> const kube::NodeRecord* {
    return name == "node-a" ? &nodes[0] : nullptr;
  };
  auto v = decideKubeletServingCsr(request(nodeA()), {.node = lookup});
  EXPECT_EQ(v.kind, Kind::kRefuse);
  EXPECT_EQ(v.rule, "apiserver");
  EXPECT_THAT(v.reason, HasSubstr("not known"));
}

TEST(KubeletCsrRules, WithAnAllowListEveryIpSanMustBeInsideOneOfItsPrefixes) {
  const std::vector<kube::NodeRecord> nodes = clusterNodes();
  const NodeLookup lookup = [&](std::string_view name) -> const kube::NodeRecord* {
    return name == "node-a" ? &nodes[0] : nullptr;
  };
  const ApiServerNames apiserver = clusterApiServer();
  KubeletCsrPolicy policy{.node = lookup,
                          .apiserver = &apiserver,
                          .allowed_ip_prefixes = {*base::parseIpPrefix("10.0.0.0/24")}};
  EXPECT_EQ(decideKubeletServingCsr(request(nodeA()), policy).kind, Kind::kApprove);
  auto v = decideKubeletServingCsr(
      request(with_ips(nodeA(), {"10.0.0.1", "203.0.113.5", "fd00::1"})), policy);
  EXPECT_EQ(v.rule, "ip-prefixes");
  EXPECT_THAT(v.reason, HasSubstr("IP SANs outside kubelet_csr_allowed_ip_prefixes (10.0.0.0/24): "
                                  "\"203.0.113.5\", \"fd00::1\""));
  policy.allowed_ip_prefixes.push_back(*base::parseIpPrefix("203.0.113.0/24"));
  policy.allowed_ip_prefixes.push_back(*base::parseIpPrefix("fd00::/64"));
  v = decideKubeletServingCsr(request(with_ips(nodeA(), {"10.0.0.1", "203.0.113.5", "fd00::1"})),
                              policy);
  EXPECT_EQ(v.kind, Kind::kApprove) << v.rule << ": " << v.reason;
}

TEST(KubeletCsrApiServerNames, ReadFromTheKubernetesServiceAndKubeadmsClusterConfiguration) {
  const ApiServerNames n = clusterApiServer();
  auto keys = [](const std::map<std::string, std::string>& m) {
    std::vector<std::string> out;
    for (const auto& [k, v] : m) out.push_back(k);
    return out;
  };
  EXPECT_THAT(
      keys(n.service),
      ::testing::ElementsAre("10.96.0.1", "kubernetes", "kubernetes.default",
                             "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"));
  EXPECT_THAT(keys(n.endpoint),
              ::testing::ElementsAre("10.0.0.1", "10.0.0.100", "api.example.com"));

  // Dual stack, another domain, an IPv6 endpoint; the Service's IP outside serviceSubnet too.
  auto dual = apiServerNamesFrom(kubernetesService("10.100.0.10"), R"(
kind: ClusterConfiguration
controlPlaneEndpoint: "[fd00::10]:6443"
networking:
  dnsDomain: corp.example
  serviceSubnet: "10.96.0.0/16, fd00:10:96::/112"
)");
  ASSERT_TRUE(dual) << dual.error().message();
  EXPECT_THAT(keys(dual->service),
              ::testing::ElementsAre("10.100.0.10", "10.96.0.1", "fd00:10:96::1", "kubernetes",
                                     "kubernetes.default", "kubernetes.default.svc",
                                     "kubernetes.default.svc.corp.example"));
  EXPECT_THAT(keys(dual->endpoint), ::testing::ElementsAre("fd00::10"));

  // kubeadm's defaults when networking is left out.
  auto defaults = apiServerNamesFrom(kubernetesService(), "kind: ClusterConfiguration\n");
  ASSERT_TRUE(defaults) << defaults.error().message();
  EXPECT_EQ(defaults->service.count("kubernetes.default.svc.cluster.local"), 1u);
  EXPECT_EQ(defaults->service.count("10.96.0.1"), 1u);
  EXPECT_TRUE(defaults->endpoint.empty());
}

TEST(KubeletCsrApiServerNames, WhatCannotBeReadIsAOneLineErrorNamingTheField) {
  struct Case {
    json service;
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {json::object(), "kind: ClusterConfiguration\n",
       "Service default/kubernetes has no spec.clusterIP"},
      {kubernetesService("not-an-ip"), "kind: ClusterConfiguration\n",
       "spec.clusterIPs holds \"not-an-ip\", not an IP address"},
      {kubernetesService(), "[a, b]", "ClusterConfiguration: not a mapping"},
      {kubernetesService(), "a: [", "ClusterConfiguration: not YAML"},
      {kubernetesService(), "networking: 5\n", "networking is not a mapping"},
      {kubernetesService(), "networking:\n  serviceSubnet: 10.96.0.0\n",
       "networking.serviceSubnet \"10.96.0.0\": want an IP prefix"},
      {kubernetesService(), "networking:\n  serviceSubnet: [a]\n",
       "networking.serviceSubnet is not a string"},
      {kubernetesService(), "controlPlaneEndpoint: \"bad host:6443\"\n", "controlPlaneEndpoint"},
      {kubernetesService(), "apiServer:\n  certSANs: api.example.com\n",
       "apiServer.certSANs is not a list"},
      {kubernetesService(), "apiServer:\n  certSANs: [{a: b}]\n",
       "apiServer.certSANs holds an entry that is no string"},
  };
  for (const Case& c : cases) {
    auto r = apiServerNamesFrom(c.service, c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_THAT(r.error().message(), HasSubstr(c.want)) << c.text;
    EXPECT_EQ(r.error().message().find('\n'), std::string::npos) << r.error().message();
  }
}

// The controller over FakeKube: the store is the API; the caches are the store's objects read
// directly (no list call), or a stale snapshot when a test sets one.
class KubeletCsrApprovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& n : clusterNodes()) putNode(n);
    kube_.put(kube::resources::kServices, kubernetesService());
    kube_.put(kube::resources::kConfigMaps, kubeadmConfig());
  }
  void putNode(const kube::NodeRecord& n) {
    json addresses = json::array();
    for (const auto& a : n.addresses) {
      addresses.push_back({{"type", a.type.str()}, {"address", a.address}});
    }
    json labels = json::object();
    if (n.control_plane) labels["node-role.kubernetes.io/control-plane"] = "";
    kube_.put(kube::resources::kNodes,
              {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata",
                {{"name", n.name.str()}, {"uid", "node-uid-" + n.name.str()}, {"labels", labels}}},
               {"status", {{"addresses", addresses}}}});
  }
  // The record's data (node -> "sans"), or null when it is absent.
  json recorded() const {
    auto o = kube_.object(kube::resources::kConfigMaps, "kurl", kKubeletServingAddressesConfigMap);
    return o ? (*o)["data"] : json();
  }
  std::vector<kube::EventSpec> eventsOn(const std::string& node) const {
    std::vector<kube::EventSpec> out;
    for (const auto& e : kube_.events()) {
      if (e.involved_resource.plural == "nodes" && e.involved_name == node) out.push_back(e);
    }
    return out;
  }
  void putCsr(const std::string& name, const CsrSpec& spec,
              std::vector<std::string> usages = kRsaUsages,
              std::string user = "system:node:node-a") {
    kube_.put(kCsrs, {{"apiVersion", "certificates.k8s.io/v1"},
                      {"kind", "CertificateSigningRequest"},
                      {"metadata", {{"name", name}, {"uid", "uid-" + name}}},
                      {"spec",
                       {{"signerName", kKubeletServingSigner},
                        {"username", user},
                        {"groups", {"system:nodes", "system:authenticated"}},
                        {"usages", usages},
                        {"request", pki::base64Encode(makeCsrPem(spec))}}}});
  }
  ObservedCsrs csrCache() const {
    if (stale_csrs_) return {.synced = true, .csrs = *stale_csrs_};
    ObservedCsrs out{.synced = true};
    for (const json& o : kube_.objects(kCsrs)) {
      auto csr = kube::parseCertificateSigningRequest(o);
      EXPECT_TRUE(csr) << csr.error().message();
      if (csr && csr->signer_name == kKubeletServingSigner) out.csrs.push_back(*csr);
    }
    return out;
  }
  ObservedNodes nodeCache() const {
    ObservedNodes out{.synced = true};
    for (const json& o : kube_.objects(kube::resources::kNodes)) {
      out.nodes.push_back(*kube::projectNode(o));
    }
    return out;
  }
  KubeletCsrApprovalController make(bool dry_run = false) {
    return KubeletCsrApprovalController(
        [this] { return nodeCache(); }, [this] { return csrCache(); }, kube_, clock_,
        KubeletCsrApprovalOptions{
            .effects = {.dry_run = dry_run,
                        .is_leader_fresh = [this] { return leader_fresh_; },
                        .record_event =
                            [this](const kube::EventSpec& e) { ASSERT_TRUE(kube_.recordEvent(e)); },
                        .count_action = [this](std::string_view) { ++actions_; }}});
  }
  json conditions(const std::string& name) const {
    auto o = kube_.object(kCsrs, "", name);
    if (!o) return "absent";
    return (*o).value("status", json::object()).value("conditions", json::array());
  }
  std::vector<std::string> events(const std::string& reason) const {
    std::vector<std::string> out;
    for (const auto& e : kube_.events()) {
      if (e.reason == reason) out.push_back(e.involved_name + ": " + e.message);
    }
    return out;
  }

  base::ManualClock clock_{base::WallTime(std::chrono::seconds(1'700'000'000))};
  FakeKube kube_;
  bool leader_fresh_ = true;
  int actions_ = 0;
  std::optional<std::vector<kube::CertificateSigningRequest>> stale_csrs_;
};

TEST_F(KubeletCsrApprovalTest, ApprovesAGoodCsrThroughTheApprovalSubresourceWithAnEvent) {
  putCsr("csr-good", nodeA());
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "1 kubelet serving CSRs: 1 approved, 0 left pending");
  const json conds = conditions("csr-good");
  ASSERT_EQ(conds.size(), 1u) << conds.dump();
  EXPECT_EQ(conds[0]["type"], "Approved");
  EXPECT_EQ(conds[0]["status"], "True");
  EXPECT_EQ(conds[0]["reason"], "EkcoAutoApproved");
  EXPECT_THAT(conds[0]["message"].get<std::string>(), HasSubstr("match Node node-a"));
  EXPECT_EQ(conds[0]["lastUpdateTime"], "2023-11-14T22:13:20Z");
  const auto updates = kube_.calls(Verb::kUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].subresource, "approval");
  EXPECT_EQ(updates[0].name, "csr-good");
  EXPECT_THAT(events("KubeletCSRApproved"),
              ::testing::ElementsAre(HasSubstr("csr-good: ekco approved this kubelet serving")));
  EXPECT_EQ(actions_, 1);
  const json status = c.status();
  EXPECT_EQ(status["history"].back()["decision"], "approved");
  EXPECT_TRUE(status["pending"].empty());

  // Approved: left alone from now on.
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(kube_.count(Verb::kUpdate), 1);
  EXPECT_EQ(kube_.count(Verb::kList), 0);  // the caches, never a list
}

TEST_F(KubeletCsrApprovalTest, ARefusedCsrStaysPendingWithOneEventNamingTheRuleWhateverThePasses) {
  putCsr("csr-evil", [] {
    CsrSpec s = nodeA();
    s.dns.push_back("kubernetes.default.svc");
    return s;
  }());
  auto c = make();
  for (int i = 0; i < 3; ++i) {
    auto r = c.reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_THAT(r->plan, HasSubstr("csr-evil: not approved: apiserver:"));
  }
  EXPECT_EQ(conditions("csr-evil"), json::array());
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  const auto refused = events("KubeletCSRNotApproved");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr("rule apiserver: SANs that name the API server: "
                                    "\"kubernetes.default.svc\" (the kubernetes Service's DNS "
                                    "name)"));
  EXPECT_EQ(kube_.events()[0].type, "Warning");
  EXPECT_EQ(kube_.events()[0].involved_uid, "uid-csr-evil");
  EXPECT_THAT(c.status()["pending"]["csr-evil"].get<std::string>(), HasSubstr("apiserver"));
}

TEST_F(KubeletCsrApprovalTest, ACsrForANodeNotYetSeenIsApprovedOnceTheNodeAppears) {
  CsrSpec spec = nodeA();
  spec.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-c"}};
  spec.dns = {"node-c"};
  spec.ips = {"10.0.0.3"};
  putCsr("csr-c", spec, kRsaUsages, "system:node:node-c");
  auto c = make();
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-c"), json::array());
  EXPECT_THAT(events("KubeletCSRNotApproved"),
              ::testing::ElementsAre(HasSubstr("rule node: Node \"node-c\" does not exist")));
  putNode(nodeRecord("node-c", {{"Hostname", "node-c"}, {"InternalIP", "10.0.0.3"}}));
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-c")[0]["type"], "Approved");
}

TEST_F(KubeletCsrApprovalTest, TheApiIsReadAgainBeforeApprovingAndAStaleCacheApprovesNothing) {
  putCsr("csr-1", with_ips(nodeA(), {"203.0.113.5"}));
  stale_csrs_ = csrCache().csrs;  // the cache saw the kubelet's request ...
  // ... but the API's Node lost the address since (a stale node cache shows it too).
  putNode(nodeRecord("node-a", {{"Hostname", "node-a"}, {"InternalIP", "10.0.0.1"}}, true));
  auto c = KubeletCsrApprovalController(
      [] { return ObservedNodes{.synced = true, .nodes = clusterNodes()}; },
      [this] { return csrCache(); }, kube_, clock_,
      {.effects = {.record_event = [this](const auto& e) { ASSERT_TRUE(kube_.recordEvent(e)); }}});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("csr-1: not approved (on a fresh read): addresses"));
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  EXPECT_EQ(events("KubeletCSRNotApproved").size(), 1u);

  // Approved by someone else meanwhile: left alone.
  putNode(clusterNodes()[0]);
  json o = *kube_.object(kCsrs, "", "csr-1");
  o["status"]["conditions"] = {{{"type", "Denied"}, {"status", "True"}}};
  kube_.put(kCsrs, o);
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("csr-1: already denied (on a fresh read)"));
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
}

TEST_F(KubeletCsrApprovalTest, ADryRunOrAStaleLeaseApprovesNothing) {
  putCsr("csr-1", nodeA());
  auto dry = make(/*dry_run=*/true);
  auto r = dry.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->plan, HasSubstr("csr-1: would approve (dry run)"));
  EXPECT_THAT(r->summary, HasSubstr("(dry run)"));
  EXPECT_THAT(dry.status()["pending"]["csr-1"].get<std::string>(), HasSubstr("would approve"));
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  EXPECT_TRUE(kube_.events().empty());

  leader_fresh_ = false;
  auto c = make();
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("leadership is not fresh"));
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  EXPECT_EQ(conditions("csr-1"), json::array());
}

TEST_F(KubeletCsrApprovalTest, AConflictLooksAgainInASecondAndAnOutageIsAnError) {
  putCsr("csr-1", nodeA());
  auto c = make();
  kube_.inject(
      {.verb = Verb::kUpdate,
       .error = base::Error("update: the object has been modified", base::ErrorCode::kConflict)});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->requeue_after, std::chrono::milliseconds(std::chrono::seconds(1)));
  EXPECT_EQ(conditions("csr-1"), json::array());
  kube_.inject({.verb = Verb::kGet,
                .error = base::Error("get: connection refused", base::ErrorCode::kUnavailable),
                .plural = "certificatesigningrequests"});
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("re-read CSR csr-1"));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(conditions("csr-1")[0]["type"], "Approved");
}

TEST_F(KubeletCsrApprovalTest, AStormIsWorkedOffFromTheCacheInBoundedPassesWithoutAList) {
  const int kGood = 120;
  for (int i = 0; i < kGood; ++i) putCsr(fmt::format("good-{:03}", i), nodeA("EC"), kEcUsages);
  for (int i = 0; i < 30; ++i) {
    CsrSpec evil = nodeA("EC");
    evil.ips = {"10.0.0.2"};
    putCsr(fmt::format("evil-{:03}", i), evil, kEcUsages);
  }
  auto c = make();
  int passes = 0;
  for (; passes < 10; ++passes) {
    auto r = c.reconcile();
    ASSERT_TRUE(r) << r.error().message();
    if (r->requeue_after != std::chrono::milliseconds(0)) break;
  }
  EXPECT_EQ(passes, 2);  // 50 + 50 + 20
  int approved = 0;
  for (const json& o : kube_.objects(kCsrs)) {
    const json conds = o.value("status", json::object()).value("conditions", json::array());
    const bool good = o["metadata"]["name"].get<std::string>().starts_with("good-");
    EXPECT_EQ(conds.size(), good ? 1u : 0u) << o["metadata"]["name"];
    approved += static_cast<int>(conds.size());
  }
  EXPECT_EQ(approved, kGood);
  EXPECT_EQ(kube_.count(Verb::kList), 0);
  EXPECT_EQ(kube_.count(Verb::kUpdate), kGood);
  // Per approval the CSR, its Node and the record; per pass the Service, kubeadm-config and the
  // record. The record is created once: every CSR names the same SANs.
  EXPECT_EQ(kube_.count(Verb::kGet), 3 * kGood + 3 * 3);
  EXPECT_EQ(kube_.count(Verb::kCreate), 1);
  EXPECT_EQ(events("KubeletCSRNotApproved").size(), 30u);
  EXPECT_EQ(events("KubeletCSRApproved").size(), static_cast<std::size_t>(kGood));
}

// Issue 34 item 4: the approved SANs are recorded per node where the node cannot write
// (kurl/ekco-kubelet-serving-addresses), with an Event on the Node when they change; an address
// last approved for one node is refused to another even once the first's status lost it.
TEST_F(KubeletCsrApprovalTest, RecordsEachNodesApprovedSansAndEmitsAnEventWhenTheyChange) {
  const CsrSpec a1 = with_ips(nodeA(), {"10.0.0.1", "203.0.113.5"});
  putCsr("csr-a1", a1);
  auto c = make();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(conditions("csr-a1")[0]["type"], "Approved");
  EXPECT_EQ(recorded(), json({{"node-a", "10.0.0.1,203.0.113.5,node-a"}}));
  auto on_a = eventsOn("node-a");
  ASSERT_EQ(on_a.size(), 1u);
  EXPECT_EQ(on_a[0].reason, "KubeletServingAddressesRecorded");
  EXPECT_EQ(on_a[0].type, "Normal");
  EXPECT_EQ(on_a[0].involved_uid, "node-uid-node-a");
  EXPECT_EQ(on_a[0].message,
            "ekco approves kubelet serving certificates of this node for "
            "10.0.0.1,203.0.113.5,node-a (CSR csr-a1; recorded in ConfigMap "
            "kurl/ekco-kubelet-serving-addresses)");

  // The same SANs again: no write, no Event.
  putCsr("csr-a2", a1);
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-a2")[0]["type"], "Approved");
  EXPECT_EQ(eventsOn("node-a").size(), 1u);
  EXPECT_EQ(kube_.count(Verb::kCreate), 1);
  EXPECT_EQ(kube_.count(Verb::kUpdate), 2);  // the two approvals

  // node-a's addresses change; node-b writes node-a's old external IP into its own status.
  putNode(nodeRecord("node-a", {{"Hostname", "node-a"}, {"InternalIP", "10.0.0.9"}}, true));
  putNode(nodeRecord(
      "node-b",
      {{"Hostname", "node-b"}, {"InternalIP", "10.0.0.2"}, {"ExternalIP", "203.0.113.5"}}));
  CsrSpec b = nodeA("EC");
  b.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-b"}};
  b.dns = {"node-b"};
  b.ips = {"10.0.0.2", "203.0.113.5"};
  putCsr("csr-b1", b, kEcUsages, "system:node:node-b");
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(conditions("csr-b1"), json::array());
  EXPECT_THAT(events("KubeletCSRNotApproved"),
              ::testing::ElementsAre(HasSubstr(
                  "csr-b1: ekco left this CSR pending: rule other-node: SANs of another node: "
                  "\"203.0.113.5\" (last approved for Node \"node-a\") (see "
                  "docs/features/csr-approval.md#safety-rules)")));

  // node-a renews for its new address: recorded, and a Warning Event says from what to what.
  putCsr("csr-a3", with_ips(nodeA(), {"10.0.0.9"}));
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-a3")[0]["type"], "Approved");
  EXPECT_EQ(recorded(), json({{"node-a", "10.0.0.9,node-a"}}));
  on_a = eventsOn("node-a");
  ASSERT_EQ(on_a.size(), 2u);
  EXPECT_EQ(on_a[1].reason, "KubeletServingAddressesChanged");
  EXPECT_EQ(on_a[1].type, "Warning");
  EXPECT_EQ(on_a[1].message,
            "the SANs ekco approves for this node's kubelet serving certificate changed from "
            "10.0.0.1,203.0.113.5,node-a to 10.0.0.9,node-a (CSR csr-a3; recorded in ConfigMap "
            "kurl/ekco-kubelet-serving-addresses)");
  // No node holds 203.0.113.5 any more: node-b's pending request for it is approved.
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-b1")[0]["type"], "Approved");
  EXPECT_EQ(recorded(),
            json({{"node-a", "10.0.0.9,node-a"}, {"node-b", "10.0.0.2,203.0.113.5,node-b"}}));
}

TEST_F(KubeletCsrApprovalTest, ARecordEntryOfADeletedNodeIsIgnoredAndDroppedAtTheNextWrite) {
  kube_.put(kube::resources::kConfigMaps,
            {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", kKubeletServingAddressesConfigMap}, {"namespace", "kurl"}}},
             {"data", {{"node-gone", "10.0.0.1,node-gone"}}}});
  putCsr("csr-a", nodeA());
  auto c = make();
  ASSERT_TRUE(c.reconcile());
  EXPECT_EQ(conditions("csr-a")[0]["type"], "Approved");
  EXPECT_EQ(recorded(), json({{"node-a", "10.0.0.1,node-a"}}));
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);  // the existing ConfigMap, updated
}

// Fail closed: without the API server's names (or the record) nothing is approved, and the
// pass's error says why.
TEST_F(KubeletCsrApprovalTest, NothingIsApprovedWhenTheApiServersNamesOrTheRecordCannotBeRead) {
  putCsr("csr-1", nodeA());
  auto c = make();
  kube_.erase(kube::resources::kConfigMaps, "kube-system", "kubeadm-config");
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(),
              HasSubstr("no kubelet serving CSR approved: the API server's names are not known: "
                        "read ConfigMap kube-system/kubeadm-config"));
  json no_key = kubeadmConfig();
  no_key["data"] = {{"ClusterStatus", "apiEndpoints: {}"}};
  kube_.put(kube::resources::kConfigMaps, no_key);
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("has no data.ClusterConfiguration"));
  kube_.put(kube::resources::kConfigMaps, kubeadmConfig("networking: [broken]\n"));
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("networking is not a mapping"));
  kube_.put(kube::resources::kConfigMaps, kubeadmConfig());
  kube_.inject({.verb = Verb::kGet,
                .error = base::Error("get services/kubernetes: forbidden",
                                     base::ErrorCode::kPermissionDenied),
                .plural = "services"});
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("read Service default/kubernetes: get services"));
  // The record's read fails (the third GET of the pass).
  kube_.afterNext(Verb::kGet, [this] {
    kube_.afterNext(Verb::kGet, [this] {
      kube_.inject({.verb = Verb::kGet,
                    .error = base::Error("get configmaps: connection refused",
                                         base::ErrorCode::kUnavailable)});
    });
  });
  r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(),
              HasSubstr("no kubelet serving CSR approved: the record of approved addresses is not "
                        "known"));
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  EXPECT_EQ(kube_.count(Verb::kCreate), 0);
  EXPECT_EQ(conditions("csr-1"), json::array());
  // Readable again: approved.
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(conditions("csr-1")[0]["type"], "Approved");
}

TEST_F(KubeletCsrApprovalTest, ADryRunRecordsNothingAndNoPendingCsrReadsNothing) {
  auto idle = make();
  auto r = idle.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "0 kubelet serving CSRs: none pending");
  EXPECT_EQ(kube_.callCount(), 0);
  putCsr("csr-1", nodeA());
  auto dry = make(/*dry_run=*/true);
  ASSERT_TRUE(dry.reconcile());
  EXPECT_TRUE(recorded().is_null());
  EXPECT_TRUE(eventsOn("node-a").empty());
}

TEST_F(KubeletCsrApprovalTest, NothingIsDecidedBeforeBothCachesHaveListed) {
  putCsr("csr-1", nodeA());
  auto c = KubeletCsrApprovalController([] { return ObservedNodes{}; },
                                        [this] { return csrCache(); }, kube_, clock_, {});
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "waiting for the CSR and node caches");
  EXPECT_EQ(kube_.callCount(), 0);
}

}  // namespace
}  // namespace ekco::agent
