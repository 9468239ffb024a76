// Making certificates from nothing, with OpenSSL. One path, issueCertificate: a CA or a leaf,
// self-signed or signed by a CA. The cluster's TLS secrets (agent/features/certs/
// cluster_secrets.h) use it as Go's certutil and Contour make theirs (RSA 2048, type-specific
// PEM keys); ekco's own TLS (the pod image overrides webhook, agent/features/webhook/) through
// the presets createCa and issueServingCertificate (ECDSA P-256, quick to make and to handshake
// with, PKCS#8 keys). The cluster's kubeadm PKI is renewed as kubeadm made it: pki/renew.h.
//
// Certificates are X.509 v3 with random 127-bit serials, backdated by kBackdate for clocks a
// little behind this one, with a subject key identifier (and the authority's, when the issuer
// has one). A certificate never outlives its issuer, and one signed by a CA is verified against
// it before it is returned.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "pki/renew.h"

namespace ekco::pki {

enum class KeyAlgorithm { kRsa2048, kEcP256 };

struct IssueRequest {
  std::string common_name{};
  std::vector<std::string> organizations{};
  std::vector<std::string> dns_names{};
  std::vector<std::string> ip_addresses{};  // each must parse as IPv4 or IPv6
  bool is_ca = false;
  bool server_auth = false;
  bool client_auth = false;
  base::WallTime now{};
  std::chrono::seconds validity = kDefaultValidity;
  std::string_view issuer_cert_pem{};  // both empty: self-signed
  std::string_view issuer_key_pem{};
  std::string_view source{};  // names it in errors
  KeyAlgorithm key = KeyAlgorithm::kRsa2048;
  KeyEncoding key_encoding = KeyEncoding::kTypeSpecific;
  // keyUsage (always critical); "" is digitalSignature,keyEncipherment, plus keyCertSign for a
  // CA (as certutil makes them).
  std::string key_usage{};
};

// basicConstraints (critical) CA:TRUE or CA:FALSE, keyUsage, extKeyUsage serverAuth and/or
// clientAuth when asked, the DNS and IP SANs. Errors name `source`: kInvalidArgument for a
// missing common name, a non-positive validity, a bad DNS name or IP address, an issuer whose key
// does not match it, that is not a CA or has expired; kParse for an unreadable issuer PEM.
[[nodiscard]] base::Result<KeyPair> issueCertificate(const IssueRequest& request);

struct CaRequest {
  std::string common_name{};  // "ekco-webhook-ca"
  base::WallTime now{};
  std::chrono::seconds validity{std::chrono::hours(24 * 365 * 10)};
};

// A self-signed ECDSA P-256 CA: keyUsage keyCertSign and cRLSign.
[[nodiscard]] base::Result<KeyPair> createCa(const CaRequest& request);

struct ServingRequest {
  std::string_view ca_cert_pem{};
  std::string_view ca_key_pem{};
  std::string common_name{};             // "ekco.kurl.svc"; "" is the first DNS name
  std::vector<std::string> dns_names{};  // the SANs clients verify
  base::WallTime now{};
  std::chrono::seconds validity{std::chrono::hours(24 * 90)};
};

// An ECDSA P-256 TLS server certificate signed by the CA: keyUsage digitalSignature, extKeyUsage
// serverAuth, the DNS SANs. Refused (kInvalidArgument) when there is no DNS name or one is not a
// lowercase DNS name, and as issueCertificate refuses.
[[nodiscard]] base::Result<KeyPair> issueServingCertificate(const ServingRequest& request);

}  // namespace ekco::pki
