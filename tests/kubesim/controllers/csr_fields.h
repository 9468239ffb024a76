// What both halves of kubesim's CertificateSigningRequests read of one (the registry, csr.cc,
// and the csrsigning controller, csr_signer.cc): its conditions, its PKCS#10 request parsed and
// verified (certificates.ParseCSR + CheckSignature), and the OpenSSL handles they hold. String
// fields are read with store_detail::str.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace ekco::kubesim::csr {

struct ReqFree {
  void operator()(X509_REQ* r) const { X509_REQ_free(r); }
};
struct CertFree {
  void operator()(X509* c) const { X509_free(c); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct ExtsFree {
  void operator()(STACK_OF(X509_EXTENSION) * s) const {
    sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
  }
};
struct NamesFree {
  void operator()(GENERAL_NAMES* n) const { GENERAL_NAMES_free(n); }
};
using ReqPtr = std::unique_ptr<X509_REQ, ReqFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using ExtsPtr = std::unique_ptr<STACK_OF(X509_EXTENSION), ExtsFree>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, NamesFree>;

// status.conditions, or [] when absent or not a list.
nlohmann::json conditions(const nlohmann::json& csr);
// spec.request, base64-decoded: the PEM text.
base::Result<std::string> requestPem(const nlohmann::json& csr);
// A PEM CERTIFICATE REQUEST whose signature verifies; the error kube-apiserver's validation
// names otherwise.
base::Result<ReqPtr> parseRequest(const std::string& pem);

}  // namespace ekco::kubesim::csr
