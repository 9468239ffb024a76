// kubelet-csr-approval: the rules as a table over real requests made with OpenSSL (RSA and EC),
// the advisory's attacks (GHSA-x7j5-fww5-mqmv) among them; then the controller's decisions over
// the fake API: approval through the approval subresource, one Event per refused CSR, the fresh
// re-read, dry run, the Lease, conflicts and a storm.
#include "agent/controllers/kubelet_csr_approval.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "base/clock.h"
#include "kube/objects.h"
#include "kube/records.h"
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
                            std::vector<std::pair<std::string, std::string>> addresses) {
  kube::NodeRecord n;
  n.name = kube::Atom(name);
  for (auto& [type, address] : addresses) {
    n.addresses.push_back({.type = kube::Atom(type), .address = address});
  }
  return n;
}

// node-a and node-b as a kubeadm cluster has them.
std::vector<kube::NodeRecord> clusterNodes() {
  return {nodeRecord("node-a", {{"Hostname", "node-a"},
                                {"InternalIP", "10.0.0.1"},
                                {"ExternalIP", "203.0.113.5"},
                                {"InternalDNS", "node-a.internal"},
                                {"InternalIP", "fd00::0001"}}),
          nodeRecord("node-b", {{"Hostname", "node-b"}, {"InternalIP", "10.0.0.2"}})};
}

CsrSpec nodeA(std::string key = "RSA") {
  return {.key = std::move(key),
          .subject = {{"O", "system:nodes"}, {"CN", "system:node:node-a"}},
          .dns = {"node-a"},
          .ips = {"10.0.0.1"}};
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
       Kind::kRefuse, "addresses", "\"kubernetes.default.svc\""},
      {"the apiserver's service IP",
       request(with(nodeA(), [](CsrSpec& s) { s.ips.push_back("10.96.0.1"); })), Kind::kRefuse,
       "addresses", "\"10.96.0.1\""},
      {"another node's IP", request(with(nodeA(), [](CsrSpec& s) { s.ips = {"10.0.0.2"}; })),
       Kind::kRefuse, "addresses", "\"10.0.0.2\""},
      {"another node's hostname",
       request(with(nodeA(),
                    [](CsrSpec& s) {
                      s.dns = {"node-a", "node-b"};
                    })),
       Kind::kRefuse, "addresses", "\"node-b\""},
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
    const KubeletCsrVerdict v = decideKubeletServingCsr(c.csr, lookup);
    EXPECT_EQ(v.kind, c.want) << c.what << ": " << v.rule << ": " << v.reason;
    EXPECT_EQ(v.rule, c.rule) << c.what << ": " << v.reason;
    EXPECT_THAT(v.reason, HasSubstr(c.reason_part)) << c.what;
    EXPECT_EQ(v.reason.find('\n'), std::string::npos) << c.what;
  }
}

// The controller over FakeKube: the store is the API; the caches are the store's objects read
// directly (no list call), or a stale snapshot when a test sets one.
class KubeletCsrApprovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& n : clusterNodes()) putNode(n);
  }
  void putNode(const kube::NodeRecord& n) {
    json addresses = json::array();
    for (const auto& a : n.addresses) {
      addresses.push_back({{"type", a.type.str()}, {"address", a.address}});
    }
    kube_.put(kube::resources::kNodes,
              {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", n.name.str()}, {"uid", "node-uid-" + n.name.str()}}},
               {"status", {{"addresses", addresses}}}});
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
            .dry_run = dry_run,
            .is_leader_fresh = [this] { return leader_fresh_; },
            .record_event = [this](const kube::EventSpec& e) { ASSERT_TRUE(kube_.recordEvent(e)); },
            .count_action = [this](std::string_view) { ++actions_; }});
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
    EXPECT_THAT(r->plan, HasSubstr("csr-evil: not approved: addresses:"));
  }
  EXPECT_EQ(conditions("csr-evil"), json::array());
  EXPECT_EQ(kube_.count(Verb::kUpdate), 0);
  const auto refused = events("KubeletCSRNotApproved");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr("rule addresses: SANs not among Node \"node-a\"'s "
                                    "status.addresses: \"kubernetes.default.svc\""));
  EXPECT_EQ(kube_.events()[0].type, "Warning");
  EXPECT_EQ(kube_.events()[0].involved_uid, "uid-csr-evil");
  EXPECT_THAT(c.status()["pending"]["csr-evil"].get<std::string>(), HasSubstr("addresses"));
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
  putCsr("csr-1", nodeA());
  stale_csrs_ = csrCache().csrs;  // the cache saw the kubelet's request ...
  // ... but the API's Node lost the address since (a stale node cache shows it too).
  putNode(nodeRecord("node-a", {{"Hostname", "node-a"}}));
  auto c = KubeletCsrApprovalController(
      [] { return ObservedNodes{.synced = true, .nodes = clusterNodes()}; },
      [this] { return csrCache(); }, kube_, clock_,
      {.record_event = [this](const auto& e) { ASSERT_TRUE(kube_.recordEvent(e)); }});
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
                .error = base::Error("get: connection refused", base::ErrorCode::kUnavailable)});
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
  EXPECT_EQ(kube_.count(Verb::kGet), 2 * kGood);  // the CSR and its Node, once per approval
  EXPECT_EQ(events("KubeletCSRNotApproved").size(), 30u);
  EXPECT_EQ(events("KubeletCSRApproved").size(), static_cast<std::size_t>(kGood));
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
