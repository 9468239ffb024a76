// agent/features/certs/certs_renewal.h on a kubeadm-shaped PKI (openssl) with static pod manifests,
// the API played by ekco-kubesim and kubelet by a thread that turns each manifest change into a
// Ready mirror pod carrying its annotations (as kubelet does), unless told to hold one back.
#include "agent/features/certs/certs_renewal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "agent/policy/disruption_lease.h"
#include "hostfs/local_host_fs.h"
#include "kube/decode/timestamp.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "kube/transport/kubeconfig.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/agent/sa_client.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::Contains;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

using testing::kEkcoServiceAccount;

constexpr const char* kComponents[] = {"kube-apiserver", "kube-controller-manager",
                                       "kube-scheduler", "etcd"};

std::string manifest(const std::string& component) {
  std::string flags;
  if (component == "kube-apiserver") {
    flags = "    - --advertise-address=127.0.0.1\n    - --secure-port=6443\n";
  } else if (component == "etcd") {
    flags = "    - --listen-client-urls=http://127.0.0.1:2381,https://127.0.0.1:2379\n";
  }
  return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + component +
         "\n  namespace: kube-system\n  labels:\n    component: " + component +
         "\nspec:\n  containers:\n  - name: " + component + "\n    image: registry.k8s.io/" +
         component + ":v1.30.0\n    command:\n    - " + component + "\n" + flags +
         "  hostNetwork: true\n";
}

json mirrorPod(const std::string& component, const json& annotations, bool ready) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"name", component + "-cp-1"}, {"namespace", "kube-system"}, {"annotations", annotations}}},
      {"spec",
       {{"nodeName", "cp-1"},
        {"containers", {{{"name", component}, {"image", "registry.k8s.io/x"}}}}}},
      {"status",
       {{"phase", "Running"},
        {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

class CertsRenewalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_.make(10);
    fs::create_directories(pki_.k8s() / "manifests");
    for (const char* c : kComponents) {
      std::ofstream(pki_.k8s() / "manifests" / (std::string(c) + ".yaml")) << manifest(c);
    }
    std::vector<json> objects = {
        {{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", "cp-1"}}},
         {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}}};
    for (const char* c : kComponents) objects.push_back(mirrorPod(c, json::object(), true));
    if (as_service_account_) {
      // deploy/ as a user applies it (its namespace kurl included), and the DaemonSet's token.
      ASSERT_NO_FATAL_FAILURE(
          testing::startAsEkco({.dir = tmp_.path(), .objects = std::move(objects)}, server_));
    } else {
      objects.push_back(
          {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kurl"}}}});
      auto server =
          kubesim::Server::start({.out_dir = tmp_.path() + "/sim", .objects = std::move(objects)});
      ASSERT_TRUE(server) << server.error().message();
      server_ = std::move(*server);
    }
    kube::Connection conn{.server = server_->url(),
                          .ca_pem = server_->caPem(),
                          .client_cert_pem = server_->clientCertPem(),
                          .client_key_pem = server_->clientKeyPem()};
    auto transport = kube::CurlTransport::create(conn, nullptr, clock_, {});
    ASSERT_TRUE(transport);
    transport_ = std::move(*transport);
    client_ = std::make_unique<kube::RestClient>(*transport_, clock_, kube::RestClientOptions{});
    if (as_service_account_) {
      // The renewal's client, as the agent in the DaemonSet builds it from its token.
      const std::string kubeconfig = tmp_.path() + "/sa.kubeconfig";
      auto process_fs = hostfs::LocalHostFs::open("/", clock_);
      ASSERT_TRUE(process_fs) << process_fs.error().message();
      process_fs_ = std::move(*process_fs);
      auto sa_conn = kube::loadKubeconfig(*process_fs_, kubeconfig);
      ASSERT_TRUE(sa_conn) << sa_conn.error().message();
      auto sa_transport = kube::CurlTransport::create(*sa_conn, process_fs_.get(), clock_, {});
      ASSERT_TRUE(sa_transport) << sa_transport.error().message();
      sa_transport_ = std::move(*sa_transport);
      sa_client_ =
          std::make_unique<kube::RestClient>(*sa_transport_, clock_, kube::RestClientOptions{});
    }
    auto opened = hostfs::LocalHostFs::open(tmp_.path(), clock_);
    ASSERT_TRUE(opened);
    fs_ = std::move(*opened);
    kubelet_ = std::jthread([this](std::stop_token stop) { kubelet(stop); });

    options_.inspect.now = clock_.wallNow();
    options_.node_name = "cp-1";
    options_.verify_timeout = 10s;
    options_.poll = 50ms;
    options_.lease_wait = 0ms;
  }
  void TearDown() override {
    kubelet_.request_stop();
    if (kubelet_.joinable()) kubelet_.join();
  }

  // kubelet: a changed manifest becomes a new mirror pod with its annotations, Ready unless the
  // component is held back.
  void kubelet(const std::stop_token& stop) {
    std::map<std::string, std::string> seen;
    while (!stop.stop_requested()) {
      for (const char* c : kComponents) {
        const std::string text = pki_.read(pki_.k8s() / "manifests" / (std::string(c) + ".yaml"));
        if (seen[c] == text) continue;
        seen[c] = text;
        json annotations = json::object();
        try {
          YAML::Node pod = YAML::Load(text);
          if (pod["metadata"]["annotations"]) {
            for (const auto& kv : pod["metadata"]["annotations"]) {
              annotations[kv.first.as<std::string>()] = kv.second.as<std::string>();
            }
          }
        } catch (const YAML::Exception&) {
          continue;
        }
        bool ready = true;
        {
          std::lock_guard lock(mu_);
          ready = !held_.contains(c);
        }
        (void)server_->put(mirrorPod(c, annotations, ready));
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  // The probe: what a server reloading its certificate from disk would present.
  CertRenewalDeps deps() {
    return {.fs = *fs_,
            .kube = sa_client_ ? *sa_client_ : *client_,
            .clock = clock_,
            .probe = [this](const std::string& host, int port) -> base::Result<pki::Certificate> {
              ++probes_;
              EXPECT_EQ(host, "127.0.0.1");
              const fs::path file =
                  port == 6443 ? pki_.pki() / "apiserver.crt" : pki_.pki() / "etcd/server.crt";
              EXPECT_TRUE(port == 6443 || port == 2379) << port;
              return pki::parseCertificate(pki_.read(file), file.string());
            }};
  }
  std::vector<json> events() {
    auto list = client_->list(kube::resources::kEvents, "default");
    EXPECT_TRUE(list) << list.error().message();
    std::vector<json> out;
    if (list) {
      for (const json& e : (*list)["items"]) out.push_back(e);
    }
    return out;
  }
  std::string annotationOf(const std::string& component) {
    YAML::Node pod = YAML::Load(pki_.read(pki_.k8s() / "manifests" / (component + ".yaml")));
    auto a = pod["metadata"]["annotations"][std::string(kCertsRenewedAnnotation)];
    return a ? a.as<std::string>() : "";
  }

  testing::TempDir tmp_{"ekco-certs-renewal"};
  testing::KubeadmPki pki_{tmp_.path()};
  base::SystemClock clock_;
  std::unique_ptr<kubesim::Server> server_;
  std::unique_ptr<kube::CurlTransport> transport_;
  std::unique_ptr<kube::RestClient> client_;  // the cluster admin (the test's own reads)
  bool as_service_account_ = false;           // set by CertsRenewalAsEkcoTest
  std::unique_ptr<hostfs::LocalHostFs> process_fs_;
  std::unique_ptr<kube::CurlTransport> sa_transport_;
  std::unique_ptr<kube::RestClient> sa_client_;  // kurl/ekco: the renewal's client when set
  std::unique_ptr<hostfs::LocalHostFs> fs_;
  std::jthread kubelet_;
  std::mutex mu_;
  std::set<std::string> held_;
  std::atomic<int> probes_{0};
  CertRenewalOptions options_;
};

TEST_F(CertsRenewalTest, RenewsWhatIsDueRestartsEkcosMappingAndVerifies) {
  auto report = runCertRenewal(options_, deps());
  ASSERT_TRUE(report) << report.error().message();
  std::vector<std::string> names;
  for (const auto& r : report->renewed) names.push_back(r.name);
  EXPECT_EQ(names.size(), 10u);  // all but the missing super-admin.conf
  EXPECT_THAT(report->lines, Contains(HasSubstr("missing certificate super-admin.conf")));
  EXPECT_EQ(report->restarted, (std::vector<std::string>{
                                   "kube-apiserver", "kube-controller-manager", "kube-scheduler"}));
  EXPECT_FALSE(annotationOf("kube-apiserver").empty());
  EXPECT_EQ(annotationOf("etcd"), "");  // etcd reloads its certificates itself
  EXPECT_GE(probes_.load(), 2);         // the apiserver's and etcd's served certificates
  EXPECT_THAT(report->lines.back(), HasSubstr("verified"));
  // The manifest kept what it had.
  EXPECT_THAT(pki_.read(pki_.k8s() / "manifests/kube-apiserver.yaml"),
              HasSubstr("--advertise-address=127.0.0.1"));
  // The Lease was taken and given back; one Event per certificate on the Node.
  auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-disruption");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
  int renewed_events = 0;
  for (const json& e : events()) {
    if (e.value("reason", "") == "CertificateRenewed") ++renewed_events;
  }
  EXPECT_EQ(renewed_events, 10);

  // Nothing is due any more.
  options_.inspect.now = clock_.wallNow();
  auto again = runCertRenewal(options_, deps());
  ASSERT_TRUE(again) << again.error().message();
  EXPECT_TRUE(again->renewed.empty());
}

// `ekco regen-cert`: apiserver re-issued with a name added and one dropped, its expiry kept,
// under the Lease, the apiserver restarted and the served certificate verified, and an Event.
TEST_F(CertsRenewalTest, AReissueChangesTheApiserversNamesKeepsItsExpiryAndIsVerified) {
  const std::string before_text = pki_.read(pki_.pki() / "apiserver.crt");
  const auto before = pki::parseCertificate(before_text, "before");
  ASSERT_TRUE(before);
  options_.names = {"apiserver"};
  options_.force = true;
  options_.alt_names = AltNameChange{.add = {"localhost", "10.0.0.9"}, .drop = {"kubernetes"}};
  options_.dry_run = true;
  auto plan = runCertRenewal(options_, deps());
  ASSERT_TRUE(plan) << plan.error().message();
  EXPECT_THAT(plan->lines,
              Contains("would re-issue apiserver with the names cp-1, kubernetes.default, "
                       "localhost, 10.96.0.1, 127.0.0.1, 10.0.0.9 (now cp-1, kubernetes, "
                       "kubernetes.default, 10.96.0.1, 127.0.0.1), keeping its expiry " +
                       kube::formatRfc3339(before->not_after)));
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.crt"), before_text);  // the dry run wrote nothing
  options_.dry_run = false;
  auto report = runCertRenewal(options_, deps());
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->renewed.size(), 1U);
  // kube-apiserver reloads its serving certificate itself (EKCO's mapping restarts nothing
  // for it); what it serves is checked.
  EXPECT_TRUE(report->restarted.empty());
  EXPECT_GE(probes_.load(), 1);
  EXPECT_THAT(report->lines.back(), HasSubstr("verified"));
  const auto after = pki::parseCertificate(pki_.read(pki_.pki() / "apiserver.crt"), "after");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->dns_names,
            (std::vector<std::string>{"cp-1", "kubernetes.default", "localhost"}));
  EXPECT_EQ(after->ip_addresses, (std::vector<std::string>{"10.96.0.1", "127.0.0.1", "10.0.0.9"}));
  EXPECT_EQ(after->not_after, before->not_after);
  EXPECT_EQ(after->subject, before->subject);
  // openssl: the chain, and the name the new address is reached by.
  auto verified = pki_.openssl(
      {"verify", "-CAfile", "ca.crt", "-verify_hostname", "localhost", "apiserver.crt"},
      pki_.pki());
  EXPECT_THAT(verified.stdout_data, HasSubstr("OK"));
  bool reissued_event = false;
  for (const json& e : events()) {
    reissued_event =
        reissued_event || (e.value("reason", "") == "CertificateReissued" &&
                           e.value("message", "").find("localhost") != std::string::npos);
  }
  EXPECT_TRUE(reissued_event);
}

TEST_F(CertsRenewalTest, AFailedVerificationRestoresThePreviousCertificates) {
  {
    std::lock_guard lock(mu_);
    held_.insert("kube-scheduler");
  }
  const std::string scheduler_before = pki_.read(pki_.k8s() / "scheduler.conf");
  const std::string front_proxy_before = pki_.read(pki_.pki() / "front-proxy-client.crt");
  options_.verify_timeout = 1s;
  options_.names = {"scheduler.conf", "front-proxy-client"};
  auto report = runCertRenewal(options_, deps());
  ASSERT_FALSE(report);
  EXPECT_THAT(report.error().message(),
              HasSubstr("mirror pod kube-system/kube-scheduler-cp-1 is not yet Ready"));
  EXPECT_THAT(report.error().message(),
              HasSubstr("the previous certificates were restored from their backups"));
  EXPECT_EQ(pki_.read(pki_.k8s() / "scheduler.conf"), scheduler_before);
  EXPECT_EQ(pki_.read(pki_.pki() / "front-proxy-client.crt"), front_proxy_before);
  bool warned = false;
  for (const json& e : events()) {
    warned |= e.value("reason", "") == "CertificateRenewalFailed";
  }
  EXPECT_TRUE(warned);
  // The Lease is given back even so.
  auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-disruption");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
}

TEST_F(CertsRenewalTest, AnotherPrimaryHoldingTheLeaseStopsItBeforeAnythingChanges) {
  DisruptionLease other(*client_, clock_, {.ns = "kurl", .holder = "cp-2/certificates"});
  ASSERT_TRUE(other.acquire());
  const std::string before = pki_.read(pki_.pki() / "apiserver.crt");
  auto report = runCertRenewal(options_, deps());
  ASSERT_FALSE(report);
  EXPECT_THAT(report.error().message(),
              HasSubstr("not renewed: another control-plane disruption is in progress: "
                        "cp-2/certificates holds lease kurl/ekco-disruption until"));
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.crt"), before);
  EXPECT_FALSE(fs::exists(pki_.pki() / ".ekco-backup"));
  // Released, the next run goes ahead.
  ASSERT_TRUE(other.release());
  auto next = runCertRenewal(options_, deps());
  ASSERT_TRUE(next) << next.error().message();
  EXPECT_EQ(next->renewed.size(), 10u);
}

TEST_F(CertsRenewalTest, AStopWhileWaitingForTheLeaseEndsTheRunBeforeAnythingChanges) {
  DisruptionLease other(*client_, clock_, {.ns = "kurl", .holder = "cp-2/certificates"});
  ASSERT_TRUE(other.acquire());
  const std::string before = pki_.read(pki_.pki() / "apiserver.crt");
  options_.lease_wait = std::chrono::hours(1);
  int waits = 0;
  CertRenewalDeps d = deps();
  d.wait = [&waits](std::chrono::milliseconds) {
    ++waits;
    return false;  // the agent is stopping
  };
  auto report = runCertRenewal(options_, d);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error().code(), base::ErrorCode::kCancelled);
  EXPECT_THAT(report.error().message(),
              HasSubstr("stopped while waiting for the disruption lease (another control-plane "
                        "disruption is in progress: cp-2/certificates holds"));
  EXPECT_EQ(waits, 1);
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.crt"), before);
  EXPECT_FALSE(fs::exists(pki_.pki() / ".ekco-backup"));
}

TEST_F(CertsRenewalTest, DryRunAndUnknownNames) {
  options_.dry_run = true;
  options_.names = {"apiserver-kubelet-client"};
  auto dry = runCertRenewal(options_, deps());
  ASSERT_TRUE(dry) << dry.error().message();
  EXPECT_EQ(dry->lines, (std::vector<std::string>{"would renew apiserver-kubelet-client",
                                                  "would restart static pod kube-apiserver"}));
  EXPECT_FALSE(fs::exists(pki_.pki() / ".ekco-backup"));

  options_.names = {"apiserver.crt"};
  auto unknown = runCertRenewal(options_, deps());
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message(),
              HasSubstr("unknown certificate \"apiserver.crt\"; known: admin.conf, apiserver, "));
  EXPECT_EQ(unknown.error().code(), base::ErrorCode::kInvalidArgument);
}

// Issue 34, item 7: a dry run only says what the repair of an interrupted renewal would do (it
// wrote), and a certificate that is named or due but cannot be renewed is reported, so that
// `ekco certs renew` exits non-zero naming it.
TEST_F(CertsRenewalTest, ADryRunWritesNoRepairAndWhatCouldNotBeRenewedIsReported) {
  // Interrupted between the key and the certificate: the new key beside the old certificate.
  InspectOptions inspect = options_.inspect;
  const std::vector<CertSpec> specs =
      kubeadmCertificates(inspect.certificates_dir, inspect.kubernetes_dir);
  const auto spec = std::find_if(specs.begin(), specs.end(),
                                 [](const CertSpec& c) { return c.name == "apiserver"; });
  ASSERT_NE(spec, specs.end());
  const std::string old_cert = pki_.read(pki_.pki() / "apiserver.crt");
  const std::string old_key = pki_.read(pki_.pki() / "apiserver.key");
  auto renewed = renewOne(*fs_, *spec, inspect);
  ASSERT_TRUE(renewed) << renewed.error().message();
  const std::string new_key = pki_.read(pki_.pki() / "apiserver.key");
  std::ofstream(pki_.pki() / "apiserver.crt") << old_cert;
  std::ofstream(tmp_.path() + renewed->backup_dir + "/pending.apiserver") << "apiserver\n";

  options_.dry_run = true;
  options_.names = {"front-proxy-client"};
  auto dry = runCertRenewal(options_, deps());
  ASSERT_TRUE(dry) << dry.error().message();
  EXPECT_THAT(dry->lines, Contains(HasSubstr("would restore apiserver from its backup")));
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.key"), new_key);  // nothing written
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.crt"), old_cert);

  // The real run repairs first (the old pair back), then renews what was named.
  options_.dry_run = false;
  auto real = runCertRenewal(options_, deps());
  ASSERT_TRUE(real) << real.error().message();
  EXPECT_THAT(real->lines, Contains(HasSubstr("restored apiserver from its backup")));
  EXPECT_TRUE(real->not_renewed.empty());
  EXPECT_EQ(pki_.read(pki_.pki() / "apiserver.key"), old_key);

  // A corrupt certificate inside the TTL is not renewed and is reported.
  std::ofstream(pki_.pki() / "front-proxy-client.crt") << "-----BEGIN CERTIFICATE-----\nbad\n";
  options_.names = {};
  options_.inspect.now = clock_.wallNow();
  auto corrupt = runCertRenewal(options_, deps());
  ASSERT_TRUE(corrupt) << corrupt.error().message();
  ASSERT_EQ(corrupt->not_renewed.size(), 1u);
  EXPECT_THAT(corrupt->not_renewed[0], ::testing::StartsWith("front-proxy-client: "));
}

// The renewal as the control-plane DaemonSet runs it: its client is the ServiceAccount
// kurl/ekco's token, against kubesim enforcing deploy/'s RBAC. The verification reads each
// restarted component's mirror pod (a GET of kube-system/<component>-<node>): before that read
// was granted, every renewal in the DaemonSet was "not verified" (403), restored from its
// backups and tried again later, restarting the control plane twice each time.
class CertsRenewalAsEkcoTest : public CertsRenewalTest {
 protected:
  CertsRenewalAsEkcoTest() { as_service_account_ = true; }
};

TEST_F(CertsRenewalAsEkcoTest, TheDaemonSetsAccountVerifiesTheRestartedMirrorPods) {
  options_.verify_timeout = 5s;
  options_.names = {"scheduler.conf", "front-proxy-client", "apiserver"};
  const std::string apiserver_before = pki_.read(pki_.pki() / "apiserver.crt");
  auto report = runCertRenewal(options_, deps());
  ASSERT_TRUE(report) << report.error().message();
  EXPECT_EQ(report->renewed.size(), 3u);
  EXPECT_EQ(report->restarted, (std::vector<std::string>{"kube-apiserver", "kube-scheduler"}));
  EXPECT_THAT(report->lines.back(), HasSubstr("verified"));
  EXPECT_NE(pki_.read(pki_.pki() / "apiserver.crt"), apiserver_before);  // not restored
  for (const json& e : events()) {
    EXPECT_NE(e.value("reason", ""), "CertificateRenewalFailed") << e.dump();
  }
  auto lease = server_->get("leases.coordination.k8s.io", "kurl", "ekco-disruption");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
  // Every call the run made as kurl/ekco was allowed, the mirror pods' reads among them.
  int pod_reads = 0;
  for (const auto& r : server_->requestLog()) {
    if (r.user != kEkcoServiceAccount) continue;
    EXPECT_TRUE(r.allowed) << r.verb << " " << r.resource << " " << r.ns << "/" << r.name << ": "
                           << r.code;
    if (r.verb == "get" && r.resource == "pods" && r.ns == "kube-system") ++pod_reads;
  }
  EXPECT_GE(pod_reads, 2);
}

TEST(CertsRenewalEndpoints, ComeFromTheManifestsOrTheDefaults) {
  auto api = apiserverEndpoint(manifest("kube-apiserver"));
  EXPECT_EQ(api.host, "127.0.0.1");
  EXPECT_EQ(api.port, 6443);
  auto etcd = etcdEndpoint(
      "spec:\n  containers:\n  - command:\n    - etcd\n    - "
      "--listen-client-urls=https://[::1]:2391,https://10.0.0.1:2379\n");
  EXPECT_EQ(etcd.host, "::1");
  EXPECT_EQ(etcd.port, 2391);
  auto fallback = etcdEndpoint("not: [a manifest");
  EXPECT_EQ(fallback.host, "127.0.0.1");
  EXPECT_EQ(fallback.port, 2379);
  auto bad = annotateManifest("- a list", "k", "v", "/etc/kubernetes/manifests/x.yaml");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "/etc/kubernetes/manifests/x.yaml: not a static pod manifest (no metadata and spec)");
}

}  // namespace
}  // namespace ekco::agent
