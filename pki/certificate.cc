#include "pki/certificate.h"

#include "pki/openssl_ptr.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>

#include <array>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

namespace ekco::pki {

std::optional<base::WallTime> detail::toWallTime(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return std::nullopt;
  using namespace std::chrono;
  const year_month_day ymd{year(tm.tm_year + 1900), month(static_cast<unsigned>(tm.tm_mon + 1)),
                           day(static_cast<unsigned>(tm.tm_mday))};
  if (!ymd.ok()) return std::nullopt;
  const seconds since_epoch = sys_days(ymd).time_since_epoch() + hours(tm.tm_hour) +
                              minutes(tm.tm_min) + seconds(tm.tm_sec);
  return base::clampToWindow(since_epoch);
}

namespace {

using detail::BioPtr;
using detail::X509Ptr;

std::string name(const X509_NAME* n) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || n == nullptr) return {};
  if (X509_NAME_print_ex(bio.get(), n, 0, XN_FLAG_RFC2253) < 0) return {};
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

std::string commonName(const X509_NAME* n) {
  if (n == nullptr) return {};
  const int at = X509_NAME_get_index_by_NID(n, NID_commonName, -1);
  if (at < 0) return {};
  const ASN1_STRING* value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, at));
  unsigned char* utf8 = nullptr;
  const int len = ASN1_STRING_to_UTF8(&utf8, value);
  if (len < 0 || utf8 == nullptr) return {};
  std::string out(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(len));
  OPENSSL_free(utf8);
  return out;
}

void readSans(X509* cert, Certificate& out) {
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names == nullptr) return;
  for (int i = 0; i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* g = sk_GENERAL_NAME_value(names, i);
    if (g->type == GEN_DNS) {
      const ASN1_STRING* s = g->d.dNSName;
      out.dns_names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                 static_cast<std::size_t>(ASN1_STRING_length(s)));
    } else if (g->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = g->d.iPAddress;
      const int len = ASN1_STRING_length(ip);
      std::array<char, INET6_ADDRSTRLEN> text{};
      const int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
      if (family != 0 &&
          ::inet_ntop(family, ASN1_STRING_get0_data(ip), text.data(), text.size()) != nullptr) {
        out.ip_addresses.emplace_back(text.data());
      }
    }
  }
  GENERAL_NAMES_free(names);
}

}  // namespace

base::Result<Certificate> parseCertificate(std::string_view pem, std::string_view source) {
  const base::Error bad(std::string(source) + ": not a PEM certificate", base::ErrorCode::kParse);
  if (pem.empty() || pem.size() > static_cast<std::size_t>(INT32_MAX)) return bad;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return bad;
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return bad;
  auto not_before = detail::toWallTime(X509_get0_notBefore(cert.get()));
  auto not_after = detail::toWallTime(X509_get0_notAfter(cert.get()));
  if (!not_before || !not_after) {
    return base::Error(std::string(source) + ": unreadable validity dates",
                       base::ErrorCode::kParse);
  }
  std::string serial;
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert.get()), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  Certificate out{.subject = name(X509_get_subject_name(cert.get())),
                  .issuer = name(X509_get_issuer_name(cert.get())),
                  .not_before = *not_before,
                  .not_after = *not_after,
                  .serial = std::move(serial),
                  .is_ca = X509_check_ca(cert.get()) != 0,
                  .common_name = commonName(X509_get_subject_name(cert.get())),
                  .issuer_common_name = commonName(X509_get_issuer_name(cert.get()))};
  readSans(cert.get(), out);
  return out;
}

std::string base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  if (data.empty()) return out;
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(data.data()),
                                static_cast<int>(data.size()));
  out.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

std::string libraryVersion() { return OpenSSL_version(OPENSSL_VERSION); }

}  // namespace ekco::pki
