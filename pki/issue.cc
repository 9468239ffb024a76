#include "pki/issue.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "base/strings.h"
#include "pki/openssl_ptr.h"

namespace ekco::pki {

using base::Error;
using base::ErrorCode;
using base::Result;
using detail::BignumPtr;
using detail::BioPtr;
using detail::ExtensionPtr;
using detail::PkeyPtr;
using detail::X509Ptr;

namespace {

Error failure(std::string_view what, ErrorCode code = ErrorCode::kIo) {
  std::string message(what);
  const unsigned long err = ERR_get_error();
  ERR_clear_error();
  if (err != 0) {
    std::array<char, 256> buf{};
    ERR_error_string_n(err, buf.data(), buf.size());
    message += fmt::format(" ({})", buf.data());
  }
  return Error(std::move(message), code);
}

bool setTime(ASN1_TIME* field, base::WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
  return ASN1_TIME_set(field, static_cast<time_t>(secs)) != nullptr;
}

Result<PkeyPtr> newKey() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!key) return failure("cannot generate an EC P-256 key");
  return key;
}

Result<std::string> keyPem(EVP_PKEY* key) {
  BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_PrivateKey(out.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return failure("cannot encode the key");
  return detail::bioText(out.get());
}

Result<std::string> certPem(X509* cert) {
  BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), cert) != 1) {
    return failure("cannot encode the certificate");
  }
  return detail::bioText(out.get());
}

// A certificate with a random serial, the subject CN, the times and the public key; issuer and
// extensions are the caller's.
Result<X509Ptr> newCertificate(const std::string& common_name, base::WallTime not_before,
                               base::WallTime not_after, EVP_PKEY* key) {
  X509Ptr cert(X509_new());
  BignumPtr serial(BN_new());
  if (!cert || !serial) return failure("cannot allocate a certificate");
  X509* x = cert.get();
  X509_NAME* name = X509_get_subject_name(x);
  if (BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) == nullptr ||
      X509_set_version(x, X509_VERSION_3) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      !setTime(X509_getm_notBefore(x), not_before) || !setTime(X509_getm_notAfter(x), not_after) ||
      X509_set_pubkey(x, key) != 1) {
    return failure("cannot build the certificate");
  }
  return cert;
}

base::Status addExtension(X509* x, X509V3_CTX* ctx, int nid, const std::string& value) {
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  if (!ext || X509_add_ext(x, ext.get(), -1) != 1) {
    return failure(fmt::format("cannot add the {} extension", OBJ_nid2sn(nid)));
  }
  return base::ok();
}

bool isDnsName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

}  // namespace

Result<KeyPair> createCa(const CaRequest& r) {
  if (r.common_name.empty() || r.validity <= std::chrono::seconds::zero()) {
    return Error("a CA needs a common name and a positive validity", ErrorCode::kInvalidArgument);
  }
  auto key = newKey();
  EKCO_TRY(key);
  auto cert = newCertificate(r.common_name, r.now - kBackdate, r.now + r.validity, key->get());
  EKCO_TRY(cert);
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(x)) != 1) return failure("cannot set issuer");
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  EKCO_TRY(addExtension(x, &ctx, NID_basic_constraints, "critical,CA:TRUE"));
  EKCO_TRY(addExtension(x, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign"));
  EKCO_TRY(addExtension(x, &ctx, NID_subject_key_identifier, "hash"));
  if (X509_sign(x, key->get(), EVP_sha256()) <= 0) return failure("cannot sign the CA");
  auto cert_pem = certPem(x);
  EKCO_TRY(cert_pem);
  auto key_pem = keyPem(key->get());
  EKCO_TRY(key_pem);
  return KeyPair{.cert_pem = std::move(*cert_pem), .key_pem = std::move(*key_pem)};
}

Result<KeyPair> issueServingCertificate(const ServingRequest& r) {
  if (r.dns_names.empty()) {
    return Error("a serving certificate needs at least one DNS name", ErrorCode::kInvalidArgument);
  }
  for (const std::string& name : r.dns_names) {
    if (!isDnsName(name)) {
      return Error(fmt::format("{} is not a DNS name", base::quoteForMessage(name)),
                   ErrorCode::kInvalidArgument);
    }
  }
  if (r.validity <= std::chrono::seconds::zero()) {
    return Error("validity must be positive", ErrorCode::kInvalidArgument);
  }
  BioPtr ca_bio = detail::readBio(r.ca_cert_pem);
  X509Ptr ca(ca_bio ? PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  BioPtr key_bio = detail::readBio(r.ca_key_pem);
  PkeyPtr ca_key(key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr)
                         : nullptr);
  if (!ca || !ca_key) {
    ERR_clear_error();
    return Error(!ca ? "the CA certificate is not PEM" : "the CA key is not a PEM private key",
                 ErrorCode::kParse);
  }
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return Error("the CA key does not match the CA certificate", ErrorCode::kInvalidArgument);
  }
  if (X509_check_ca(ca.get()) == 0) {
    return Error("the CA certificate is not a CA (basicConstraints)", ErrorCode::kInvalidArgument);
  }
  const auto ca_not_before = detail::toWallTime(X509_get0_notBefore(ca.get()));
  const auto ca_not_after = detail::toWallTime(X509_get0_notAfter(ca.get()));
  if (!ca_not_before || !ca_not_after) {
    return Error("the CA has unreadable validity dates", ErrorCode::kParse);
  }
  if (*ca_not_after <= r.now) {
    return Error("the CA has expired", ErrorCode::kInvalidArgument);
  }
  const base::WallTime not_before = std::max(r.now - kBackdate, *ca_not_before);
  const base::WallTime not_after = std::min(r.now + r.validity, *ca_not_after);
  auto key = newKey();
  EKCO_TRY(key);
  auto cert = newCertificate(r.common_name.empty() ? r.dns_names.front() : r.common_name,
                             not_before, not_after, key->get());
  EKCO_TRY(cert);
  X509* x = cert->get();
  if (X509_set_issuer_name(x, X509_get_subject_name(ca.get())) != 1) {
    return failure("cannot set the issuer");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca.get(), x, nullptr, nullptr, 0);
  std::string sans;
  for (const std::string& name : r.dns_names) sans += (sans.empty() ? "DNS:" : ",DNS:") + name;
  EKCO_TRY(addExtension(x, &ctx, NID_basic_constraints, "critical,CA:FALSE"));
  EKCO_TRY(addExtension(x, &ctx, NID_key_usage, "critical,digitalSignature"));
  EKCO_TRY(addExtension(x, &ctx, NID_ext_key_usage, "serverAuth"));
  EKCO_TRY(addExtension(x, &ctx, NID_subject_alt_name, sans));
  EKCO_TRY(addExtension(x, &ctx, NID_subject_key_identifier, "hash"));
  if (X509_get0_subject_key_id(ca.get()) != nullptr) {
    EKCO_TRY(addExtension(x, &ctx, NID_authority_key_identifier, "keyid:always"));
  }
  if (X509_sign(x, ca_key.get(), EVP_sha256()) <= 0) return failure("cannot sign");
  if (X509_verify(x, X509_get0_pubkey(ca.get())) != 1) {
    return failure("the new certificate does not verify against its CA");
  }
  auto cert_pem = certPem(x);
  EKCO_TRY(cert_pem);
  auto key_pem = keyPem(key->get());
  EKCO_TRY(key_pem);
  return KeyPair{.cert_pem = std::move(*cert_pem), .key_pem = std::move(*key_pem)};
}

}  // namespace ekco::pki
