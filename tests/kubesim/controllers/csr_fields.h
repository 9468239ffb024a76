// What both halves of kubesim's CertificateSigningRequests read of one (the registry, csr.cc,
// and the csrsigning controller, csr_signer.cc): its conditions, its PKCS#10 request parsed and
// verified (certificates.ParseCSR + CheckSignature). String fields are read with
// store_detail::str; OpenSSL handles are server/openssl_ptr.h's.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"
#include "tests/kubesim/server/openssl_ptr.h"

namespace ekco::kubesim::csr {

// status.conditions, or [] when absent or not a list.
nlohmann::json conditions(const nlohmann::json& csr);
// spec.request, base64-decoded: the PEM text.
base::Result<std::string> requestPem(const nlohmann::json& csr);
// A PEM CERTIFICATE REQUEST whose signature verifies; the error kube-apiserver's validation
// names otherwise.
base::Result<ReqPtr> parseRequest(const std::string& pem);

}  // namespace ekco::kubesim::csr
