// pki/csr.h: requests made with OpenSSL (RSA and EC keys, every SAN kind) read back field by
// field; anything broken is one kParse line, never a crash.
#include "pki/csr.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "tests/pki/csr_support.h"

namespace ekco::pki {
namespace {

using testing::CsrSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::makeCsrPem;

TEST(CertificateRequest, ReadsTheSubjectKeyAndEverySanKindOfAnRsaRequest) {
  const std::string pem = makeCsrPem({.key = "RSA",
                                      .subject = {{"O", "system:nodes"}, {"CN", "system:node:a"}},
                                      .dns = {"a", "a.internal"},
                                      .ips = {"10.0.0.1", "fd00:0:0::1"},
                                      .emails = {"root@a"},
                                      .uris = {"spiffe://cluster/a"}});
  auto csr = parseCertificateRequest(pem, "csr a");
  ASSERT_TRUE(csr) << csr.error().message();
  EXPECT_EQ(csr->key_type, "RSA");
  EXPECT_THAT(csr->subject,
              ElementsAre(std::pair<std::string, std::string>("O", "system:nodes"),
                          std::pair<std::string, std::string>("CN", "system:node:a")));
  EXPECT_EQ(csr->subjectText(), "O=system:nodes, CN=system:node:a");
  EXPECT_THAT(csr->dns_names, ElementsAre("a", "a.internal"));
  EXPECT_THAT(csr->ip_addresses, ElementsAre("10.0.0.1", "fd00::1"));  // canonical IPv6
  EXPECT_THAT(csr->emails, ElementsAre("root@a"));
  EXPECT_THAT(csr->uris, ElementsAre("spiffe://cluster/a"));
  EXPECT_TRUE(csr->other_names.empty());
}

TEST(CertificateRequest, ReadsAnEcRequestWithoutSansAndOtherSubjectAttributes) {
  auto csr = parseCertificateRequest(
      makeCsrPem({.key = "EC", .subject = {{"C", "US"}, {"OU", "x"}, {"CN", "b"}}}), "csr b");
  ASSERT_TRUE(csr) << csr.error().message();
  EXPECT_EQ(csr->key_type, "EC");
  EXPECT_EQ(csr->subjectText(), "C=US, OU=x, CN=b");
  EXPECT_TRUE(csr->dns_names.empty());
  EXPECT_TRUE(csr->ip_addresses.empty());
}

TEST(CertificateRequest, AnythingBrokenIsOneParseLineNamingTheSource) {
  const std::string good = makeCsrPem({.subject = {{"CN", "c"}}, .dns = {"c"}});
  std::string truncated = good.substr(0, good.size() / 2) + "\n-----END CERTIFICATE REQUEST-----\n";
  std::string garbage =
      "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "csr x: empty certificate request"},
      {"hello", "csr x: not a PEM certificate request"},
      {garbage, "csr x: not a PEM certificate request"},
      {truncated, "csr x: not a PEM certificate request"},
      {makeCsrPem({.subject = {{"CN", "c"}}, .dns = {"c"}, .break_signature = true}),
       "csr x: the request's signature does not verify"},
  };
  for (const auto& [pem, want] : cases) {
    auto csr = parseCertificateRequest(pem, "csr x");
    ASSERT_FALSE(csr) << want;
    EXPECT_EQ(csr.error().code(), base::ErrorCode::kParse);
    EXPECT_EQ(csr.error().message(), want);
    EXPECT_EQ(csr.error().message().find('\n'), std::string::npos);
  }
  // A certificate is not a request.
  auto cert = parseCertificateRequest(
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "csr y");
  ASSERT_FALSE(cert);
  EXPECT_THAT(cert.error().message(), HasSubstr("not a PEM certificate request"));
}

}  // namespace
}  // namespace ekco::pki
