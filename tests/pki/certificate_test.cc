// pki/certificate.h against certificates OpenSSL makes here: names, validity, a year-9999
// notAfter (clamped, never wrapped), garbage.
#include "pki/certificate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

namespace ekco::pki {
namespace {

using ::testing::HasSubstr;

// A self-signed certificate for CN=`cn`, valid from `not_before` to `not_after` (ASN.1
// GeneralizedTime, "YYYYMMDDHHMMSSZ").
std::string selfSigned(const std::string& cn, const char* not_before, const char* not_after) {
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  ASN1_TIME_set_string(X509_getm_notBefore(cert.get()), not_before);
  ASN1_TIME_set_string(X509_getm_notAfter(cert.get()), not_after);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key.get());
  X509_sign(cert.get(), key.get(), EVP_sha256());
  std::unique_ptr<BIO, decltype(&BIO_free_all)> bio(BIO_new(BIO_s_mem()), &BIO_free_all);
  PEM_write_bio_X509(bio.get(), cert.get());
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

base::WallTime utc(int y, unsigned m, unsigned d) {
  return base::WallTime(std::chrono::sys_days(std::chrono::year(y) / m / d).time_since_epoch());
}

TEST(Certificate, ReadsNamesAndValidity) {
  auto cert = parseCertificate(selfSigned("kube-apiserver", "20261123000000Z", "20271123000000Z"),
                               "/etc/kubernetes/pki/apiserver.crt");
  ASSERT_TRUE(cert) << cert.error().message();
  EXPECT_EQ(cert->subject, "CN=kube-apiserver");
  EXPECT_EQ(cert->issuer, "CN=kube-apiserver");
  EXPECT_EQ(cert->not_before, utc(2026, 11, 23));
  EXPECT_EQ(cert->not_after, utc(2027, 11, 23));
}

TEST(Certificate, AYear9999NotAfterIsLaterThanAnyNowNeverAnOverflowedPast) {
  auto cert = parseCertificate(selfSigned("ca", "19500101000000Z", "99991231235959Z"), "ca.crt");
  ASSERT_TRUE(cert) << cert.error().message();
  EXPECT_EQ(cert->not_after, base::kLatestTime);
  EXPECT_GT(cert->not_after, utc(2100, 1, 1));
  EXPECT_EQ(cert->not_before, utc(1950, 1, 1));
}

TEST(Certificate, GarbageIsAParseErrorNamingTheFile) {
  for (const std::string& text :
       {std::string(), std::string("not a cert"),
        std::string("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")}) {
    auto cert = parseCertificate(text, "/etc/kubernetes/pki/apiserver.crt");
    ASSERT_FALSE(cert);
    EXPECT_EQ(cert.error().code(), base::ErrorCode::kParse);
    EXPECT_EQ(cert.error().message(), "/etc/kubernetes/pki/apiserver.crt: not a PEM certificate");
  }
}

}  // namespace
}  // namespace ekco::pki
