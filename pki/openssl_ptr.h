// Owning pointers for OpenSSL objects, for pki/'s own sources (not part of its interface).
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <optional>
#include <string>

#include "base/clock.h"

namespace ekco::pki::detail {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;

// A read-only memory BIO over `text` (which must outlive it); null when too large.
inline BioPtr readBio(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT32_MAX)) return nullptr;
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// What a memory BIO holds.
inline std::string bioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return size > 0 ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

// An ASN1_TIME as a WallTime (seconds), computed without time_t or nanoseconds (a year-9999
// notAfter overflows neither), then clamped into ekco's window; nullopt when unreadable.
std::optional<base::WallTime> toWallTime(const ASN1_TIME* time);

}  // namespace ekco::pki::detail
