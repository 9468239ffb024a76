// pki/renew.h against a kubeadm-shaped PKI made by the openssl command here, and checked by it:
// `openssl verify`, the extensions as openssl prints them, `-checkend` at +300 and +375 days.
// At the end, pki/issue.h's issueCertificate as the cluster's TLS secrets use it, checked the
// same way.
#include "pki/renew.h"

#include "pki/issue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/os/process.h"
#include "pki/certificate.h"

namespace ekco::pki {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeFile(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

class RenewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ekco-renew-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    makeCa("ca", "kubernetes", 3650);
    makeLeaf("apiserver", "ca", "/CN=kube-apiserver", "rsa",
             "basicConstraints=critical,CA:FALSE\n"
             "keyUsage=critical,digitalSignature,keyEncipherment\n"
             "extendedKeyUsage=serverAuth\n"
             "subjectAltName=DNS:cp-1,DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1,"
             "IP:127.0.0.1\n"
             "authorityKeyIdentifier=keyid\n",
             10);
  }
  void TearDown() override { fs::remove_all(dir_); }

  base::ProcessResult openssl(std::vector<std::string> args) {
    args.insert(args.begin(), "openssl");
    base::ProcessRequest request{.argv = args, .working_dir = dir_.string(), .timeout = 60s};
    auto r = runner_.run(request);
    EXPECT_TRUE(r) << r.error().message();
    return r ? *r : base::ProcessResult{};
  }
  void mustOpenssl(std::vector<std::string> args) {
    auto r = openssl(args);
    ASSERT_EQ(r.exit_code, 0) << base::formatArgv(args) << ": " << r.stderr_data;
  }

  void makeCa(const std::string& name, const std::string& cn, int days) {
    mustOpenssl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key", "-out",
                 name + ".crt", "-subj", "/CN=" + cn, "-days", std::to_string(days), "-addext",
                 "basicConstraints=critical,CA:TRUE", "-addext",
                 "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"});
  }
  // A leaf signed by `ca`; key "rsa" (PKCS#1, as kubeadm writes it) or "ec" (SEC1).
  void makeLeaf(const std::string& name, const std::string& ca, const std::string& subject,
                const std::string& key, const std::string& extensions, int days) {
    if (key == "rsa") {
      mustOpenssl({"genrsa", "-traditional", "-out", name + ".key", "2048"});
    } else {
      mustOpenssl({"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", name + ".key"});
    }
    mustOpenssl({"req", "-new", "-key", name + ".key", "-subj", subject, "-out", name + ".csr"});
    writeFile(dir_ / (name + ".ext"), extensions);
    mustOpenssl({"x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
                 "-CAcreateserial", "-days", std::to_string(days), "-extfile", name + ".ext",
                 "-out", name + ".crt"});
  }

  RenewRequest request(const std::string& name, const std::string& ca = "ca") {
    cert_ = readFile(dir_ / (name + ".crt"));
    ca_cert_ = readFile(dir_ / (ca + ".crt"));
    ca_key_ = readFile(dir_ / (ca + ".key"));
    source_ = "pki/" + name + ".crt";
    return RenewRequest{.cert_pem = cert_,
                        .ca_cert_pem = ca_cert_,
                        .ca_key_pem = ca_key_,
                        .now = std::chrono::system_clock::now(),
                        .key_encoding = keyEncodingOf(readFile(dir_ / (name + ".key"))),
                        .source = source_};
  }
  // What openssl prints of a certificate's identity: subject and the kept extensions.
  std::string identity(const std::string& file) {
    auto r = openssl({"x509", "-in", file, "-noout", "-subject", "-ext",
                      "subjectAltName,keyUsage,extendedKeyUsage,basicConstraints"});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_data;
    return r.stdout_data;
  }
  bool validAfter(const std::string& file, std::chrono::seconds from_now) {
    return openssl({"x509", "-in", file, "-noout", "-checkend", std::to_string(from_now.count())})
               .exit_code == 0;
  }

  fs::path dir_;
  base::SystemClock clock_;
  base::BoostProcessRunner runner_{clock_};
  std::string cert_, ca_cert_, ca_key_, source_;
};

TEST_F(RenewTest, KeepsSubjectSansAndUsagesWithANewKeySignedByTheCa) {
  auto renewed = renewCertificate(request("apiserver"));
  ASSERT_TRUE(renewed) << renewed.error().message();
  writeFile(dir_ / "new.crt", renewed->cert_pem);
  writeFile(dir_ / "new.key", renewed->key_pem);

  auto verified = openssl({"verify", "-CAfile", "ca.crt", "new.crt"});
  EXPECT_EQ(verified.exit_code, 0) << verified.stdout_data << verified.stderr_data;
  EXPECT_EQ(identity("new.crt"), identity("apiserver.crt"));
  EXPECT_THAT(identity("new.crt"), HasSubstr("IP Address:10.96.0.1"));
  EXPECT_TRUE(validAfter("new.crt", std::chrono::hours(24 * 300)));
  EXPECT_FALSE(validAfter("new.crt", std::chrono::hours(24 * 375)));
  // The old one had 10 days left; the new key is new, RSA 2048, PKCS#1 as kubeadm writes it.
  EXPECT_FALSE(validAfter("apiserver.crt", std::chrono::hours(24 * 11)));
  EXPECT_THAT(renewed->key_pem, StartsWith("-----BEGIN RSA PRIVATE KEY-----"));
  EXPECT_NE(renewed->key_pem, readFile(dir_ / "apiserver.key"));
  EXPECT_TRUE(checkKeyMatches(renewed->cert_pem, renewed->key_pem, "new.crt"));
  EXPECT_FALSE(checkKeyMatches(renewed->cert_pem, readFile(dir_ / "apiserver.key"), "new.crt"));
  auto bits = openssl({"pkey", "-in", "new.key", "-noout", "-text"});
  EXPECT_THAT(bits.stdout_data, HasSubstr("2048 bit"));
  // A new serial; the authority key id is the CA's.
  auto serials = openssl({"x509", "-in", "new.crt", "-noout", "-serial"});
  auto old_serial = openssl({"x509", "-in", "apiserver.crt", "-noout", "-serial"});
  EXPECT_NE(serials.stdout_data, old_serial.stdout_data);
  auto aki = openssl({"x509", "-in", "new.crt", "-noout", "-ext", "authorityKeyIdentifier"});
  auto ski = openssl({"x509", "-in", "ca.crt", "-noout", "-ext", "subjectKeyIdentifier"});
  const std::string ca_key_id = ski.stdout_data.substr(ski.stdout_data.find('\n') + 1);
  EXPECT_THAT(aki.stdout_data, HasSubstr(ca_key_id.substr(ca_key_id.find_first_not_of(' '))));
}

// `ekco regen-cert`: other names, the same subject, usages and expiry; openssl agrees.
TEST_F(RenewTest, AReissueWithOtherNamesKeepsSubjectUsagesAndExpiry) {
  RenewRequest r = request("apiserver");
  const auto old = parseCertificate(cert_, "apiserver.crt");
  ASSERT_TRUE(old);
  r.alt_names = std::vector<std::string>{"cp-1",      "kubernetes", "localhost",
                                         "10.96.0.1", "127.0.0.1",  "fd00::6444"};
  r.not_after = old->not_after;
  auto reissued = renewCertificate(r);
  ASSERT_TRUE(reissued) << reissued.error().message();
  writeFile(dir_ / "new.crt", reissued->cert_pem);
  auto verified = openssl({"verify", "-CAfile", "ca.crt", "new.crt"});
  EXPECT_EQ(verified.exit_code, 0) << verified.stdout_data << verified.stderr_data;
  const std::string names = identity("new.crt");
  EXPECT_THAT(names, HasSubstr("DNS:cp-1, DNS:kubernetes, DNS:localhost, IP Address:10.96.0.1, "
                               "IP Address:127.0.0.1, IP Address:FD00:0:0:0:0:0:0:6444"));
  EXPECT_THAT(names, ::testing::Not(HasSubstr("kubernetes.default")));
  // Everything but the names as before.
  auto without_names = [](std::string text) {
    const auto at = text.find("X509v3 Subject Alternative Name");
    const auto end = text.find('\n', text.find('\n', at) + 1);
    return text.erase(at, end - at);
  };
  EXPECT_EQ(without_names(names), without_names(identity("apiserver.crt")));
  auto end_new = openssl({"x509", "-in", "new.crt", "-noout", "-enddate"});
  auto end_old = openssl({"x509", "-in", "apiserver.crt", "-noout", "-enddate"});
  EXPECT_EQ(end_new.stdout_data, end_old.stdout_data);
  // Names checked before anything is made: a comma (extension syntax) or a bad label.
  for (const char* bad : {"a,DNS:evil", "-x.example", "under_score", "", "a..b"}) {
    r.alt_names = std::vector<std::string>{bad};
    auto refused = renewCertificate(r);
    ASSERT_FALSE(refused) << bad;
    EXPECT_THAT(refused.error().message(), HasSubstr("is neither an IP address nor a DNS name"));
  }
  EXPECT_EQ(*canonicalAltName("LB.Example.COM", "x"), "lb.example.com");
  EXPECT_EQ(*canonicalAltName("FD00::0:6444", "x"), "fd00::6444");
  EXPECT_EQ(*canonicalAltName("*.example.com", "x"), "*.example.com");
}

TEST_F(RenewTest, ClientCertificateKeepsItsGroupsAndAnEcKeyStaysSec1) {
  makeLeaf("admin", "ca", "/O=system:masters/CN=kubernetes-admin", "ec",
           "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n", 10);
  auto renewed = renewCertificate(request("admin"));
  ASSERT_TRUE(renewed) << renewed.error().message();
  writeFile(dir_ / "new.crt", renewed->cert_pem);
  EXPECT_EQ(identity("new.crt"), identity("admin.crt"));
  EXPECT_THAT(identity("new.crt"), HasSubstr("O = system:masters, CN = kubernetes-admin"));
  EXPECT_THAT(renewed->key_pem, StartsWith("-----BEGIN EC PRIVATE KEY-----"));
  writeFile(dir_ / "new.key", renewed->key_pem);
  EXPECT_THAT(openssl({"ec", "-in", "new.key", "-noout", "-text"}).stdout_data,
              HasSubstr("prime256v1"));
  EXPECT_EQ(openssl({"verify", "-CAfile", "ca.crt", "new.crt"}).exit_code, 0);
}

TEST_F(RenewTest, ValidFromNowNeverFromTheCasNotBeforeAndNeverPastTheCa) {
  // Renewed "tomorrow": NotBefore is then (minus the backdate), not the CA's NotBefore.
  RenewRequest r = request("apiserver");
  r.now = std::chrono::system_clock::now() + 24h;
  auto renewed = renewCertificate(r);
  ASSERT_TRUE(renewed) << renewed.error().message();
  auto cert = parseCertificate(renewed->cert_pem, "new");
  ASSERT_TRUE(cert);
  EXPECT_NEAR(std::chrono::duration<double>(cert->not_before - (r.now - kBackdate)).count(), 0, 1);
  EXPECT_NEAR(std::chrono::duration<double>(cert->not_after - (r.now + kDefaultValidity)).count(),
              0, 1);

  // A CA with 100 days left bounds the renewal.
  makeCa("short-ca", "short", 100);
  makeLeaf("short-leaf", "short-ca", "/CN=front-proxy-client", "rsa",
           "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n", 5);
  auto bounded = renewCertificate(request("short-leaf", "short-ca"));
  ASSERT_TRUE(bounded) << bounded.error().message();
  auto leaf = parseCertificate(bounded->cert_pem, "leaf");
  auto ca = parseCertificate(readFile(dir_ / "short-ca.crt"), "ca");
  ASSERT_TRUE(leaf && ca);
  EXPECT_EQ(leaf->not_after, ca->not_after);
}

TEST_F(RenewTest, RefusesWhatIsNotItsToRenew) {
  makeCa("other-ca", "other", 3650);
  auto wrong_ca = renewCertificate(request("apiserver", "other-ca"));
  ASSERT_FALSE(wrong_ca);
  EXPECT_EQ(wrong_ca.error().message(), "pki/apiserver.crt: was not issued by this CA");

  RenewRequest mismatched = request("apiserver");
  const std::string other_key = readFile(dir_ / "other-ca.key");
  mismatched.ca_key_pem = other_key;
  auto bad_key = renewCertificate(mismatched);
  ASSERT_FALSE(bad_key);
  EXPECT_EQ(bad_key.error().message(),
            "pki/apiserver.crt (its CA): the CA key does not match the CA certificate");

  RenewRequest late = request("apiserver");
  late.now = std::chrono::system_clock::now() + std::chrono::hours(24 * 3651);
  auto expired = renewCertificate(late);
  ASSERT_FALSE(expired);
  EXPECT_THAT(expired.error().message(), HasSubstr("the CA itself has expired"));

  auto the_ca = renewCertificate(request("ca"));
  ASSERT_FALSE(the_ca);
  EXPECT_THAT(the_ca.error().message(), HasSubstr("is a CA certificate"));

  RenewRequest garbage = request("apiserver");
  garbage.cert_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  auto parsed = renewCertificate(garbage);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error().message(), "pki/apiserver.crt: not a PEM certificate");
  EXPECT_EQ(parsed.error().code(), base::ErrorCode::kParse);
}

TEST(KeyEncoding, FollowsThePemHeader) {
  EXPECT_EQ(keyEncodingOf("-----BEGIN RSA PRIVATE KEY-----\n"), KeyEncoding::kTypeSpecific);
  EXPECT_EQ(keyEncodingOf("-----BEGIN EC PRIVATE KEY-----\n"), KeyEncoding::kTypeSpecific);
  EXPECT_EQ(keyEncodingOf("-----BEGIN PRIVATE KEY-----\n"), KeyEncoding::kPkcs8);
}

}  // namespace
}  // namespace ekco::pki

namespace ekco::pki {
namespace {

TEST_F(RenewTest, IssuesASelfSignedCaAndALeafThatOpensslVerifies) {
  const base::WallTime now = std::chrono::system_clock::now();
  auto ca = issueCertificate({.common_name = "Project Contour", .is_ca = true, .now = now});
  ASSERT_TRUE(ca) << ca.error().message();
  auto leaf = issueCertificate({.common_name = "envoy",
                                .organizations = {"kurl"},
                                .dns_names = {"envoy", "envoy.projectcontour"},
                                .ip_addresses = {"10.0.0.7", "fd00::1"},
                                .server_auth = true,
                                .client_auth = true,
                                .now = now,
                                .validity = 24h * 30,
                                .issuer_cert_pem = ca->cert_pem,
                                .issuer_key_pem = ca->key_pem});
  ASSERT_TRUE(leaf) << leaf.error().message();
  writeFile(dir_ / "issued-ca.crt", ca->cert_pem);
  writeFile(dir_ / "issued.crt", leaf->cert_pem);
  auto verified = openssl({"verify", "-CAfile", "issued-ca.crt", "issued.crt"});
  EXPECT_EQ(verified.exit_code, 0) << verified.stdout_data << verified.stderr_data;
  EXPECT_TRUE(checkKeyMatches(leaf->cert_pem, leaf->key_pem, "issued"));
  auto text = openssl({"x509", "-in", "issued.crt", "-noout", "-text"}).stdout_data;
  EXPECT_THAT(text, HasSubstr("TLS Web Server Authentication, TLS Web Client Authentication"));
  EXPECT_THAT(text, HasSubstr("CA:FALSE"));

  auto parsed = parseCertificate(leaf->cert_pem, "issued");
  ASSERT_TRUE(parsed) << parsed.error().message();
  EXPECT_EQ(parsed->common_name, "envoy");
  EXPECT_EQ(parsed->issuer_common_name, "Project Contour");
  EXPECT_EQ(parsed->subject, "CN=envoy,O=kurl");
  EXPECT_EQ(parsed->dns_names, (std::vector<std::string>{"envoy", "envoy.projectcontour"}));
  EXPECT_EQ(parsed->ip_addresses, (std::vector<std::string>{"10.0.0.7", "fd00::1"}));
  EXPECT_FALSE(parsed->is_ca);
  EXPECT_GT(parsed->not_after, now + 24h * 29);
  EXPECT_LT(parsed->not_after, now + 24h * 31);
  auto parsed_ca = parseCertificate(ca->cert_pem, "ca");
  ASSERT_TRUE(parsed_ca);
  EXPECT_TRUE(parsed_ca->is_ca);
  EXPECT_EQ(parsed_ca->issuer_common_name, "Project Contour");
}

TEST_F(RenewTest, IssuingRefusesBadNamesAndAnIssuerThatIsNotACa) {
  const base::WallTime now = std::chrono::system_clock::now();
  auto bad_ip = issueCertificate({.common_name = "x", .ip_addresses = {"10.0.0.300"}, .now = now});
  ASSERT_FALSE(bad_ip);
  EXPECT_EQ(bad_ip.error().message(), "certificate: invalid IP address \"10.0.0.300\"");
  auto bad_dns = issueCertificate(
      {.common_name = "x", .dns_names = {"a,DNS:evil"}, .now = now, .source = "secret a/b"});
  ASSERT_FALSE(bad_dns);
  EXPECT_THAT(bad_dns.error().message(), StartsWith("secret a/b: invalid DNS name"));
  auto leaf = issueCertificate({.common_name = "leaf", .now = now});
  ASSERT_TRUE(leaf);
  auto under_leaf = issueCertificate({.common_name = "x",
                                      .now = now,
                                      .issuer_cert_pem = leaf->cert_pem,
                                      .issuer_key_pem = leaf->key_pem});
  ASSERT_FALSE(under_leaf);
  EXPECT_THAT(under_leaf.error().message(), HasSubstr("the issuer is not a CA"));
}

}  // namespace
}  // namespace ekco::pki
