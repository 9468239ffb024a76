// What pki/'s issuing and renewing share (not part of its interface): reading PEM, encoding keys,
// setting times, and errors that carry OpenSSL's reason.
#pragma once

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/result.h"
#include "pki/openssl_ptr.h"
#include "pki/renew.h"

namespace ekco::pki::detail {

// "<source>: <what>", with OpenSSL's most recent error in parentheses when it has one (its
// queue is cleared).
base::Error failure(std::string_view source, std::string_view what,
                    base::ErrorCode code = base::ErrorCode::kIo);

// The first certificate / private key in `pem`; kParse "<source>: not a PEM certificate" /
// "<source>: not a PEM private key".
base::Result<X509Ptr> readCert(std::string_view pem, std::string_view source);
base::Result<PkeyPtr> readKey(std::string_view pem, std::string_view source);

// `key` as PEM: PKCS#8, or the type's own form (PKCS#1 for RSA, SEC1 for EC; Ed25519 has only
// PKCS#8).
base::Result<std::string> encodeKey(EVP_PKEY* key, KeyEncoding encoding, std::string_view source);

// seconds since the epoch -> ASN1_TIME (UTCTime before 2050, GeneralizedTime after, as RFC 5280).
bool setTime(ASN1_TIME* field, base::WallTime t);

bool isCa(X509* cert);

// The digest `key` signs with: none for Ed25519 and Ed448 (they sign without a separate one),
// else SHA-256.
const EVP_MD* signingDigest(EVP_PKEY* key);

}  // namespace ekco::pki::detail
