// Making certificates from nothing, with OpenSSL: a self-signed CA, and serving certificates it
// signs. For ekco's own TLS (the pod image overrides webhook, agent/features/webhook/), not
// for the cluster's PKI (that is renewed as kubeadm made it: pki/renew.h).
//
// Keys are ECDSA P-256 (quick to make and to handshake with; every TLS client the apiserver
// uses accepts them), written as PKCS#8. Certificates are X.509 v3 with random 127-bit serials,
// backdated by kBackdate for clocks a little behind this one; a leaf never outlives its CA.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "pki/renew.h"

namespace ekco::pki {

struct CaRequest {
  std::string common_name{};  // "ekco-webhook-ca"
  base::WallTime now{};
  std::chrono::seconds validity{std::chrono::hours(24 * 365 * 10)};
};

// A self-signed CA: basicConstraints CA:TRUE (critical), keyUsage keyCertSign and cRLSign
// (critical), a subject key identifier.
[[nodiscard]] base::Result<KeyPair> createCa(const CaRequest& request);

struct ServingRequest {
  std::string_view ca_cert_pem{};
  std::string_view ca_key_pem{};
  std::string common_name{};             // "ekco.kurl.svc"
  std::vector<std::string> dns_names{};  // the SANs clients verify
  base::WallTime now{};
  std::chrono::seconds validity{std::chrono::hours(24 * 90)};
};

// A TLS server certificate signed by the CA: keyUsage digitalSignature (critical), extKeyUsage
// serverAuth, the DNS SANs, authority and subject key identifiers. Refused (kInvalidArgument)
// when the CA key does not match its certificate, the CA is not a CA or has expired, or there is
// no DNS name; kParse for unreadable PEM.
[[nodiscard]] base::Result<KeyPair> issueServingCertificate(const ServingRequest& request);

}  // namespace ekco::pki
