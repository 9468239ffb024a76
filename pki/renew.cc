#include "pki/renew.h"

#include <openssl/asn1.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <ctime>
#include <optional>

#include <fmt/format.h>

#include "base/ip_address.h"
#include "base/strings.h"
#include "pki/openssl_ptr.h"
#include "pki/x509_support.h"

namespace ekco::pki {

using base::Error;
using base::ErrorCode;
using base::Result;
using detail::BignumPtr;
using detail::BioPtr;
using detail::encodeKey;
using detail::ExtensionPtr;
using detail::failure;
using detail::isCa;
using detail::PkeyPtr;
using detail::readCert;
using detail::readKey;
using detail::setTime;
using detail::X509Ptr;

namespace {

// The extensions a renewal carries over unchanged; the key identifiers are made anew.
constexpr std::array kKeptExtensions = {NID_basic_constraints, NID_key_usage, NID_ext_key_usage,
                                        NID_subject_alt_name};

// A new key of the same type and size as `like`.
Result<PkeyPtr> generateLike(EVP_PKEY* like, std::string_view source) {
  EVP_PKEY* key = nullptr;
  switch (EVP_PKEY_get_base_id(like)) {
    case EVP_PKEY_RSA: {
      const int bits = EVP_PKEY_get_bits(like);
      if (bits < 2048) {
        return Error(
            fmt::format("{}: refusing to renew a {}-bit RSA key (under 2048 bits)", source, bits),
            ErrorCode::kInvalidArgument);
      }
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "RSA", static_cast<size_t>(bits));
      break;
    }
    case EVP_PKEY_EC: {
      std::array<char, 80> group{};
      size_t len = 0;
      if (EVP_PKEY_get_group_name(like, group.data(), group.size(), &len) != 1) {
        return failure(source, "cannot read the EC curve of the public key",
                       ErrorCode::kInvalidArgument);
      }
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", group.data());
      break;
    }
    case EVP_PKEY_ED25519:
      key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
      break;
    default:
      return Error(fmt::format("{}: unsupported public key type {}", source,
                               OBJ_nid2sn(EVP_PKEY_get_base_id(like))),
                   ErrorCode::kInvalidArgument);
  }
  if (key == nullptr) return failure(source, "cannot generate a new key");
  return PkeyPtr(key);
}

// True when `cert` names `ca` as its issuer: the same name and, where both carry key ids, the
// authority key id equal to the CA's subject key id.
bool issuedBy(X509* cert, X509* ca) {
  if (X509_NAME_cmp(X509_get_issuer_name(cert), X509_get_subject_name(ca)) != 0) return false;
  const ASN1_OCTET_STRING* aki = X509_get0_authority_key_id(cert);
  const ASN1_OCTET_STRING* ski = X509_get0_subject_key_id(ca);
  if (aki != nullptr && ski != nullptr) return ASN1_OCTET_STRING_cmp(aki, ski) == 0;
  return true;
}

}  // namespace

KeyEncoding keyEncodingOf(std::string_view key_pem) {
  if (key_pem.find("-----BEGIN RSA PRIVATE KEY-----") != std::string_view::npos ||
      key_pem.find("-----BEGIN EC PRIVATE KEY-----") != std::string_view::npos) {
    return KeyEncoding::kTypeSpecific;
  }
  return KeyEncoding::kPkcs8;
}

Result<std::string> canonicalAltName(std::string_view name, std::string_view what) {
  if (auto ip = base::parseIpAddress(name)) return ip->text();
  std::string dns(name);
  for (char& c : dns) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto bad = [&](std::string_view why) {
    return Error(fmt::format("{}: {} is neither an IP address nor a DNS name ({})", what,
                             base::quoteForMessage(name), why),
                 ErrorCode::kInvalidArgument);
  };
  if (dns.empty() || dns.size() > 253) return bad("want 1 to 253 characters");
  std::string_view rest = dns;
  if (rest.starts_with("*.")) rest.remove_prefix(2);
  std::size_t start = 0;
  while (start <= rest.size()) {
    const std::size_t dot = std::min(rest.find('.', start), rest.size());
    const std::string_view label = rest.substr(start, dot - start);
    if (label.empty() || label.size() > 63) return bad("each label 1 to 63 characters");
    if (label.front() == '-' || label.back() == '-') return bad("a label starts or ends with '-'");
    for (char c : label) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-')) {
        return bad("letters, digits, '-' and '.' only");
      }
    }
    start = dot + 1;
  }
  return dns;
}

base::Status checkKeyMatches(std::string_view cert_pem, std::string_view key_pem,
                             std::string_view source) {
  auto cert = readCert(cert_pem, source);
  if (!cert) return std::move(cert).error();
  auto key = readKey(key_pem, source);
  if (!key) return std::move(key).error();
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    ERR_clear_error();
    return Error(fmt::format("{}: the private key does not match the certificate", source),
                 ErrorCode::kInvalidArgument);
  }
  return base::ok();
}

Result<KeyPair> renewCertificate(const RenewRequest& r) {
  const std::string_view source = r.source.empty() ? "certificate" : r.source;
  const std::string ca_source = fmt::format("{} (its CA)", source);
  auto old_cert = readCert(r.cert_pem, source);
  if (!old_cert) return std::move(old_cert).error();
  auto ca = readCert(r.ca_cert_pem, ca_source);
  if (!ca) return std::move(ca).error();
  auto ca_key = readKey(r.ca_key_pem, ca_source);
  if (!ca_key) return std::move(ca_key).error();
  X509* old = old_cert->get();

  // The guards, all before anything is generated.
  if (X509_check_private_key(ca->get(), ca_key->get()) != 1) {
    ERR_clear_error();
    return Error(fmt::format("{}: the CA key does not match the CA certificate", ca_source),
                 ErrorCode::kInvalidArgument);
  }
  if (!isCa(ca->get())) {
    return Error(fmt::format("{}: the CA certificate is not a CA (basicConstraints)", ca_source),
                 ErrorCode::kInvalidArgument);
  }
  if (isCa(old)) {
    return Error(fmt::format("{}: is a CA certificate; ekco renews leaf certificates only", source),
                 ErrorCode::kInvalidArgument);
  }
  if (!issuedBy(old, ca->get())) {
    return Error(fmt::format("{}: was not issued by this CA", source), ErrorCode::kInvalidArgument);
  }
  const auto ca_not_before = detail::toWallTime(X509_get0_notBefore(ca->get()));
  const auto ca_not_after = detail::toWallTime(X509_get0_notAfter(ca->get()));
  if (!ca_not_before || !ca_not_after) {
    return Error(fmt::format("{}: unreadable validity dates", ca_source), ErrorCode::kParse);
  }
  if (*ca_not_after <= r.now) {
    return Error(fmt::format("{}: the CA itself has expired; renew the CA first", ca_source),
                 ErrorCode::kInvalidArgument);
  }
  if (r.validity <= std::chrono::seconds::zero()) {
    return Error(fmt::format("{}: validity must be positive", source), ErrorCode::kInvalidArgument);
  }
  const base::WallTime not_before = std::max(r.now - kBackdate, *ca_not_before);
  const base::WallTime not_after =
      std::min(r.not_after ? *r.not_after : r.now + r.validity, *ca_not_after);
  if (not_after <= not_before) {
    return Error(fmt::format("{}: would expire before it is valid", source),
                 ErrorCode::kInvalidArgument);
  }
  std::string san;  // "DNS:a,IP:10.0.0.1" for X509V3_EXT_conf_nid
  if (r.alt_names) {
    for (const std::string& name : *r.alt_names) {
      auto canonical = canonicalAltName(name, source);
      if (!canonical) return std::move(canonical).error();
      if (!san.empty()) san += ",";
      san += (base::parseIpAddress(*canonical) ? "IP:" : "DNS:") + *canonical;
    }
  }

  EVP_PKEY* old_public = X509_get0_pubkey(old);
  if (old_public == nullptr) return failure(source, "unreadable public key", ErrorCode::kParse);
  auto key = generateLike(old_public, source);
  if (!key) return std::move(key).error();

  X509Ptr cert(X509_new());
  if (!cert) return failure(source, "cannot allocate a certificate");
  X509* x = cert.get();
  BignumPtr serial(BN_new());
  // A random positive 127-bit serial, as Go's crypto/x509 users (kubeadm) make them.
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x)) == nullptr ||
      X509_set_version(x, X509_VERSION_3) != 1 ||
      X509_set_subject_name(x, X509_get_subject_name(old)) != 1 ||
      X509_set_issuer_name(x, X509_get_subject_name(ca->get())) != 1 ||
      !setTime(X509_getm_notBefore(x), not_before) || !setTime(X509_getm_notAfter(x), not_after) ||
      X509_set_pubkey(x, key->get()) != 1) {
    return failure(source, "cannot build the new certificate");
  }
  for (int nid : kKeptExtensions) {
    if (nid == NID_subject_alt_name && r.alt_names) continue;  // made below
    const int at = X509_get_ext_by_NID(old, nid, -1);
    if (at < 0) continue;
    if (X509_add_ext(x, X509_get_ext(old, at), -1) != 1) {
      return failure(source, fmt::format("cannot copy the {} extension", OBJ_nid2sn(nid)));
    }
  }
  // Key identifiers: the authority's from the CA (when it has one), the subject's anew when the
  // old certificate had one.
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca->get(), x, nullptr, nullptr, 0);
  const auto addExt = [&](int nid, const char* value) -> base::Status {
    ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value));
    if (!ext || X509_add_ext(x, ext.get(), -1) != 1) {
      return failure(source, fmt::format("cannot add the {} extension", OBJ_nid2sn(nid)));
    }
    return base::ok();
  };
  if (!san.empty()) EKCO_TRY(addExt(NID_subject_alt_name, san.c_str()));
  if (X509_get_ext_by_NID(old, NID_subject_key_identifier, -1) >= 0) {
    EKCO_TRY(addExt(NID_subject_key_identifier, "hash"));
  }
  if (X509_get0_subject_key_id(ca->get()) != nullptr) {
    EKCO_TRY(addExt(NID_authority_key_identifier, "keyid:always"));
  }

  if (X509_sign(x, ca_key->get(), detail::signingDigest(ca_key->get())) <= 0) {
    return failure(source, "cannot sign");
  }
  if (X509_verify(x, X509_get0_pubkey(ca->get())) != 1) {
    return failure(source, "the new certificate does not verify against its CA");
  }

  BioPtr out(BIO_new(BIO_s_mem()));
  if (!out || PEM_write_bio_X509(out.get(), x) != 1) {
    return failure(source, "cannot encode the new certificate");
  }
  auto key_pem = encodeKey(key->get(), r.key_encoding, source);
  if (!key_pem) return std::move(key_pem).error();
  return KeyPair{.cert_pem = detail::bioText(out.get()), .key_pem = std::move(*key_pem)};
}

}  // namespace ekco::pki
