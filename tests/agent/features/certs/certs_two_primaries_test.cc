// Two control-plane nodes whose certificates are due at the same moment renew one after the
// other, never both at once: each run takes the `ekco-disruption` Lease (in ekco-kubesim) before
// it restarts its kube-apiserver and gives it back only once the restarted apiserver is Ready.
//
// Each node is a kubeadm-shaped host root made by openssl, with its own kube-apiserver static
// pod manifest. A small kubelet per node (this test's; kubesim simulates no static pods) watches
// that manifest as kubelet does: when the renewal's annotation changes it "restarts" the pod,
// notes who holds the Lease at that moment, and after a while posts the mirror pod Ready with
// the new annotation, which is what the renewal waits for before it releases the Lease.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "agent/features/certs/certs_renewal.h"
#include "agent/policy/disruption_lease.h"
#include "base/clock.h"
#include "hostfs/local_host_fs.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "pki/certificate.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr std::string_view kManifest =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\n  namespace: kube-system\n"
    "spec:\n  containers:\n  - name: kube-apiserver\n    image: "
    "registry.k8s.io/kube-apiserver:v1.31.0\n    command:\n    - kube-apiserver\n";

json mirrorPod(const std::string& node, const std::string& stamp) {
  json annotations = json::object();
  if (!stamp.empty()) annotations[std::string(kCertsRenewedAnnotation)] = stamp;
  json pod = kubesim::runningPodObject("kube-system", "kube-apiserver-" + node, node,
                                       {{"component", "kube-apiserver"}}, annotations);
  pod["status"]["conditions"] = {{{"type", "Ready"}, {"status", "True"}}};
  return pod;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// What one node's kubelet saw when it restarted its apiserver.
struct Restart {
  std::string node;
  std::string lease_holder;  // at the moment of the restart
  base::MonoTime restarted{};
  base::MonoTime ready{};
};

class Kubelet {
 public:
  Kubelet(kubesim::Server& server, std::string node, std::filesystem::path manifest, std::mutex& mu,
          std::vector<Restart>& restarts)
      : server_(server),
        node_(std::move(node)),
        manifest_(std::move(manifest)),
        mu_(mu),
        restarts_(restarts),
        thread_([this] { run(); }) {}
  ~Kubelet() {
    stop_ = true;
    thread_.join();
  }

 private:
  void run() {
    const std::regex annotation(std::string(kCertsRenewedAnnotation) + R"re(:\s*"?([^"\n]+)"?)re");
    std::string seen;
    base::SystemClock clock;
    while (!stop_) {
      std::smatch m;
      const std::string text = readFile(manifest_);
      if (std::regex_search(text, m, annotation) && m[1].str() != seen) {
        seen = m[1].str();
        Restart r{.node = node_, .lease_holder = "", .restarted = clock.monoNow(), .ready = {}};
        if (auto lease = server_.get("leases.coordination.k8s.io", "kurl", kDisruptionLeaseName)) {
          r.lease_holder = (*lease)["spec"].value("holderIdentity", "");
        }
        // The pod is replaced: not Ready for a while, then Ready with the new annotation.
        json pod = mirrorPod(node_, seen);
        pod["status"]["conditions"][0]["status"] = "False";
        EXPECT_TRUE(server_.put(pod));
        std::this_thread::sleep_for(600ms);
        EXPECT_TRUE(server_.put(mirrorPod(node_, seen)));
        r.ready = clock.monoNow();
        std::lock_guard lock(mu_);
        restarts_.push_back(r);
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  kubesim::Server& server_;
  std::string node_;
  std::filesystem::path manifest_;
  std::mutex& mu_;
  std::vector<Restart>& restarts_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(CertsTwoPrimariesTest, RenewOneAfterTheOtherUnderTheDisruptionLease) {
  testing::TempDir tmp{"ekco-certs-two"};
  base::SystemClock clock;
  auto server = kubesim::Server::start(
      {.out_dir = tmp.path() + "/sim",
       .objects = {kubesim::namespaceObject("kurl"), kubesim::namespaceObject("kube-system"),
                   mirrorPod("cp-1", ""), mirrorPod("cp-2", "")}});
  ASSERT_TRUE(server) << server.error().message();

  const std::vector<std::string> nodes = {"cp-1", "cp-2"};
  std::vector<std::unique_ptr<testing::KubeadmPki>> pkis;
  std::vector<std::unique_ptr<hostfs::LocalHostFs>> hosts;
  std::vector<std::unique_ptr<kube::CurlTransport>> transports;
  std::vector<std::unique_ptr<kube::RestClient>> clients;
  std::mutex mu;
  std::vector<Restart> restarts;
  std::vector<std::unique_ptr<Kubelet>> kubelets;
  for (const std::string& node : nodes) {
    const std::filesystem::path root = tmp.path() + "/" + node;
    pkis.push_back(std::make_unique<testing::KubeadmPki>(root));
    pkis.back()->make(10);
    std::filesystem::create_directories(root / "etc/kubernetes/manifests");
    std::ofstream(root / "etc/kubernetes/manifests/kube-apiserver.yaml") << kManifest;
    auto host = hostfs::LocalHostFs::open(root.string(), clock);
    ASSERT_TRUE(host) << host.error().message();
    hosts.push_back(std::move(*host));
    kube::Connection conn{.server = (*server)->url(),
                          .ca_pem = (*server)->caPem(),
                          .client_cert_pem = (*server)->clientCertPem(),
                          .client_key_pem = (*server)->clientKeyPem()};
    auto transport = kube::CurlTransport::create(conn, nullptr, clock, {});
    ASSERT_TRUE(transport) << transport.error().message();
    transports.push_back(std::move(*transport));
    clients.push_back(
        std::make_unique<kube::RestClient>(*transports.back(), clock, kube::RestClientOptions{}));
    kubelets.push_back(std::make_unique<Kubelet>(
        **server, node, root / "etc/kubernetes/manifests/kube-apiserver.yaml", mu, restarts));
  }

  // Both nodes find the same certificate due and start renewing at the same moment.
  std::vector<base::Result<CertRenewalReport>> reports(nodes.size(), base::Error("not run"));
  std::vector<std::string> serials_before;
  for (const auto& pki : pkis) {
    auto cert = pki::parseCertificate(pki->read(pki->pki() / "apiserver-kubelet-client.crt"), "c");
    ASSERT_TRUE(cert);
    serials_before.push_back(cert->serial);
  }
  std::atomic<int> ready{0};
  std::vector<std::thread> runs;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    runs.emplace_back([&, i] {
      CertRenewalOptions options;
      options.inspect.now = clock.wallNow();
      options.names = {"apiserver-kubelet-client"};
      options.node_name = nodes[i];
      options.lease_wait = 60s;
      options.verify_timeout = 30s;
      options.poll = 100ms;
      ++ready;
      while (ready < static_cast<int>(nodes.size())) std::this_thread::yield();
      reports[i] = runCertRenewal(
          options, {.fs = *hosts[i],
                    .kube = *clients[i],
                    .clock = clock,
                    .probe = [&](const std::string& h, int p) -> base::Result<pki::Certificate> {
                      return base::Error("no TLS server to probe: " + h + ":" + std::to_string(p));
                    }});
    });
  }
  for (auto& t : runs) t.join();
  kubelets.clear();  // stop watching

  for (std::size_t i = 0; i < nodes.size(); ++i) {
    ASSERT_TRUE(reports[i]) << nodes[i] << ": " << reports[i].error().message();
    ASSERT_EQ(reports[i]->renewed.size(), 1u) << nodes[i];
    EXPECT_EQ(reports[i]->restarted, (std::vector<std::string>{"kube-apiserver"})) << nodes[i];
    auto cert = pki::parseCertificate(
        pkis[i]->read(pkis[i]->pki() / "apiserver-kubelet-client.crt"), nodes[i]);
    ASSERT_TRUE(cert);
    EXPECT_NE(cert->serial, serials_before[i]) << nodes[i];
    EXPECT_GT(cert->not_after, clock.wallNow() + 360 * 24h) << nodes[i];
  }
  // Each apiserver was restarted once, by the node holding the Lease at that moment, and the
  // second restart came only after the first apiserver was Ready again.
  ASSERT_EQ(restarts.size(), 2u);
  EXPECT_NE(restarts[0].node, restarts[1].node);
  for (const Restart& r : restarts) {
    EXPECT_EQ(r.lease_holder, r.node + "/certificates") << r.node;
  }
  EXPECT_GE(restarts[1].restarted, restarts[0].ready);
  // And the Lease was given back.
  auto lease = (*server)->get("leases.coordination.k8s.io", "kurl", kDisruptionLeaseName);
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"].value("holderIdentity", "x"), "");
}

}  // namespace
}  // namespace ekco::agent
