// cluster-certificates against ekco-kubesim as the ekco ServiceAccount with deploy/ and
// deploy-contour/ RBAC enforced (a call the manifests do not grant fails the test), over a
// kubeadm-shaped PKI made by openssl in a temporary host root: the registry re-signed by the
// cluster CA (checked with `openssl verify`), kurl-proxy's self-signed pair, kotsadm's kubelet
// client pair following the freshest host, Contour's CA and both leaves with Envoy's rollout
// restart; custom certificates, dry run and worker hosts left alone.
#include "agent/features/certs/cluster_certs.h"

#include "agent/features/certs/certs_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "base/os/process.h"
#include "hostfs/local_host_fs.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "pki/certificate.h"
#include "pki/issue.h"
#include "pki/renew.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

json secret(const std::string& ns, const std::string& name,
            const std::vector<std::pair<std::string, std::string>>& data) {
  json d = json::object();
  for (const auto& [k, v] : data) d[k] = pki::base64Encode(v);
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"type", "Opaque"},
          {"data", d}};
}

json registryPod(const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}, {"namespace", "kurl"}, {"labels", {{"app", "registry"}}}}},
          {"spec", {{"containers", {{{"name", "registry"}, {"image", "registry:2.8"}}}}}}};
}

json envoyDaemonSet() {
  const json labels = {{"app", "envoy"}};
  return {{"apiVersion", "apps/v1"},
          {"kind", "DaemonSet"},
          {"metadata", {{"name", "envoy"}, {"namespace", "projectcontour"}}},
          {"spec",
           {{"selector", {{"matchLabels", labels}}},
            {"template",
             {{"metadata", {{"labels", labels}}},
              {"spec", {{"containers", {{{"name", "envoy"}, {"image", "envoy:1.29"}}}}}}}}}}};
}

class ClusterCertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.make(10);
    auto host = hostfs::LocalHostFs::open(host_.path(), clock_);
    ASSERT_TRUE(host) << host.error().message();
    host_fs_ = std::move(*host);
    now_ = clock_.wallNow();
    ca_cert_ = pki_.read(pki_.pki() / "ca.crt");
    ca_key_ = pki_.read(pki_.pki() / "ca.key");
  }

  // `contour`: kURL's Contour add-on is installed (its namespace, and deploy-contour/ applied,
  // which needs it); without it, only deploy/.
  void start(std::vector<json> extra, bool contour = true) {
    std::vector<json> objects = std::move(extra);
    std::vector<std::string> dirs = {"/deploy"};
    if (contour) {
      objects.push_back({{"apiVersion", "v1"},
                         {"kind", "Namespace"},
                         {"metadata", {{"name", "projectcontour"}}}});
      dirs.push_back("/deploy-contour");
    }
    ASSERT_NO_FATAL_FAILURE(sa_.start(dir_.path(), std::move(objects), dirs, clock_, "cp-1"));
    server_ = &sa_.server();
    client_ = &sa_.client();
  }
  void TearDown() override {
    // Every call the code under test made is one the manifests grant.
    sa_.expectEveryRequestAllowed();
  }

  // A leaf signed by the host's cluster CA, valid `days`.
  pki::KeyPair clusterLeaf(const std::string& cn, int days, std::vector<std::string> dns,
                           std::vector<std::string> ips) {
    auto pair = pki::issueCertificate({.common_name = cn,
                                       .dns_names = std::move(dns),
                                       .ip_addresses = std::move(ips),
                                       .server_auth = true,
                                       .now = now_ - 300 * 24h,
                                       .validity = std::chrono::hours(24) * (300 + days),
                                       .issuer_cert_pem = ca_cert_,
                                       .issuer_key_pem = ca_key_});
    EXPECT_TRUE(pair) << pair.error().message();
    return pair ? *pair : pki::KeyPair{};
  }
  pki::KeyPair selfSigned(const std::string& cn, int days, bool is_ca = false) {
    auto pair = pki::issueCertificate({.common_name = cn,
                                       .dns_names = {"kotsadm.default.svc.cluster.local"},
                                       .ip_addresses = {"10.0.0.7"},
                                       .is_ca = is_ca,
                                       .server_auth = true,
                                       .now = now_,
                                       .validity = std::chrono::hours(24) * days});
    EXPECT_TRUE(pair) << pair.error().message();
    return pair ? *pair : pki::KeyPair{};
  }

  // Every add-on present, every certificate 10 days from expiry.
  std::vector<json> everything() {
    const auto registry = clusterLeaf("registry.kurl.svc.cluster.local", 10,
                                      {"registry.kurl.svc.cluster.local"}, {"10.96.0.50"});
    const auto proxy = selfSigned("kotsadm.default.svc.cluster.local@1700000000", 10);
    const auto contour_ca = selfSigned("Project Contour", 10, true);
    const auto old_client = clusterLeaf("kube-apiserver-kubelet-client", 5, {}, {});
    return {
        secret("kurl", "registry-pki",
               {{"registry.crt", registry.cert_pem}, {"registry.key", registry.key_pem}}),
        secret("default", "kotsadm-tls", {{"tls.crt", proxy.cert_pem}, {"tls.key", proxy.key_pem}}),
        secret("default", "kubelet-client-cert",
               {{"client.crt", old_client.cert_pem}, {"client.key", old_client.key_pem}}),
        secret("projectcontour", "contourcert",
               {{"ca.crt", contour_ca.cert_pem},
                {"tls.crt", contour_ca.cert_pem},
                {"tls.key", contour_ca.key_pem}}),
        secret("projectcontour", "envoycert",
               {{"ca.crt", contour_ca.cert_pem},
                {"tls.crt", contour_ca.cert_pem},
                {"tls.key", contour_ca.key_pem}}),
        registryPod("registry-7d9f"),
        registryPod("registry-8c2a"),
        envoyDaemonSet()};
  }

  ClusterCerts controller(bool dry_run = false) {
    ClusterCertsControllerOptions o;
    o.secrets = ClusterCertsOptions{};
    o.secrets.dry_run = dry_run;
    return ClusterCerts(*client_, *host_fs_, clock_, o);
  }

  std::string data(const std::string& ns, const std::string& name, const std::string& key) {
    auto s = server_->get("secrets", ns, name);
    EXPECT_TRUE(s) << ns << "/" << name;
    if (!s) return {};
    auto decoded = kube::base64Decode((*s)["data"][key].get<std::string>());
    EXPECT_TRUE(decoded);
    return decoded ? *decoded : std::string();
  }
  bool verifies(const std::string& cert_pem, const std::string& ca_pem) {
    std::ofstream(dir_.path() + "/check.crt") << cert_pem;
    std::ofstream(dir_.path() + "/check-ca.crt") << ca_pem;
    base::BoostProcessRunner runner(clock_);
    auto r = runner.run({.argv = {"openssl", "verify", "-CAfile", dir_.path() + "/check-ca.crt",
                                  dir_.path() + "/check.crt"},
                         .timeout = std::chrono::seconds(30)});
    return r && r->exit_code == 0;
  }
  std::vector<std::string> eventsOn(const std::string& ns) {
    // As the admin (the ServiceAccount may only create Events).
    std::vector<std::string> out;
    base::BoostProcessRunner runner(clock_);
    auto r = runner.run({.argv = {"kubectl", "--kubeconfig", server_->kubeconfigPath(), "get",
                                  "events", "-n", ns, "-o", "json"},
                         .timeout = std::chrono::seconds(30)});
    EXPECT_TRUE(r && r->exit_code == 0) << (r ? r->stderr_data : r.error().message());
    if (!r || r->exit_code != 0) return out;
    const json events = json::parse(r->stdout_data);
    for (const json& e : events["items"]) {
      out.push_back(e["involvedObject"]["name"].get<std::string>() + " " +
                    e["reason"].get<std::string>());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  testing::TempDir dir_{"ekco-cluster-certs"};
  testing::TempDir host_{"ekco-cluster-certs-host"};
  testing::KubeadmPki pki_{host_.path()};
  base::SystemClock clock_;
  base::WallTime now_{};
  std::string ca_cert_;
  std::string ca_key_;
  std::unique_ptr<hostfs::LocalHostFs> host_fs_;
  testing::ServiceAccountCluster sa_;
  kubesim::Server* server_ = nullptr;
  kube::RestClient* client_ = nullptr;
};

TEST_F(ClusterCertsTest, RenewsEverySecretInsideTheTtlAndRestartsWhatReadsIt) {
  ASSERT_NO_FATAL_FAILURE(start(everything()));
  const pki::Certificate old_registry =
      *pki::parseCertificate(data("kurl", "registry-pki", "registry.crt"), "old");
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "renewed contour, envoy, registry, kurl-proxy, kotsadm-kubelet-client");

  // Registry: same names, signed by the cluster CA, valid a year from now.
  const std::string registry = data("kurl", "registry-pki", "registry.crt");
  auto cert = pki::parseCertificate(registry, "registry");
  ASSERT_TRUE(cert);
  EXPECT_EQ(cert->subject, old_registry.subject);
  EXPECT_EQ(cert->dns_names, old_registry.dns_names);
  EXPECT_EQ(cert->ip_addresses, (std::vector<std::string>{"10.96.0.50"}));
  EXPECT_GT(cert->not_after, now_ + 360 * 24h);
  EXPECT_LT(cert->not_before, now_);
  EXPECT_GT(cert->not_before, now_ - 1h);  // from now, never the CA's NotBefore
  EXPECT_TRUE(verifies(registry, ca_cert_));
  EXPECT_TRUE(pki::checkKeyMatches(registry, data("kurl", "registry-pki", "registry.key"), "r"));
  EXPECT_FALSE(server_->get("pods", "kurl", "registry-7d9f"));
  EXPECT_FALSE(server_->get("pods", "kurl", "registry-8c2a"));

  // kurl-proxy: self-signed as certutil makes it, the chain in tls.crt, the names kept.
  const std::string proxy = data("default", "kotsadm-tls", "tls.crt");
  auto proxy_cert = pki::parseCertificate(proxy, "proxy");
  ASSERT_TRUE(proxy_cert);
  EXPECT_THAT(proxy_cert->common_name, ::testing::StartsWith("kotsadm.default.svc.cluster.local@"));
  EXPECT_THAT(proxy_cert->issuer_common_name,
              ::testing::StartsWith("kotsadm.default.svc.cluster.local-ca@"));
  EXPECT_EQ(proxy_cert->ip_addresses, (std::vector<std::string>{"10.0.0.7"}));
  const std::string proxy_ca = proxy.substr(proxy.find("-----END CERTIFICATE-----") + 26);
  EXPECT_TRUE(verifies(proxy, proxy_ca));

  // kotsadm's kubelet client: the host's pair, byte for byte.
  EXPECT_EQ(data("default", "kubelet-client-cert", "client.crt"),
            pki_.read(pki_.pki() / "apiserver-kubelet-client.crt"));
  EXPECT_EQ(data("default", "kubelet-client-cert", "client.key"),
            pki_.read(pki_.pki() / "apiserver-kubelet-client.key"));

  // Contour: one new CA in both secrets, each leaf signed by it with its service names.
  const std::string contour_ca = data("projectcontour", "contourcert", "ca.crt");
  EXPECT_EQ(data("projectcontour", "envoycert", "ca.crt"), contour_ca);
  for (const char* s : {"contourcert", "envoycert"}) {
    const std::string leaf = data("projectcontour", s, "tls.crt");
    EXPECT_TRUE(verifies(leaf, contour_ca)) << s;
    EXPECT_TRUE(pki::checkKeyMatches(leaf, data("projectcontour", s, "tls.key"), s));
  }
  auto envoy = pki::parseCertificate(data("projectcontour", "envoycert", "tls.crt"), "envoy");
  ASSERT_TRUE(envoy);
  EXPECT_THAT(envoy->dns_names,
              ElementsAre("envoy", "envoy.projectcontour", "envoy.projectcontour.svc",
                          "envoy.projectcontour.svc.cluster.local"));
  auto ds = server_->get("daemonsets.apps", "projectcontour", "envoy");
  ASSERT_TRUE(ds);
  EXPECT_TRUE((*ds)["spec"]["template"]["metadata"]["annotations"].contains(
      "kubectl.kubernetes.io/restartedAt"))
      << ds->dump();

  EXPECT_THAT(eventsOn("projectcontour"),
              ElementsAre("contourcert CertificateRenewed", "envoycert CertificateRenewed"));
  EXPECT_THAT(eventsOn("kurl"), ElementsAre("registry-pki CertificateRenewed"));

  // Fresh now: the next check changes nothing.
  auto again = c.reconcile();
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(again->summary, "no cluster certificate inside rotate_certs_ttl");
  EXPECT_EQ(data("kurl", "registry-pki", "registry.crt"), registry);
}

TEST_F(ClusterCertsTest, CustomCertificatesAFresherPeerAndAbsentAddOnsAreLeftAlone) {
  const auto custom = selfSigned("ekco.example.com", 10);
  // Another control-plane node's kubelet client pair, fresher than this host's (10 days).
  const auto peer = clusterLeaf("kube-apiserver-kubelet-client", 200, {}, {});
  ASSERT_NO_FATAL_FAILURE(
      start({secret("default", "kotsadm-tls",
                    {{"tls.crt", custom.cert_pem}, {"tls.key", custom.key_pem}}),
             secret("default", "kubelet-client-cert",
                    {{"client.crt", peer.cert_pem}, {"client.key", peer.key_pem}})}));
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "no cluster certificate inside rotate_certs_ttl");
  EXPECT_EQ(data("default", "kotsadm-tls", "tls.crt"), custom.cert_pem);
  EXPECT_EQ(data("default", "kubelet-client-cert", "client.crt"), peer.cert_pem);
  const json status = c.status();
  std::map<std::string, std::string> notes;
  for (const json& s : status["secrets"]) notes[s["name"]] = s.value("note", "");
  EXPECT_EQ(notes["kurl-proxy"], "a custom certificate: reported, never replaced");
  EXPECT_EQ(notes["kotsadm-kubelet-client"],
            "another control-plane node's pair, at least as fresh as this host's");
  EXPECT_EQ(notes["registry"], "absent (the add-on is not installed)");
  EXPECT_EQ(notes["contour"], "absent (the add-on is not installed)");
}

// A cluster without kURL's Contour add-on has no projectcontour namespace, so deploy-contour/
// cannot be applied, and contour_namespace is projectcontour by default: kube-apiserver
// authorizes before it looks for the namespace, so the read of contourcert must be granted by
// deploy/ itself to be answered 404 (absent) rather than 403, which made every check that found
// a secret due a failure ("read secret projectcontour/contourcert: forbidden").
TEST_F(ClusterCertsTest, WithoutContourItsSecretsAreAbsentNotForbiddenAndTheOthersAreRenewed) {
  std::vector<json> objects;
  for (json& o : everything()) {
    if (o["metadata"].value("namespace", "") != "projectcontour") objects.push_back(std::move(o));
  }
  ASSERT_NO_FATAL_FAILURE(start(objects, /*contour=*/false));
  MetricsRegistry metrics;
  ClusterCertsControllerOptions o;
  o.node_name = "cp-1";
  o.failing = *metrics.gauge("ekco_cluster_certificate_renewal_failing", "h", {"node"});
  ClusterCerts c(*client_, *host_fs_, clock_, o);
  const std::string before = data("kurl", "registry-pki", "registry.crt");
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "renewed registry, kurl-proxy, kotsadm-kubelet-client");
  EXPECT_EQ(o.failing->value({"cp-1"}), 0);
  EXPECT_NE(data("kurl", "registry-pki", "registry.crt"), before);
  std::map<std::string, json> by_name;
  const json status = c.status();
  for (const json& s : status["secrets"]) by_name[s["name"]] = s;
  for (const char* name : {"contour", "envoy"}) {
    EXPECT_EQ(by_name[name].value("note", ""), "absent (the add-on is not installed)") << name;
    EXPECT_FALSE(by_name[name].contains("problem")) << by_name[name].dump();
  }
  // TearDown: not one request of the ServiceAccount was refused.
}

TEST_F(ClusterCertsTest, ExportsEachSecretsExpiryAndWhetherTheLastRenewalFailed) {
  // The registry's certificate is corrupt: reported, the others renewed, the run a failure.
  std::vector<json> objects = everything();
  for (json& o : objects) {
    if (o["kind"] == "Secret" && o["metadata"]["name"] == "registry-pki") {
      o["data"]["registry.crt"] = pki::base64Encode("not a certificate");
    }
  }
  ASSERT_NO_FATAL_FAILURE(start(objects));
  MetricsRegistry metrics;
  ClusterCertsControllerOptions o;
  o.node_name = "cp-1";
  o.expiry =
      *metrics.gauge("ekco_cluster_certificate_expiry_timestamp_seconds", "h", {"name", "secret"});
  o.failing = *metrics.gauge("ekco_cluster_certificate_renewal_failing", "h", {"node"});
  ClusterCerts c(*client_, *host_fs_, clock_, o);
  auto r = c.reconcile();
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("kurl/registry-pki"));
  EXPECT_EQ(o.failing->value({"cp-1"}), 1);
  // What was inspected before the renewal: each readable secret's own expiry, 10 days ahead.
  const double in_ten_days =
      std::chrono::duration_cast<seconds>((now_ + 10 * 24h).time_since_epoch()).count();
  EXPECT_NEAR(o.expiry->value({"envoy", "projectcontour/envoycert"}), in_ten_days, 3600);
  EXPECT_EQ(o.expiry->value({"registry", "kurl/registry-pki"}), 0);  // unreadable: no series
  EXPECT_THAT(metrics.render(), ::testing::Not(HasSubstr("registry-pki")));

  // The registry's secret repaired (valid for 200 days), the next check succeeds and shows
  // the renewed ones a year ahead.
  const auto fresh = clusterLeaf("docker-registry", 200, {"registry.kurl.svc"}, {});
  json repaired = *server_->get("secrets", "kurl", "registry-pki");
  repaired["data"]["registry.crt"] = pki::base64Encode(fresh.cert_pem);
  repaired["data"]["registry.key"] = pki::base64Encode(fresh.key_pem);
  ASSERT_TRUE(server_->put(repaired));
  auto again = c.reconcile();
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_EQ(o.failing->value({"cp-1"}), 0);
  EXPECT_GT(o.expiry->value({"envoy", "projectcontour/envoycert"}), in_ten_days + 300 * 86400);
  EXPECT_NEAR(o.expiry->value({"registry", "kurl/registry-pki"}), in_ten_days + 190 * 86400, 3600);
}

TEST_F(ClusterCertsTest, ADryRunChangesNothing) {
  ASSERT_NO_FATAL_FAILURE(start(everything()));
  const std::string before = data("kurl", "registry-pki", "registry.crt");
  auto c = controller(/*dry_run=*/true);
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_THAT(r->summary, HasSubstr("dry run: would renew contour, envoy, registry"));
  EXPECT_THAT(r->plan, HasSubstr("would renew the registry certificate in secret "
                                 "kurl/registry-pki and restart pods app=registry"));
  EXPECT_EQ(data("kurl", "registry-pki", "registry.crt"), before);
  EXPECT_TRUE(server_->get("pods", "kurl", "registry-7d9f"));
  for (const auto& req : server_->requestLog()) {
    EXPECT_TRUE(req.verb == "get" || req.verb == "list" || req.verb == "watch")
        << req.verb << " " << req.path;
  }
}

TEST_F(ClusterCertsTest, AWorkerHostWithoutTheClusterCaKeyDoesNothing) {
  std::filesystem::remove(pki_.pki() / "ca.key");
  ASSERT_NO_FATAL_FAILURE(start(everything()));
  auto c = controller();
  auto r = c.reconcile();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->summary, "not a control-plane node (no cluster CA key)");
  EXPECT_TRUE(server_->requestLog().empty());
}

// `ekco certs renew --cluster` and `ekco rotate-kotsadm-certs` (issue 37): the controller's
// renewal on demand, run as the CLI runs it, as the ekco ServiceAccount (deploy/'s RBAC).
class ClusterRenewCommandTest : public ClusterCertsTest {
 protected:
  testing::CliRun run(std::vector<std::string> args) {
    // No --config: the host root has no /etc/ekco/config.yaml, so the defaults.
    args.insert(args.end(),
                {"--host-root", host_.path(), "--kubeconfig", dir_.path() + "/sa.kubeconfig"});
    return testing::cli(args, {"NODE_NAME=cp-1"});
  }
};

TEST_F(ClusterRenewCommandTest, RenewsOnlyTheNamedSecretsWithEventsAndRestarts) {
  ASSERT_NO_FATAL_FAILURE(start(everything()));
  const std::string contour_before = data("projectcontour", "contourcert", "tls.crt");
  const std::string client_before = data("default", "kubelet-client-cert", "client.crt");
  const std::string proxy_before = data("default", "kotsadm-tls", "tls.crt");
  auto r = run({"certs", "renew", "--cluster", "registry", "kurl-proxy"});
  ASSERT_EQ(r.code, kExitOk) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("in secret kurl/registry-pki"));
  EXPECT_THAT(r.out, HasSubstr("in secret default/kotsadm-tls"));
  // Renewed: signed by the host's CA, a year from now; the pods reading it restarted.
  auto registry = pki::parseCertificate(data("kurl", "registry-pki", "registry.crt"), "registry");
  ASSERT_TRUE(registry);
  EXPECT_GT(registry->not_after, now_ + 300 * 24h);
  EXPECT_TRUE(verifies(data("kurl", "registry-pki", "registry.crt"), ca_cert_));
  EXPECT_FALSE(server_->get("pods", "kurl", "registry-7d9f"));
  EXPECT_NE(data("default", "kotsadm-tls", "tls.crt"), proxy_before);
  // Not named: untouched, though inside the TTL.
  EXPECT_EQ(data("projectcontour", "contourcert", "tls.crt"), contour_before);
  EXPECT_EQ(data("default", "kubelet-client-cert", "client.crt"), client_before);
  EXPECT_THAT(eventsOn("kurl"), ::testing::Contains("registry-pki CertificateRenewed"));
  EXPECT_THAT(eventsOn("default"), ::testing::Contains("kotsadm-tls CertificateRenewed"));

  // Renewed a moment ago: outside the TTL now, skipped unless forced.
  auto again = run({"certs", "renew", "--cluster", "registry"});
  EXPECT_EQ(again.code, kExitOk) << again.out << again.err;
  EXPECT_THAT(again.out, HasSubstr("registry (secret kurl/registry-pki) has "));
  EXPECT_THAT(again.out, HasSubstr("until expiration, more than 720h; skipped"));
  const std::string renewed = data("kurl", "registry-pki", "registry.crt");
  auto forced = run({"certs", "renew", "--cluster", "--force", "registry"});
  EXPECT_EQ(forced.code, kExitOk) << forced.out << forced.err;
  EXPECT_NE(data("kurl", "registry-pki", "registry.crt"), renewed);
}

TEST_F(ClusterRenewCommandTest, EveryOneDueWithoutNamesAndNothingInADryRun) {
  ASSERT_NO_FATAL_FAILURE(start(everything()));
  const std::string registry_before = data("kurl", "registry-pki", "registry.crt");
  auto dry = run({"certs", "renew", "--cluster", "--dry-run"});
  EXPECT_EQ(dry.code, kExitOk) << dry.out << dry.err;
  EXPECT_THAT(dry.out, HasSubstr("would renew the registry certificate"));
  EXPECT_THAT(dry.out, HasSubstr("Dry run: nothing was changed."));
  EXPECT_EQ(data("kurl", "registry-pki", "registry.crt"), registry_before);
  for (const auto& req : server_->requestLog()) {
    EXPECT_TRUE(req.verb == "get" || req.verb == "list") << req.verb << " " << req.path;
  }
  auto all = run({"certs", "renew", "--cluster"});
  EXPECT_EQ(all.code, kExitOk) << all.out << all.err;
  EXPECT_NE(data("kurl", "registry-pki", "registry.crt"), registry_before);
  EXPECT_THAT(all.out, HasSubstr("restarted DaemonSet projectcontour/envoy"));
  EXPECT_THAT(all.out, HasSubstr("in secret default/kubelet-client-cert"));
}

TEST_F(ClusterRenewCommandTest, RotateKotsadmCertsRenewsTheKurlProxyPairWithinItsTtl) {
  ASSERT_NO_FATAL_FAILURE(start(everything()));  // kotsadm-tls: 10 days left
  const std::string before = data("default", "kotsadm-tls", "tls.crt");
  auto later = run({"rotate-kotsadm-certs", "--ttl", "24h"});
  EXPECT_EQ(later.code, kExitOk) << later.out << later.err;
  EXPECT_THAT(later.out, HasSubstr("more than 24h; skipped"));
  EXPECT_EQ(data("default", "kotsadm-tls", "tls.crt"), before);

  auto now = run({"rotate-kotsadm-certs"});  // 4320h, EKCO's 180 days
  EXPECT_EQ(now.code, kExitOk) << now.out << now.err;
  auto cert = pki::parseCertificate(data("default", "kotsadm-tls", "tls.crt"), "kotsadm-tls");
  ASSERT_TRUE(cert);
  EXPECT_THAT(cert->common_name, ::testing::StartsWith("kotsadm.default.svc.cluster.local@"));
  EXPECT_EQ(cert->ip_addresses, std::vector<std::string>{"10.0.0.7"});
  EXPECT_GT(cert->not_after, now_ + 300 * 24h);
  EXPECT_THAT(eventsOn("default"), ::testing::Contains("kotsadm-tls CertificateRenewed"));

  EXPECT_EQ(run({"rotate-kotsadm-certs", "--ttl", "180d"}).code, kExitUsage);
  auto unknown = run({"certs", "renew", "--cluster", "kotsadm"});
  EXPECT_EQ(unknown.code, kExitUsage);
  EXPECT_THAT(unknown.err, HasSubstr("unknown cluster certificate \"kotsadm\"; known: contour, "
                                     "envoy, registry, kurl-proxy, kotsadm-kubelet-client"));
}

TEST_F(ClusterRenewCommandTest, ANamedCertificateThatCannotBeRenewedHereFails) {
  const auto custom = selfSigned("ekco.example.com", 10);
  ASSERT_NO_FATAL_FAILURE(start({secret(
      "default", "kotsadm-tls", {{"tls.crt", custom.cert_pem}, {"tls.key", custom.key_pem}})}));
  auto r = run({"rotate-kotsadm-certs"});
  EXPECT_EQ(r.code, kExitFailure) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("kurl-proxy (secret default/kotsadm-tls): a custom certificate: "
                               "reported, never replaced; left alone"));
  EXPECT_THAT(r.err, HasSubstr("error: not renewed: kurl-proxy: a custom certificate"));
  EXPECT_EQ(data("default", "kotsadm-tls", "tls.crt"), custom.cert_pem);
  auto absent = run({"certs", "renew", "--cluster", "registry"});
  EXPECT_EQ(absent.code, kExitFailure) << absent.out << absent.err;
  EXPECT_THAT(absent.err, HasSubstr("not renewed: registry: absent (the add-on is not installed)"));
}

}  // namespace
}  // namespace ekco::agent
