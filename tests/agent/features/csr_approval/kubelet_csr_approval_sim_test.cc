// kubelet-csr-approval, one run against ekco-kubesim: the leader's real caches (an informer over
// spec.signerName=kubernetes.io/kubelet-serving and the node informer) and the controller as the
// ekco ServiceAccount with deploy/ RBAC enforced, CSRs created through the API by a fake kubelet
// (system:node:node-a in system:nodes) and by an impostor (a service account that may create
// CSRs: the advisory's attacker).
//
// The approval itself needs kube-apiserver's `certificatesigningrequests/approval` subresource.
// Where this kubesim does not serve it (discovery says so), the test that approves is skipped
// with that reason; everything that leaves CSRs pending runs regardless.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agent/features/csr_approval/kubelet_csr_approval.h"
#include "agent/runtime/watches.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "pki/certificate.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/process_support.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"
#include "tests/pki/csr_support.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using pki::testing::CsrSpec;
using pki::testing::makeCsrPem;
using std::chrono::seconds;
using ::testing::HasSubstr;

using testing::kEkcoServiceAccount;
using testing::kEkcoToken;
constexpr const char* kKubeletToken = "kubelet-node-a-token";
constexpr const char* kKubeletBToken = "kubelet-node-b-token";
constexpr const char* kEvilToken = "evil-token";
constexpr const char* kEvil = "system:serviceaccount:default:evil";
const kube::Resource& kCsrs = kube::resources::kCertificateSigningRequests;

json nodeA() {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", "node-a"}, {"labels", {{"kubernetes.io/hostname", "node-a"}}}}},
          {"status",
           {{"addresses",
             {{{"type", "Hostname"}, {"address", "node-a"}},
              {{"type", "InternalIP"}, {"address", "10.0.0.1"}}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json nodeB() {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata", {{"name", "node-b"}, {"labels", {{"kubernetes.io/hostname", "node-b"}}}}},
          {"status",
           {{"addresses",
             {{{"type", "Hostname"}, {"address", "node-b"}},
              {{"type", "InternalIP"}, {"address", "10.0.0.2"}}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// What kubeadm leaves in a cluster: the kubernetes Service on the first IP of serviceSubnet and
// kube-system/kubeadm-config.
std::vector<json> kubeadmObjects() {
  return {{{"apiVersion", "v1"},
           {"kind", "Service"},
           {"metadata", {{"name", "kubernetes"}, {"namespace", "default"}}},
           {"spec",
            {{"clusterIP", "10.96.0.1"},
             {"ports", {{{"name", "https"}, {"port", 443}, {"targetPort", 6443}}}}}}},
          {{"apiVersion", "v1"},
           {"kind", "ConfigMap"},
           {"metadata", {{"name", "kubeadm-config"}, {"namespace", "kube-system"}}},
           {"data",
            {{"ClusterConfiguration",
              "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n"
              "controlPlaneEndpoint: 10.0.0.100:6443\nnetworking:\n  dnsDomain: cluster.local\n"
              "  serviceSubnet: 10.96.0.0/12\n"}}}}};
}

// Who may create CSRs: nodes (kube-apiserver's system:node role grants it) and, for the
// advisory's attack, one service account. Nodes may also update their Node's status (the Node
// authorizer and NodeRestriction limit that to a node's own Node; this RBAC stands in for them).
std::vector<json> csrCreators() {
  return {
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "ClusterRole"},
       {"metadata", {{"name", "node-status"}}},
       {"rules",
        {{{"apiGroups", {""}},
          {"resources", {"nodes/status"}},
          {"verbs", {"get", "patch", "update"}}}}}},
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "ClusterRoleBinding"},
       {"metadata", {{"name", "node-status"}}},
       {"roleRef",
        {{"apiGroup", "rbac.authorization.k8s.io"},
         {"kind", "ClusterRole"},
         {"name", "node-status"}}},
       {"subjects",
        {{{"kind", "Group"},
          {"apiGroup", "rbac.authorization.k8s.io"},
          {"name", "system:nodes"}}}}},
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "ClusterRole"},
       {"metadata", {{"name", "csr-creator"}}},
       {"rules",
        {{{"apiGroups", {"certificates.k8s.io"}},
          {"resources", {"certificatesigningrequests"}},
          {"verbs", {"create", "get", "list", "watch"}}}}}},
      {{"apiVersion", "rbac.authorization.k8s.io/v1"},
       {"kind", "ClusterRoleBinding"},
       {"metadata", {{"name", "csr-creator"}}},
       {"roleRef",
        {{"apiGroup", "rbac.authorization.k8s.io"},
         {"kind", "ClusterRole"},
         {"name", "csr-creator"}}},
       {"subjects",
        {{{"kind", "Group"}, {"apiGroup", "rbac.authorization.k8s.io"}, {"name", "system:nodes"}},
         {{"kind", "ServiceAccount"}, {"name", "evil"}, {"namespace", "default"}}}}}};
}

// A CSR as its creator sends it. spec.username/groups are what kube-apiserver sets from the
// caller (a kubesim that does not set them stores these, which name the same caller).
json csrObject(const std::string& name, const CsrSpec& spec, const std::string& user,
               std::vector<std::string> groups,
               std::string signer = "kubernetes.io/kubelet-serving",
               std::vector<std::string> usages = {"digital signature", "key encipherment",
                                                  "server auth"}) {
  return {{"apiVersion", "certificates.k8s.io/v1"},
          {"kind", "CertificateSigningRequest"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"signerName", signer},
            {"request", pki::base64Encode(makeCsrPem(spec))},
            {"usages", usages},
            {"username", user},
            {"groups", groups}}}};
}

CsrSpec forNodeA(std::vector<std::string> dns = {"node-a"}) {
  return {.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-a"}},
          .dns = std::move(dns),
          .ips = {"10.0.0.1"}};
}

class KubeletCsrApprovalSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<json> objects = {nodeA(), nodeB()};
    for (json& o : kubeadmObjects()) objects.push_back(std::move(o));
    for (json& o : csrCreators()) objects.push_back(std::move(o));
    // A kubelet's client CSR (another signer: never looked at). It also makes a kubesim that
    // knows CSRs only as stored objects serve the resource.
    objects.push_back(csrObject(
        "client-node-a", {.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-a"}}},
        "system:node:node-a", {"system:nodes"}, "kubernetes.io/kube-apiserver-client-kubelet",
        {"digital signature", "client auth"}));
    ASSERT_NO_FATAL_FAILURE(testing::startAsEkco(
        {.dir = dir_.path(),
         .objects = std::move(objects),
         .more_tokens = {{.token = kKubeletToken,
                          .user = "system:node:node-a",
                          .groups = {"system:nodes", "system:authenticated"}},
                         {.token = kKubeletBToken,
                          .user = "system:node:node-b",
                          .groups = {"system:nodes", "system:authenticated"}},
                         {.token = kEvilToken,
                          .user = kEvil,
                          .groups = {"system:serviceaccounts", "system:authenticated"}}}},
        server_));
    auto process_fs = hostfs::LocalHostFs::open("/", clock_);
    ASSERT_TRUE(process_fs) << process_fs.error().message();
    process_fs_ = std::move(*process_fs);
    ekco_ = client(kEkcoToken);
    kubelet_ = client(kKubeletToken);
    kubelet_b_ = client(kKubeletBToken);
    evil_ = client(kEvilToken);
    admin_ = client("");
    ASSERT_TRUE(ekco_ && kubelet_ && kubelet_b_ && evil_ && admin_);
    // The leader's watches, as the runtime builds them from the spec's declarations.
    watches_ = std::make_unique<WatchRegistry>(*ekco_->rest, clock_, config_, "node-a");
    auto csrs = watches_->require<InformerWatch<kube::CertificateSigningRequest>>(
        kubeletServingCsrsWatch());
    auto nodes = observeClusterNodes(*watches_);
    ASSERT_TRUE(csrs && nodes);
    csr_watch_ = std::move(*csrs);
    nodes_ = std::move(*nodes);
    watches_->start();
    watches_->setLeading(true);
    ASSERT_TRUE(
        testing::eventually([&] { return csrs_().synced && nodes_().synced; }, seconds(10)));
  }
  void TearDown() override {
    if (watches_) watches_->stop();
    watches_.reset();
    if (server_) {
      for (const auto& r : server_->requestLog()) {
        if (r.user != kEkcoServiceAccount) continue;
        EXPECT_TRUE(r.allowed) << "forbidden: " << r.verb << " " << r.resource << "/"
                               << r.subresource << " " << r.name;
      }
    }
    ekco_.reset();
    kubelet_.reset();
    kubelet_b_.reset();
    evil_.reset();
    admin_.reset();
    server_.reset();
  }

  struct Client {
    std::unique_ptr<kube::CurlTransport> transport;
    std::unique_ptr<kube::RestClient> rest;
  };
  // token "": the server's admin kubeconfig (client certificate).
  std::unique_ptr<Client> client(const std::string& token) {
    std::string path = server_->kubeconfigPath();
    if (!token.empty()) {
      path = dir_.path() + "/" + token + ".kubeconfig";
      if (!server_->writeTokenKubeconfig(path, token)) return nullptr;
    }
    auto conn = kube::loadKubeconfig(*process_fs_, path);
    if (!conn) return nullptr;
    auto transport = kube::CurlTransport::create(*conn, process_fs_.get(), clock_,
                                                 {.connect_timeout = seconds(5)});
    if (!transport) return nullptr;
    auto c = std::make_unique<Client>();
    c->transport = std::move(*transport);
    c->rest = std::make_unique<kube::RestClient>(
        *c->transport, clock_,
        kube::RestClientOptions{.request_timeout = seconds(10),
                                .retry = {.max_attempts = 1},
                                .sleep = [](std::chrono::milliseconds) {},
                                .random = [] { return 0.0; },
                                .reporting_instance = "node-a"});
    return c;
  }

  KubeletCsrApprovalController controller() {
    return KubeletCsrApprovalController(
        nodes_, [this] { return csrs_(); }, *ekco_->rest, clock_,
        KubeletCsrApprovalOptions{.effects = {.is_leader_fresh = [] { return true; },
                                              .record_event =
                                                  [this](const kube::EventSpec& e) {
                                                    ASSERT_TRUE(ekco_->rest->recordEvent(e));
                                                  }}});
  }
  void create(Client& as, const json& csr) {
    auto created = as.rest->create(kCsrs, "", csr);
    ASSERT_TRUE(created) << created.error().message();
  }
  bool cached(std::size_t n) {
    return testing::eventually([&] { return csrs_().csrs.size() == n; }, seconds(10));
  }
  // The Events on one object ("reason: message"), read by the admin.
  std::vector<std::string> eventsOn(const std::string& csr) {
    std::vector<std::string> out;
    auto list = admin_->rest->list(kube::resources::kEvents, "default");
    EXPECT_TRUE(list) << list.error().message();
    if (!list) return out;
    for (const json& e : (*list)["items"]) {
      if (e["involvedObject"].value("name", "") == csr) {
        out.push_back(e.value("reason", "") + ": " + e.value("message", ""));
      }
    }
    return out;
  }
  json conditions(const std::string& name) const {
    auto o = server_->get("certificatesigningrequests.certificates.k8s.io", "", name);
    if (!o) return "absent";
    return (*o).value("status", json::object()).value("conditions", json::array());
  }
  bool servesApproval() {
    auto r =
        server_->store().findResource("certificates.k8s.io", "v1", "certificatesigningrequests");
    return r && r->hasSubresource("approval");
  }
  int csrLists() const {
    int n = 0;
    for (const auto& r : server_->requestLog()) {
      n += r.user == kEkcoServiceAccount && r.resource == "certificatesigningrequests" &&
                   r.verb == "list"
               ? 1
               : 0;
    }
    return n;
  }

  testing::TempDir dir_{"ekco-csr"};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<Client> ekco_, kubelet_, kubelet_b_, evil_, admin_;
  Config config_;
  std::unique_ptr<WatchRegistry> watches_;
  std::shared_ptr<InformerWatch<kube::CertificateSigningRequest>> csr_watch_;
  std::function<ObservedNodes()> nodes_;
  ObservedCsrs csrs_() const {
    auto seen = csr_watch_->observe();
    return {.synced = seen.synced, .csrs = std::move(seen.items)};
  }
};

// The advisory's attacks through the API: an impostor's CSR for node-a's name, and node-a's own
// kubelet asking for the apiserver's name, stay pending with one Event each however many passes
// run; a storm of such CSRs is read from the watch, never re-listed.
TEST_F(KubeletCsrApprovalSimTest, AttacksStayPendingWithOneEventEachAndAStormIsNotReListed) {
  create(*evil_, csrObject("impostor", forNodeA(), kEvil,
                           {"system:serviceaccounts", "system:authenticated"}));
  create(*kubelet_, csrObject("apiserver-name", forNodeA({"node-a", "kubernetes.default.svc"}),
                              "system:node:node-a", {"system:nodes", "system:authenticated"}));
  for (int i = 0; i < 40; ++i) {
    create(*evil_, csrObject(fmt::format("storm-{:02}", i), forNodeA(), kEvil,
                             {"system:serviceaccounts", "system:authenticated"}));
  }
  ASSERT_TRUE(cached(42)) << csrs_().csrs.size();
  auto c = controller();
  for (int pass = 0; pass < 3; ++pass) {
    auto r = c.reconcile();
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->summary, "42 kubelet serving CSRs: 0 approved, 42 left pending");
  }
  EXPECT_EQ(conditions("impostor"), json::array());
  EXPECT_EQ(conditions("apiserver-name"), json::array());
  EXPECT_THAT(eventsOn("impostor"),
              ::testing::ElementsAre(HasSubstr("KubeletCSRNotApproved: ekco left this CSR "
                                               "pending: rule requester: the requester "
                                               "\"system:serviceaccount:default:evil\"")));
  EXPECT_THAT(eventsOn("apiserver-name"),
              ::testing::ElementsAre(HasSubstr("rule apiserver: SANs that name the API server: "
                                               "\"kubernetes.default.svc\"")));
  EXPECT_EQ(eventsOn("storm-39").size(), 1u);
  EXPECT_TRUE(eventsOn("client-node-a").empty());  // another signer: not looked at
  EXPECT_EQ(csrLists(), 1);  // the informer's one list; everything since came by the watch
}

// Issue 34 item 4, the attack as it was made: node-b, with only its own kubelet credentials,
// adds kubernetes.default.svc, 10.96.0.1 and node-a's IP to its Node's status.addresses and
// asks for a serving certificate for them. It stays pending; node-b's own request is approved
// and its SANs recorded in kurl/ekco-kubelet-serving-addresses, with an Event on the Node.
TEST_F(KubeletCsrApprovalSimTest, ANodeThatWritesTheApiServersNamesIntoItsStatusGetsNoCertificate) {
  auto patched =
      kubelet_b_->rest->patch(kube::resources::kNodes, "", "node-b", kube::PatchType::kMerge,
                              {{"status",
                                {{"addresses",
                                  {{{"type", "Hostname"}, {"address", "node-b"}},
                                   {{"type", "InternalIP"}, {"address", "10.0.0.2"}},
                                   {{"type", "InternalDNS"}, {"address", "kubernetes.default.svc"}},
                                   {{"type", "InternalIP"}, {"address", "10.96.0.1"}},
                                   {{"type", "InternalIP"}, {"address", "10.0.0.1"}}}}}}},
                              "status");
  ASSERT_TRUE(patched) << patched.error().message();
  ASSERT_TRUE(testing::eventually(
      [&] {
        for (const auto& n : nodes_().nodes) {
          if (n.name == "node-b") return n.addresses.size() == 5;
        }
        return false;
      },
      seconds(10)));
  const CsrSpec attack{.subject = {{"O", "system:nodes"}, {"CN", "system:node:node-b"}},
                       .dns = {"node-b", "kubernetes.default.svc"},
                       .ips = {"10.0.0.2", "10.96.0.1", "10.0.0.1"}};
  create(*kubelet_b_, csrObject("node-b-attack", attack, "system:node:node-b",
                                {"system:nodes", "system:authenticated"}));
  // Each class alone as well: the Service's IP, node-a's IP.
  create(*kubelet_b_,
         csrObject("node-b-service-ip",
                   {.subject = attack.subject, .dns = {"node-b"}, .ips = {"10.0.0.2", "10.96.0.1"}},
                   "system:node:node-b", {"system:nodes", "system:authenticated"}));
  create(*kubelet_b_,
         csrObject("node-b-node-a-ip",
                   {.subject = attack.subject, .dns = {"node-b"}, .ips = {"10.0.0.2", "10.0.0.1"}},
                   "system:node:node-b", {"system:nodes", "system:authenticated"}));
  ASSERT_TRUE(cached(3));
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "3 kubelet serving CSRs: 0 approved, 3 left pending");
  for (const char* name : {"node-b-attack", "node-b-service-ip", "node-b-node-a-ip"}) {
    EXPECT_EQ(conditions(name), json::array()) << name;
  }
  EXPECT_THAT(eventsOn("node-b-attack"),
              ::testing::ElementsAre(HasSubstr(
                  "rule apiserver: SANs that name the API server: \"kubernetes.default.svc\" (the "
                  "kubernetes Service's DNS name), \"10.96.0.1\" (Service default/kubernetes "
                  "clusterIP)")));
  EXPECT_THAT(eventsOn("node-b-service-ip"),
              ::testing::ElementsAre(HasSubstr("rule apiserver: SANs that name the API server: "
                                               "\"10.96.0.1\"")));
  EXPECT_THAT(eventsOn("node-b-node-a-ip"),
              ::testing::ElementsAre(HasSubstr(
                  "rule other-node: SANs of another node: \"10.0.0.1\" (in the status.addresses "
                  "of Node \"node-a\")")));
  EXPECT_THAT(c.status()["pending"]["node-b-attack"].get<std::string>(),
              HasSubstr("apiserver: SANs that name the API server"));

  if (!servesApproval()) return;  // the rest approves
  create(*kubelet_b_, csrObject("node-b-own",
                                {.subject = attack.subject, .dns = {"node-b"}, .ips = {"10.0.0.2"}},
                                "system:node:node-b", {"system:nodes", "system:authenticated"}));
  ASSERT_TRUE(cached(4));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "4 kubelet serving CSRs: 1 approved, 3 left pending");
  EXPECT_EQ(conditions("node-b-own")[0]["type"], "Approved");
  auto record = server_->get("configmaps", "kurl", "ekco-kubelet-serving-addresses");
  ASSERT_TRUE(record);
  EXPECT_EQ((*record)["data"], json({{"node-b", "10.0.0.2,node-b"}}));
  EXPECT_THAT(eventsOn("node-b"),
              ::testing::ElementsAre(HasSubstr("KubeletServingAddressesRecorded: ekco approves "
                                               "kubelet serving certificates of this node for "
                                               "10.0.0.2,node-b")));
}

// A fake kubelet's CSR, approved through certificatesigningrequests/NAME/approval.
TEST_F(KubeletCsrApprovalSimTest, AKubeletsCsrIsApprovedThroughTheApprovalSubresource) {
  if (!servesApproval()) {
    GTEST_SKIP() << "this ekco-kubesim does not serve certificatesigningrequests/approval "
                    "(kube-apiserver's CSR approval subresource)";
  }
  create(*kubelet_, csrObject("kubelet-serving-node-a", forNodeA(), "system:node:node-a",
                              {"system:nodes", "system:authenticated"}));
  create(*evil_, csrObject("impostor", forNodeA(), kEvil,
                           {"system:serviceaccounts", "system:authenticated"}));
  ASSERT_TRUE(cached(2));
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "2 kubelet serving CSRs: 1 approved, 1 left pending");
  const json approved = conditions("kubelet-serving-node-a");
  ASSERT_TRUE(approved.is_array() && !approved.empty()) << approved.dump();
  EXPECT_EQ(approved[0]["type"], "Approved");
  EXPECT_EQ(approved[0]["reason"], "EkcoAutoApproved");
  EXPECT_THAT(eventsOn("kubelet-serving-node-a"),
              ::testing::ElementsAre(HasSubstr("KubeletCSRApproved: ekco approved")));
  EXPECT_EQ(conditions("impostor"), json::array());
  bool put_approval = false;
  for (const auto& rec : server_->requestLog()) {
    put_approval = put_approval || (rec.user == kEkcoServiceAccount && rec.verb == "update" &&
                                    rec.subresource == "approval" && rec.allowed);
  }
  EXPECT_TRUE(put_approval);
  // The cache sees the approval; the next pass leaves the CSR alone.
  ASSERT_TRUE(testing::eventually(
      [&] {
        for (const auto& csr : csrs_().csrs) {
          if (csr.name == "kubelet-serving-node-a") return csr.approved;
        }
        return false;
      },
      seconds(10)));
  r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "2 kubelet serving CSRs: 0 approved, 1 left pending");
}

}  // namespace
}  // namespace ekco::agent
