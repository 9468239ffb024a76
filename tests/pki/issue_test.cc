#include "pki/issue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "pki/certificate.h"
#include "pki/renew.h"

namespace ekco::pki {
namespace {

using ::testing::HasSubstr;

const base::WallTime kNow{std::chrono::seconds(1'800'000'000)};

// Whether `leaf` verifies against `ca` as a TLS server certificate for `name`, by OpenSSL's own
// chain verification at kNow.
bool verifies(const std::string& leaf_pem, const std::string& ca_pem, const std::string& name,
              base::WallTime at = kNow) {
  BIO* lb = BIO_new_mem_buf(leaf_pem.data(), static_cast<int>(leaf_pem.size()));
  BIO* cb = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* leaf = PEM_read_bio_X509(lb, nullptr, nullptr, nullptr);
  X509* ca = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_time(
      param, std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count());
  X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  X509_free(leaf);
  BIO_free(cb);
  BIO_free(lb);
  return ok;
}

TEST(Issue, ACaSignsServingCertificatesThatVerifyForTheirNamesOnly) {
  auto ca = createCa({.common_name = "ekco-webhook-ca", .now = kNow});
  ASSERT_TRUE(ca) << ca.error().message();
  auto parsed_ca = parseCertificate(ca->cert_pem, "ca");
  ASSERT_TRUE(parsed_ca);
  EXPECT_TRUE(parsed_ca->is_ca);
  EXPECT_EQ(parsed_ca->subject, "CN=ekco-webhook-ca");
  EXPECT_TRUE(checkKeyMatches(ca->cert_pem, ca->key_pem, "ca"));

  auto leaf =
      issueServingCertificate({.ca_cert_pem = ca->cert_pem,
                               .ca_key_pem = ca->key_pem,
                               .common_name = "ekco.kurl.svc",
                               .dns_names = {"ekco.kurl.svc", "ekco.kurl.svc.cluster.local"},
                               .now = kNow,
                               .validity = std::chrono::hours(24 * 90)});
  ASSERT_TRUE(leaf) << leaf.error().message();
  auto parsed = parseCertificate(leaf->cert_pem, "leaf");
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(parsed->is_ca);
  EXPECT_EQ(parsed->issuer, "CN=ekco-webhook-ca");
  EXPECT_EQ(parsed->not_before, kNow - kBackdate);
  EXPECT_EQ(parsed->not_after, kNow + std::chrono::hours(24 * 90));
  EXPECT_TRUE(checkKeyMatches(leaf->cert_pem, leaf->key_pem, "leaf"));
  EXPECT_TRUE(verifies(leaf->cert_pem, ca->cert_pem, "ekco.kurl.svc"));
  EXPECT_TRUE(verifies(leaf->cert_pem, ca->cert_pem, "ekco.kurl.svc.cluster.local"));
  EXPECT_FALSE(verifies(leaf->cert_pem, ca->cert_pem, "kubernetes.default.svc"));
  EXPECT_FALSE(
      verifies(leaf->cert_pem, ca->cert_pem, "ekco.kurl.svc", kNow + std::chrono::hours(24 * 91)));
  auto other = createCa({.common_name = "ekco-webhook-ca", .now = kNow});
  ASSERT_TRUE(other);
  EXPECT_FALSE(verifies(leaf->cert_pem, other->cert_pem, "ekco.kurl.svc"));
}

TEST(Issue, ALeafNeverOutlivesItsCa) {
  auto ca = createCa({.common_name = "short", .now = kNow, .validity = std::chrono::hours(24)});
  ASSERT_TRUE(ca);
  auto leaf = issueServingCertificate(
      {.ca_cert_pem = ca->cert_pem, .ca_key_pem = ca->key_pem, .dns_names = {"a.b"}, .now = kNow});
  ASSERT_TRUE(leaf);
  EXPECT_EQ(parseCertificate(leaf->cert_pem, "leaf")->not_after, kNow + std::chrono::hours(24));
}

TEST(Issue, RefusesWhatItCannotSignWell) {
  auto ca = createCa({.common_name = "ca", .now = kNow});
  auto other = createCa({.common_name = "other", .now = kNow});
  ASSERT_TRUE(ca && other);
  const auto refused = [&](ServingRequest r) {
    auto got = issueServingCertificate(r);
    return got ? std::string("issued") : got.error().message();
  };
  EXPECT_THAT(refused({.ca_cert_pem = ca->cert_pem, .ca_key_pem = ca->key_pem, .now = kNow}),
              HasSubstr("at least one DNS name"));
  EXPECT_THAT(refused({.ca_cert_pem = ca->cert_pem,
                       .ca_key_pem = other->key_pem,
                       .dns_names = {"a"},
                       .now = kNow}),
              HasSubstr("does not match"));
  EXPECT_THAT(refused({.ca_cert_pem = ca->cert_pem,
                       .ca_key_pem = ca->key_pem,
                       .dns_names = {"a"},
                       .now = kNow + std::chrono::hours(24 * 365 * 11)}),
              HasSubstr("expired"));
  EXPECT_THAT(refused({.ca_cert_pem = "x", .ca_key_pem = ca->key_pem, .dns_names = {"a"}}),
              HasSubstr("not a PEM certificate"));
  EXPECT_THAT(refused({.ca_cert_pem = ca->cert_pem,
                       .ca_key_pem = ca->key_pem,
                       .dns_names = {"bad name\n"},
                       .now = kNow}),
              HasSubstr("not a DNS name"));
  auto leaf = issueServingCertificate(
      {.ca_cert_pem = ca->cert_pem, .ca_key_pem = ca->key_pem, .dns_names = {"a"}, .now = kNow});
  ASSERT_TRUE(leaf);
  EXPECT_THAT(refused({.ca_cert_pem = leaf->cert_pem,
                       .ca_key_pem = leaf->key_pem,
                       .dns_names = {"b"},
                       .now = kNow}),
              HasSubstr("not a CA"));
}

}  // namespace
}  // namespace ekco::pki
