#include "pki/issue.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include <fmt/format.h>

#include "base/strings.h"
#include "pki/openssl_ptr.h"
#include "pki/x509_support.h"

namespace ekco::pki {

using base::Error;
using base::ErrorCode;
using base::Result;
using detail::BignumPtr;
using detail::BioPtr;
using detail::ExtensionPtr;
using detail::failure;
using detail::PkeyPtr;
using detail::X509Ptr;

namespace {

bool isDnsName(std::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
  });
}

PkeyPtr newKey(KeyAlgorithm algorithm) {
  return PkeyPtr(algorithm == KeyAlgorithm::kEcP256
                     ? EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256")
                     : EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(2048)));
}

}  // namespace

Result<KeyPair> issueCertificate(const IssueRequest& r) {
  const std::string_view source = r.source.empty() ? "certificate" : r.source;
  if (r.common_name.empty()) {
    return Error(fmt::format("{}: a common name is required", source), ErrorCode::kInvalidArgument);
  }
  if (r.validity <= std::chrono::seconds::zero()) {
    return Error(fmt::format("{}: validity must be positive", source), ErrorCode::kInvalidArgument);
  }
  const bool self_signed = r.issuer_cert_pem.empty() && r.issuer_key_pem.empty();
  X509Ptr issuer;
  PkeyPtr issuer_key;
  base::WallTime not_after = r.now + r.validity;
  base::WallTime not_before = r.now - kBackdate;
  if (!self_signed) {
    const std::string issuer_source = fmt::format("{} (its issuer)", source);
    auto ca = detail::readCert(r.issuer_cert_pem, issuer_source);
    if (!ca) return std::move(ca).error();
    auto ca_key = detail::readKey(r.issuer_key_pem, issuer_source);
    if (!ca_key) return std::move(ca_key).error();
    if (X509_check_private_key(ca->get(), ca_key->get()) != 1) {
      ERR_clear_error();
      return Error(fmt::format("{}: the CA key does not match the CA certificate", issuer_source),
                   ErrorCode::kInvalidArgument);
    }
    if (!detail::isCa(ca->get())) {
      return Error(fmt::format("{}: the issuer is not a CA (basicConstraints)", issuer_source),
                   ErrorCode::kInvalidArgument);
    }
    const auto ca_not_before = detail::toWallTime(X509_get0_notBefore(ca->get()));
    const auto ca_not_after = detail::toWallTime(X509_get0_notAfter(ca->get()));
    if (!ca_not_before || !ca_not_after || *ca_not_after <= r.now) {
      return Error(fmt::format("{}: the CA has expired or its dates are unreadable", issuer_source),
                   ErrorCode::kInvalidArgument);
    }
    not_before = std::max(not_before, *ca_not_before);
    not_after = std::min(not_after, *ca_not_after);
    issuer = std::move(*ca);
    issuer_key = std::move(*ca_key);
  }
  PkeyPtr key = newKey(r.key);
  if (!key) return failure(source, "cannot generate a key");

  X509Ptr cert(X509_new());
  if (!cert) return failure(source, "cannot allocate a certificate");
  X509* x = cert.get();
  X509_NAME* name = X509_get_subject_name(x);
  for (const std::string& o : r.organizations) {
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1,
                                   0) != 1) {
      return failure(source, "cannot set the organization", ErrorCode::kInvalidArgument);
    }
  }
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(r.common_name.c_str()), -1,
                                 -1, 0) != 1) {
    return failure(source, "cannot set the common name", ErrorCode::kInvalidArgument);
  }
  BignumPtr serial(BN_new());
  // A random positive 127-bit serial, as Go's crypto/x509 users make them.
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) == nullptr ||
      X509_set_version(x, X509_VERSION_3) != 1 ||
      X509_set_issuer_name(x, self_signed ? name : X509_get_subject_name(issuer.get())) != 1 ||
      !detail::setTime(X509_getm_notBefore(x), not_before) ||
      !detail::setTime(X509_getm_notAfter(x), not_after) || X509_set_pubkey(x, key.get()) != 1) {
    return failure(source, "cannot build the certificate");
  }
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, self_signed ? x : issuer.get(), x, nullptr, nullptr, 0);
  const auto addExt = [&](int nid, const std::string& value) -> base::Status {
    ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
    if (!ext || X509_add_ext(x, ext.get(), -1) != 1) {
      return failure(source, fmt::format("cannot add the {} extension {}", OBJ_nid2sn(nid), value),
                     ErrorCode::kInvalidArgument);
    }
    return base::ok();
  };
  EKCO_TRY(addExt(NID_basic_constraints, r.is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE"));
  const std::string usage = !r.key_usage.empty() ? r.key_usage
                            : r.is_ca            ? "digitalSignature,keyEncipherment,keyCertSign"
                                                 : "digitalSignature,keyEncipherment";
  EKCO_TRY(addExt(NID_key_usage, "critical," + usage));
  std::string eku;
  if (r.server_auth) eku += "serverAuth";
  if (r.client_auth) eku += std::string(eku.empty() ? "" : ",") + "clientAuth";
  if (!eku.empty()) EKCO_TRY(addExt(NID_ext_key_usage, eku));
  std::string san;
  for (const std::string& d : r.dns_names) {
    if (d.empty() || d.find_first_of(",\n\r") != std::string::npos) {
      return Error(fmt::format("{}: invalid DNS name {}", source, base::quoteForMessage(d)),
                   ErrorCode::kInvalidArgument);
    }
    san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  }
  for (const std::string& ip : r.ip_addresses) {
    ASN1_OCTET_STRING* parsed = a2i_IPADDRESS(ip.c_str());
    if (parsed == nullptr) {
      ERR_clear_error();
      return Error(fmt::format("{}: invalid IP address {}", source, base::quoteForMessage(ip)),
                   ErrorCode::kInvalidArgument);
    }
    ASN1_OCTET_STRING_free(parsed);
    san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  }
  if (!san.empty()) EKCO_TRY(addExt(NID_subject_alt_name, san));
  EKCO_TRY(addExt(NID_subject_key_identifier, "hash"));
  if (!self_signed && X509_get0_subject_key_id(issuer.get()) != nullptr) {
    EKCO_TRY(addExt(NID_authority_key_identifier, "keyid:always"));
  }
  EVP_PKEY* signer = self_signed ? key.get() : issuer_key.get();
  if (X509_sign(x, signer, detail::signingDigest(signer)) <= 0) {
    return failure(source, "cannot sign");
  }
  if (!self_signed && X509_verify(x, X509_get0_pubkey(issuer.get())) != 1) {
    return failure(source, "the new certificate does not verify against its CA");
  }
  BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), x) != 1) {
    return failure(source, "cannot encode the certificate");
  }
  auto key_pem = detail::encodeKey(key.get(), r.key_encoding, source);
  if (!key_pem) return std::move(key_pem).error();
  return KeyPair{.cert_pem = detail::bioText(out.get()), .key_pem = std::move(*key_pem)};
}

Result<KeyPair> createCa(const CaRequest& r) {
  if (r.common_name.empty() || r.validity <= std::chrono::seconds::zero()) {
    return Error("a CA needs a common name and a positive validity", ErrorCode::kInvalidArgument);
  }
  return issueCertificate({.common_name = r.common_name,
                           .is_ca = true,
                           .now = r.now,
                           .validity = r.validity,
                           .source = r.common_name,
                           .key = KeyAlgorithm::kEcP256,
                           .key_encoding = KeyEncoding::kPkcs8,
                           .key_usage = "keyCertSign,cRLSign"});
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
  const std::string common_name = r.common_name.empty() ? r.dns_names.front() : r.common_name;
  return issueCertificate({.common_name = common_name,
                           .dns_names = r.dns_names,
                           .server_auth = true,
                           .now = r.now,
                           .validity = r.validity,
                           .issuer_cert_pem = r.ca_cert_pem,
                           .issuer_key_pem = r.ca_key_pem,
                           .source = common_name,
                           .key = KeyAlgorithm::kEcP256,
                           .key_encoding = KeyEncoding::kPkcs8,
                           .key_usage = "digitalSignature"});
}

}  // namespace ekco::pki
