// Renewing a kubeadm-style leaf certificate with OpenSSL: the same subject, SANs, key usages and
// extended key usages, a new key of the same type, signed by the certificate's CA.
//
// The new certificate is valid from now (backdated kBackdate for clocks a little behind this
// one; never before the CA's own NotBefore) for `validity`, and never past the CA's NotAfter.
// Everything is checked before anything is returned: the CA key matches the CA certificate, the
// old certificate was issued by that CA (same issuer name and, where both carry key ids, the same
// authority key id), the CA is not expired, the old certificate is not a CA, and the result
// verifies against the CA. Nothing here touches a file.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::pki {

inline constexpr std::chrono::seconds kDefaultValidity{std::chrono::hours(24 * 365)};
inline constexpr std::chrono::seconds kBackdate{std::chrono::minutes(5)};

struct KeyPair {
  std::string cert_pem{};
  std::string key_pem{};
};

// How a private key is written: kubeadm writes RSA keys as PKCS#1 ("RSA PRIVATE KEY") and EC
// keys as SEC1 ("EC PRIVATE KEY"), other tools PKCS#8 ("PRIVATE KEY"). A renewal keeps the
// encoding of the key it replaces.
enum class KeyEncoding { kTypeSpecific, kPkcs8 };

// kTypeSpecific for "RSA PRIVATE KEY" / "EC PRIVATE KEY" PEM, kPkcs8 otherwise.
KeyEncoding keyEncodingOf(std::string_view key_pem);

struct RenewRequest {
  std::string_view cert_pem{};  // the certificate to renew
  std::string_view ca_cert_pem{};
  std::string_view ca_key_pem{};
  base::WallTime now{};
  std::chrono::seconds validity = kDefaultValidity;
  KeyEncoding key_encoding = KeyEncoding::kTypeSpecific;
  std::string_view source{};  // names the certificate in errors: "pki/apiserver.crt"
  // A re-issue with other names (`ekco regen-cert`): when set, the subjectAltName holds these
  // DNS names and IP addresses (canonical text, as altNameList checks them) instead of the old
  // certificate's; empty means no subjectAltName.
  std::optional<std::vector<std::string>> alt_names{};
  // When set, the new certificate expires then (never past the CA), not at now + validity: a
  // re-issue keeps the old expiry.
  std::optional<base::WallTime> not_after{};
};

// A subjectAltName entry as a re-issue takes it: an IPv4 or IPv6 address (returned in its
// canonical text) or a DNS name (RFC 1123 labels, lower-cased, at most 253 characters; a leading
// "*." wildcard label allowed); anything else is kInvalidArgument naming `what`.
[[nodiscard]] base::Result<std::string> canonicalAltName(std::string_view name,
                                                         std::string_view what);

// The renewed pair, or an Error naming `source`: kParse for unreadable PEM, kInvalidArgument for
// a refusal (CA mismatch, expired CA, a CA certificate, unsupported key type).
[[nodiscard]] base::Result<KeyPair> renewCertificate(const RenewRequest& request);

// Ok when `key_pem` is the private key of the certificate in `cert_pem`; otherwise an Error
// naming `source` ("pki/apiserver.key: does not match pki/apiserver.crt" style).
[[nodiscard]] base::Status checkKeyMatches(std::string_view cert_pem, std::string_view key_pem,
                                           std::string_view source);

}  // namespace ekco::pki
