// PKCS#10 certificate signing requests as ekco reads them (the `spec.request` of a
// CertificateSigningRequest): the subject's attributes one by one, the key type, and every
// subjectAltName by kind. OpenSSL's request API is confined to pki/csr.cc.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"

namespace ekco::pki {

struct CertificateRequest {
  // The subject's attributes in order, by short name: {"O", "system:nodes"}, {"CN", ...}. An
  // attribute OpenSSL has no short name for is its dotted OID.
  std::vector<std::pair<std::string, std::string>> subject{};
  std::string key_type{};  // "RSA", "EC", "ED25519", "ED448", or OpenSSL's name for another
  std::vector<std::string> dns_names{};
  // In canonical text: dotted quad for IPv4, RFC 5952 (inet_ntop) for IPv6.
  std::vector<std::string> ip_addresses{};
  std::vector<std::string> emails{};
  std::vector<std::string> uris{};
  // SANs of any other kind (otherName, directoryName, registeredID, ...), by kind.
  std::vector<std::string> other_names{};

  // "O=system:nodes, CN=system:node:a" (the subject in its own order), for messages.
  std::string subjectText() const;
};

// The first "CERTIFICATE REQUEST" in PEM text. Everything wrong is one kParse line that starts
// with `source`: no PEM request, a request OpenSSL cannot decode, a public key it cannot read,
// a self-signature that does not verify (kube-apiserver refuses those too), an unreadable
// subjectAltName extension. Never crashes on any input (tests/fuzz/csr_fuzz.cc).
base::Result<CertificateRequest> parseCertificateRequest(std::string_view pem,
                                                         std::string_view source);

}  // namespace ekco::pki
