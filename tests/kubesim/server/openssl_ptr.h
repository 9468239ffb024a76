// Owning pointers for the OpenSSL objects kubesim holds, and memory BIOs in and out: for its
// PKI (pki.cc) and its CertificateSigningRequest controllers (controllers/csr*.cc). kubesim
// keeps its own rather than the product's pki/openssl_ptr.h: it does not link pki/.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <climits>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace ekco::kubesim {

template <typename T, void (*Free)(T*)>
struct OpenSslDeleter {
  void operator()(T* p) const { Free(p); }
};
inline void freeExtensions(STACK_OF(X509_EXTENSION) * s) {
  sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free);
}
using BioPtr = std::unique_ptr<BIO, OpenSslDeleter<BIO, BIO_free_all>>;
using CertPtr = std::unique_ptr<X509, OpenSslDeleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, OpenSslDeleter<EVP_PKEY, EVP_PKEY_free>>;
using ReqPtr = std::unique_ptr<X509_REQ, OpenSslDeleter<X509_REQ, X509_REQ_free>>;
using ExtsPtr = std::unique_ptr<STACK_OF(X509_EXTENSION),
                                OpenSslDeleter<STACK_OF(X509_EXTENSION), freeExtensions>>;
using NamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslDeleter<GENERAL_NAMES, GENERAL_NAMES_free>>;

// A read-only memory BIO over `text` (which must outlive it); null when too large for one.
inline BioPtr readBio(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT_MAX)) return nullptr;
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// What a memory BIO holds.
inline std::string bioText(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return len > 0 ? std::string(data, static_cast<std::size_t>(len)) : std::string();
}

}  // namespace ekco::kubesim
