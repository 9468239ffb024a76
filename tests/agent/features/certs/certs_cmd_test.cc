// `ekco certs check` on a kubeadm-shaped PKI made by openssl, its dates checked against
// `openssl x509 -enddate` for every file.
#include "agent/features/certs/certs_cmd.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "pki/certificate.h"
#include "pki/issue.h"
#include "pki/renew.h"
#include "tests/agent/cli_support.h"
#include "tests/agent/features/certs/kubeadm_pki.h"
#include "tests/kubesim/server/server.h"

namespace ekco::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// "notAfter=Nov 26 01:02:03 2026 GMT" -> "Nov 26, 2026 01:02 UTC" (kubeadm's layout).
std::string kubeadmDate(const std::string& enddate) {
  std::istringstream in(enddate.substr(enddate.find('=') + 1));
  std::string month, day, time, year;
  in >> month >> day >> time >> year;
  if (day.size() == 1) day = "0" + day;
  return month + " " + day + ", " + year + " " + time.substr(0, 5) + " UTC";
}

class CertsCmdTest : public ::testing::Test {
 protected:
  void SetUp() override { pki_.make(10); }
  testing::CliRun check(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"certs",     "check",        "--host-root",
                                     tmp_.path(), "--kubeconfig", tmp_.path() + "/no-kubeconfig"};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::cli(args);
  }
  std::string row(const std::string& out, const std::string& name) {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with(name + " ")) return line;
    }
    return "";
  }
  testing::TempDir tmp_{"ekco-certs-cmd"};
  testing::KubeadmPki pki_{tmp_.path()};
};

TEST_F(CertsCmdTest, TablesLikeKubeadmWithTheDatesOpensslReads) {
  auto r = check();
  EXPECT_EQ(r.code, kExitFailure) << r.err;  // every leaf is within the default 30 days
  EXPECT_THAT(r.out, HasSubstr("CERTIFICATE "));
  EXPECT_THAT(r.out, HasSubstr("EXPIRES"));
  EXPECT_THAT(r.out, HasSubstr("RESIDUAL TIME"));
  EXPECT_THAT(r.out, HasSubstr("CERTIFICATE AUTHORITY"));
  EXPECT_THAT(r.out, HasSubstr("EXTERNALLY MANAGED"));
  const std::vector<std::pair<std::string, std::string>> files = {
      {"apiserver", "apiserver.crt"},
      {"apiserver-etcd-client", "apiserver-etcd-client.crt"},
      {"apiserver-kubelet-client", "apiserver-kubelet-client.crt"},
      {"etcd-healthcheck-client", "etcd/healthcheck-client.crt"},
      {"etcd-peer", "etcd/peer.crt"},
      {"etcd-server", "etcd/server.crt"},
      {"front-proxy-client", "front-proxy-client.crt"},
      {"ca", "ca.crt"},
      {"etcd-ca", "etcd/ca.crt"},
      {"front-proxy-ca", "front-proxy-ca.crt"}};
  for (const auto& [name, file] : files) {
    SCOPED_TRACE(name);
    auto end = pki_.openssl({"x509", "-in", file, "-noout", "-enddate"}, pki_.pki());
    EXPECT_THAT(row(r.out, name), HasSubstr(kubeadmDate(end.stdout_data)));
  }
  EXPECT_THAT(row(r.out, "apiserver"), MatchesRegex(".* 9d +ca +no +kubernetes +yes"));
  EXPECT_THAT(row(r.out, "etcd-server"), MatchesRegex(".* 9d +etcd-ca +no +etcd-ca +yes"));
  EXPECT_THAT(row(r.out, "admin.conf"), MatchesRegex(".* 9d +ca +no +kubernetes +yes"));
  EXPECT_THAT(row(r.out, "super-admin.conf"), MatchesRegex("super-admin.conf +missing .*"));
  EXPECT_THAT(row(r.out, "ca"), MatchesRegex(".* (3649|3650)d +no"));
  EXPECT_THAT(r.out, HasSubstr("Some certificates expire within rotate_certs_ttl (30d)"));
}

TEST_F(CertsCmdTest, JsonAndAShorterTtlPasses) {
  const std::string config = tmp_.path() + "/config.yaml";
  std::ofstream(config) << "rotate_certs_ttl: 120h\n";
  auto r = check({"--json", "--config", config});
  EXPECT_EQ(r.code, kExitOk) << r.out << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["ttl_seconds"], 120 * 3600);
  ASSERT_EQ(doc["certificates"].size(), 11u);
  for (const auto& c : doc["certificates"]) {
    EXPECT_FALSE(c["renew"].get<bool>()) << c.dump();
    if (c["name"] == "super-admin.conf") {
      EXPECT_TRUE(c["missing"].get<bool>());
      continue;
    }
    EXPECT_EQ(c["days_left"], 9) << c.dump();
    EXPECT_FALSE(c.contains("problem")) << c.dump();
  }
  EXPECT_EQ(doc["authorities"][0]["name"], "ca");
}

TEST_F(CertsCmdTest, AProblemIsNamedAndFails) {
  std::ofstream(pki_.pki() / "front-proxy-client.crt") << "garbage";
  const std::string config = tmp_.path() + "/config.yaml";
  std::ofstream(config) << "rotate_certs_ttl: 120h\n";
  auto r = check({"--config", config});
  EXPECT_EQ(r.code, kExitFailure);
  EXPECT_THAT(r.out, HasSubstr("problem: /etc/kubernetes/pki/front-proxy-client.crt: not a PEM "
                               "certificate\n"));
  EXPECT_THAT(row(r.out, "front-proxy-client"), HasSubstr("unreadable"));
}

TEST_F(CertsCmdTest, ClusterAddsTheSecretsReadThroughTheApi) {
  auto server = kubesim::Server::start({.out_dir = tmp_.path() + "/sim"});
  ASSERT_TRUE(server) << server.error().message();
  const std::string ca_cert = pki_.read(pki_.pki() / "ca.crt");
  const std::string ca_key = pki_.read(pki_.pki() / "ca.key");
  auto putRegistry = [&](int days) {
    auto pair = pki::issueCertificate({.common_name = "registry.kurl.svc.cluster.local",
                                       .now = std::chrono::system_clock::now(),
                                       .validity = std::chrono::hours(24) * days,
                                       .issuer_cert_pem = ca_cert,
                                       .issuer_key_pem = ca_key});
    ASSERT_TRUE(pair) << pair.error().message();
    auto put = (*server)->put({{"apiVersion", "v1"},
                               {"kind", "Secret"},
                               {"metadata", {{"name", "registry-pki"}, {"namespace", "kurl"}}},
                               {"data",
                                {{"registry.crt", pki::base64Encode(pair->cert_pem)},
                                 {"registry.key", pki::base64Encode(pair->key_pem)}}}});
    ASSERT_TRUE(put) << put.error().message();
  };
  ASSERT_NO_FATAL_FAILURE(putRegistry(200));
  const std::string config = tmp_.path() + "/config.yaml";
  std::ofstream(config) << "rotate_certs_ttl: 120h\n";
  std::vector<std::string> args = {"certs",       "check",        "--cluster",
                                   "--host-root", tmp_.path(),    "--config",
                                   config,        "--kubeconfig", (*server)->kubeconfigPath()};
  auto fresh = testing::cli(args);
  EXPECT_EQ(fresh.code, kExitOk) << fresh.out << fresh.err;
  EXPECT_THAT(fresh.out, HasSubstr("CLUSTER CERTIFICATE"));
  EXPECT_THAT(row(fresh.out, "registry"),
              MatchesRegex("registry +kurl/registry-pki +.* 199d +kubernetes +no +-"));
  EXPECT_THAT(row(fresh.out, "kurl-proxy"),
              MatchesRegex("kurl-proxy +default/kotsadm-tls +absent .*"));

  ASSERT_NO_FATAL_FAILURE(putRegistry(3));
  args.push_back("--json");
  auto due = testing::cli(args);
  EXPECT_EQ(due.code, kExitFailure) << due.out << due.err;
  const auto doc = nlohmann::json::parse(due.out);
  ASSERT_TRUE(doc.contains("secrets")) << due.out;
  bool seen = false;
  for (const auto& s : doc["secrets"]) {
    if (s["name"] != "registry") continue;
    seen = true;
    EXPECT_TRUE(s["renew"].get<bool>());
    EXPECT_EQ(s["days_left"], 2);
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace ekco::agent
