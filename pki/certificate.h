// X.509 certificates as ekco reads them. OpenSSL's certificate API is confined to pki/ (and the
// TLS of kube/exec.cc); everything else sees this small value type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace ekco::pki {

struct Certificate {
  std::string subject{};  // RFC 2253: "CN=kube-apiserver"
  std::string issuer{};
  // Clamped into base::kEarliestTime..kLatestTime like every time ekco reads (a certificate
  // valid until 9999-12-31 is "not yet expired", never an overflowed past).
  base::WallTime not_before{};
  base::WallTime not_after{};
  std::string serial{};                     // hex, upper case, as `openssl x509 -serial` prints it
  bool is_ca = false;                       // basicConstraints CA:TRUE
  std::string common_name{};                // the subject's CN ("" when none)
  std::string issuer_common_name{};         // the issuer's CN
  std::vector<std::string> dns_names{};     // subjectAltName DNS entries, in order
  std::vector<std::string> ip_addresses{};  // subjectAltName IP entries, as text
};

// The first certificate in PEM text. Text without one, or one OpenSSL cannot read, is kParse:
// "<source>: not a PEM certificate".
base::Result<Certificate> parseCertificate(std::string_view pem, std::string_view source);

// Standard base64 with padding and no line breaks (kubeconfig "*-data" fields).
std::string base64Encode(std::string_view data);

// "OpenSSL 3.0.17 1 Jul 2025", for `ekco version`.
std::string libraryVersion();

}  // namespace ekco::pki
