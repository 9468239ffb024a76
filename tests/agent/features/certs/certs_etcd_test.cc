// Renewals of the serving certificates against servers that serve them from a kubeadm-layout
// host root: a real 3-member etcd (Debian's etcd-server, mutual TLS on 127.0.0.11-13) serving
// pki/etcd/server.crt, and ekco-kubesim serving pki/apiserver.crt as kube-apiserver does (read
// again at a handshake). runCertRenewal renews under the disruption Lease, the server loads the
// new pair at its next handshake, the verification sees the new serial at the address in the
// static pod manifest, and clients with the CA still connect.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/features/certs/certs_renewal.h"
#include "base/os/process.h"
#include "hostfs/local_host_fs.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/transport/curl_transport.h"
#include "pki/probe.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/fakes/etcd_cluster.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

TEST(CertsEtcdTest, ARenewedServingCertificateIsTheOneARealEtcdPresentsAndClientsStillConnect) {
  fakes::EtcdCluster cluster({"cp-1", "cp-2", "cp-3"});
  auto started = cluster.start();
  ASSERT_TRUE(started) << started.error().message();
  const std::string root = cluster.hostRoot();
  fs::create_directories(root + "/etc/kubernetes/manifests");
  std::ofstream(root + "/etc/kubernetes/manifests/etcd.yaml")
      << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\n"
         "spec:\n  containers:\n  - name: etcd\n    image: registry.k8s.io/etcd:3.5.15-0\n"
         "    command:\n    - etcd\n    - --listen-client-urls=https://127.0.0.11:2379\n";

  testing::TempDir tmp{"ekco-certs-etcd"};
  base::SystemClock clock;
  auto server = kubesim::Server::start(
      {.out_dir = tmp.path() + "/sim",
       .objects = {
           {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kurl"}}}}}});
  ASSERT_TRUE(server) << server.error().message();
  kube::Connection conn{.server = (*server)->url(),
                        .ca_pem = (*server)->caPem(),
                        .client_cert_pem = (*server)->clientCertPem(),
                        .client_key_pem = (*server)->clientKeyPem()};
  auto transport = kube::CurlTransport::create(conn, nullptr, clock, {});
  ASSERT_TRUE(transport);
  kube::RestClient client(**transport, clock, kube::RestClientOptions{});
  auto host = hostfs::LocalHostFs::open(root, clock);
  ASSERT_TRUE(host) << host.error().message();

  auto before = pki::presentedCertificate("127.0.0.11", 2379, 5s, clock);
  ASSERT_TRUE(before) << before.error().message();

  CertRenewalOptions options;
  options.inspect.now = clock.wallNow();
  options.names = {"etcd-server"};
  options.node_name = "cp-1";
  options.verify_timeout = 30s;
  options.poll = 200ms;
  options.lease_wait = 0ms;
  std::vector<std::string> probed;
  auto report = runCertRenewal(
      options,
      {.fs = **host, .kube = client, .clock = clock, .probe = [&](const std::string& h, int port) {
         probed.push_back(h + ":" + std::to_string(port));
         return pki::presentedCertificate(h, port, 5s, clock);
       }});
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->renewed.size(), 1u);
  EXPECT_EQ(report->renewed[0].name, "etcd-server");
  EXPECT_TRUE(report->restarted.empty());  // etcd reloads its certificate at each handshake
  EXPECT_THAT(probed, ::testing::Contains("127.0.0.11:2379"));  // from the manifest

  // What every member presents now is the new certificate, not the old one.
  for (const char* ip : fakes::kEtcdIps) {
    auto after = pki::presentedCertificate(ip, 2379, 5s, clock);
    ASSERT_TRUE(after) << after.error().message();
    EXPECT_NE(after->serial, before->serial) << ip;
    EXPECT_EQ(after->serial, report->renewed[0].serial_after) << ip;
    EXPECT_EQ(after->ip_addresses, before->ip_addresses) << ip;
  }
  // etcdctl with the CA and the healthcheck client pair connects to each member.
  const std::string pki = root + "/etc/kubernetes/pki/etcd";
  base::BoostProcessRunner runner(clock);
  auto health = runner.run(
      {.argv = {"etcdctl", "--endpoints",
                "https://127.0.0.11:2379,https://127.0.0.12:2379,https://127.0.0.13:2379",
                "--cacert", pki + "/ca.crt", "--cert", pki + "/healthcheck-client.crt", "--key",
                pki + "/healthcheck-client.key", "endpoint", "health"},
       .env = {{"ETCDCTL_API", "3"}},
       .timeout = 30s});
  ASSERT_TRUE(health) << health.error().message();
  EXPECT_EQ(health->exit_code, 0) << health->stdout_data << health->stderr_data;
  // etcdctl 3.4 prints the health lines on stderr.
  const std::string said = health->stdout_data + health->stderr_data;
  for (const char* ip : fakes::kEtcdIps) {
    EXPECT_THAT(said, ::testing::HasSubstr("https://" + std::string(ip) + ":2379 is healthy"));
  }
  auto verify =
      runner.run({.argv = {"openssl", "verify", "-CAfile", pki + "/ca.crt", pki + "/server.crt"},
                  .timeout = 30s});
  ASSERT_TRUE(verify);
  EXPECT_EQ(verify->exit_code, 0) << verify->stdout_data << verify->stderr_data;
  // The Lease was taken and given back.
  auto lease = (*server)->get("leases.coordination.k8s.io", "kurl", "ekco-disruption");
  ASSERT_TRUE(lease);
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
}

TEST(CertsEtcdTest, TheApiserversRenewedServingCertificateIsServedByTheApiAtTheManifestsAddress) {
  testing::TempDir root{"ekco-certs-apiserver"};
  testing::KubeadmPki pki(root.path());
  pki.make(10);
  const std::string dir = root.path() + "/etc/kubernetes/pki";
  base::SystemClock clock;
  // The apiserver: kubesim serving the host's pair (its own CA still checks client certificates).
  auto server = kubesim::Server::start(
      {.out_dir = root.path() + "/sim",
       .objects = {{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "kurl"}}}}},
       .serving_cert_file = dir + "/apiserver.crt",
       .serving_key_file = dir + "/apiserver.key"});
  ASSERT_TRUE(server) << server.error().message();
  const int port = std::stoi((*server)->url().substr((*server)->url().rfind(':') + 1));
  fs::create_directories(root.path() + "/etc/kubernetes/manifests");
  std::ofstream(root.path() + "/etc/kubernetes/manifests/kube-apiserver.yaml")
      << "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-apiserver\n  namespace: kube-system\n"
         "spec:\n  containers:\n  - name: kube-apiserver\n    image: "
         "registry.k8s.io/kube-apiserver:v1.31.0\n"
         "    command:\n    - kube-apiserver\n    - --advertise-address=127.0.0.1\n"
         "    - --secure-port="
      << port << "\n";
  // The client trusts the host's cluster CA, as kubelet and kubectl do.
  kube::Connection conn{.server = (*server)->url(),
                        .ca_pem = pki.read(dir + "/ca.crt"),
                        .client_cert_pem = (*server)->clientCertPem(),
                        .client_key_pem = (*server)->clientKeyPem()};
  auto transport = kube::CurlTransport::create(conn, nullptr, clock, {});
  ASSERT_TRUE(transport);
  kube::RestClient client(**transport, clock, kube::RestClientOptions{});
  auto host = hostfs::LocalHostFs::open(root.path(), clock);
  ASSERT_TRUE(host) << host.error().message();

  auto before = pki::presentedCertificate("127.0.0.1", port, 5s, clock);
  ASSERT_TRUE(before) << before.error().message();
  EXPECT_EQ(before->common_name, "kube-apiserver");

  CertRenewalOptions options;
  options.inspect.now = clock.wallNow();
  options.names = {"apiserver"};
  options.node_name = "cp-1";
  options.verify_timeout = 30s;
  options.poll = 200ms;
  options.lease_wait = 0ms;
  auto report = runCertRenewal(
      options,
      {.fs = **host, .kube = client, .clock = clock, .probe = [&](const std::string& h, int p) {
         return pki::presentedCertificate(h, p, 5s, clock);
       }});
  ASSERT_TRUE(report) << report.error().message();
  ASSERT_EQ(report->renewed.size(), 1u);
  EXPECT_TRUE(report->restarted.empty());  // the apiserver reloads its serving certificate

  auto after = pki::presentedCertificate("127.0.0.1", port, 5s, clock);
  ASSERT_TRUE(after) << after.error().message();
  EXPECT_NE(after->serial, before->serial);
  EXPECT_EQ(after->serial, report->renewed[0].serial_after);
  EXPECT_EQ(after->dns_names, before->dns_names);
  EXPECT_EQ(after->ip_addresses, before->ip_addresses);
  EXPECT_GT(after->not_after, clock.wallNow() + 360 * 24h);
  // A new connection verifying against the CA still works (the Lease was given back over it).
  auto lease = client.get(kube::resources::kLeases, "kurl", "ekco-disruption");
  ASSERT_TRUE(lease) << lease.error().message();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "");
}

}  // namespace
}  // namespace ekco::agent
