#include "pki/x509_support.h"

#include <openssl/core_names.h>
#include <openssl/encoder.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <array>
#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace ekco::pki::detail {

using base::Error;
using base::ErrorCode;
using base::Result;

namespace {

// OpenSSL's most recent error, for messages ("" when its queue is empty).
std::string opensslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return {};
  std::array<char, 256> buf{};
  ERR_error_string_n(code, buf.data(), buf.size());
  return buf.data();
}

}  // namespace

Error failure(std::string_view source, std::string_view what, ErrorCode code) {
  std::string message = fmt::format("{}: {}", source, what);
  if (std::string reason = opensslError(); !reason.empty()) message += " (" + reason + ")";
  return Error(std::move(message), code);
}

Result<X509Ptr> readCert(std::string_view pem, std::string_view source) {
  BioPtr bio = readBio(pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    ERR_clear_error();
    return Error(fmt::format("{}: not a PEM certificate", source), ErrorCode::kParse);
  }
  return cert;
}

Result<PkeyPtr> readKey(std::string_view pem, std::string_view source) {
  BioPtr bio = readBio(pem);
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    return Error(fmt::format("{}: not a PEM private key", source), ErrorCode::kParse);
  }
  return key;
}

Result<std::string> encodeKey(EVP_PKEY* key, KeyEncoding encoding, std::string_view source) {
  const bool type_specific =
      encoding == KeyEncoding::kTypeSpecific && EVP_PKEY_get_base_id(key) != EVP_PKEY_ED25519;
  OSSL_ENCODER_CTX* ctx =
      OSSL_ENCODER_CTX_new_for_pkey(key, OSSL_KEYMGMT_SELECT_KEYPAIR, "PEM",
                                    type_specific ? "type-specific" : "PrivateKeyInfo", nullptr);
  if (ctx == nullptr) return failure(source, "cannot encode the new key");
  unsigned char* data = nullptr;
  size_t len = 0;
  const int encoded = OSSL_ENCODER_to_data(ctx, &data, &len);
  OSSL_ENCODER_CTX_free(ctx);
  if (encoded != 1 || data == nullptr) return failure(source, "cannot encode the new key");
  std::string pem(reinterpret_cast<const char*>(data), len);
  OPENSSL_clear_free(data, len);
  return pem;
}

bool setTime(ASN1_TIME* field, base::WallTime t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t.time_since_epoch()).count();
  return ASN1_TIME_set(field, static_cast<time_t>(secs)) != nullptr;
}

bool isCa(X509* cert) { return X509_check_ca(cert) != 0; }

const EVP_MD* signingDigest(EVP_PKEY* key) {
  const int type = EVP_PKEY_get_base_id(key);
  return type == EVP_PKEY_ED25519 || type == EVP_PKEY_ED448 ? nullptr : EVP_sha256();
}

}  // namespace ekco::pki::detail
