// Real PKCS#10 certificate requests for tests, made with OpenSSL: an RSA or EC key, any subject,
// any subjectAltNames (including the kinds a kubelet never asks for), optionally with a broken
// self-signature. Keys are made once per process and kind (RSA generation is slow under ASan).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ekco::pki::testing {

struct CsrSpec {
  std::string key = "RSA";  // "RSA" (2048 bits) or "EC" (P-256)
  std::vector<std::pair<std::string, std::string>> subject = {};  // {"O", "system:nodes"}, ...
  std::vector<std::string> dns = {};
  std::vector<std::string> ips = {};
  std::vector<std::string> emails = {};
  std::vector<std::string> uris = {};
  bool break_signature = false;  // flip a bit of the signature after signing
};

inline EVP_PKEY* testKey(const std::string& kind) {
  static EVP_PKEY* rsa = EVP_RSA_gen(2048);
  static EVP_PKEY* ec = EVP_EC_gen("P-256");
  EVP_PKEY* key = kind == "EC" ? ec : rsa;
  if (key == nullptr) throw std::runtime_error("key generation failed");
  return key;
}

// The request as PEM text ("-----BEGIN CERTIFICATE REQUEST-----").
inline std::string makeCsrPem(const CsrSpec& spec) {
  std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)> req(X509_REQ_new(), X509_REQ_free);
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  for (const auto& [field, value] : spec.subject) {
    if (X509_NAME_add_entry_by_txt(name, field.c_str(), MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                   0) != 1) {
      throw std::runtime_error("bad subject field " + field);
    }
  }
  EVP_PKEY* key = testKey(spec.key);
  X509_REQ_set_pubkey(req.get(), key);
  std::string sans;
  auto add = [&](const char* kind, const std::vector<std::string>& values) {
    for (const auto& v : values) sans += (sans.empty() ? "" : ",") + std::string(kind) + ":" + v;
  };
  add("DNS", spec.dns);
  add("IP", spec.ips);
  add("email", spec.emails);
  add("URI", spec.uris);
  if (!sans.empty()) {
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, sans.c_str());
    if (ext == nullptr) throw std::runtime_error("bad SANs " + sans);
    sk_X509_EXTENSION_push(exts, ext);
    X509_REQ_add_extensions(req.get(), exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  }
  if (X509_REQ_sign(req.get(), key, EVP_sha256()) <= 0) throw std::runtime_error("sign failed");
  unsigned char* der = nullptr;
  const int len = i2d_X509_REQ(req.get(), &der);
  if (len <= 0) throw std::runtime_error("encode failed");
  std::string bytes(reinterpret_cast<char*>(der), static_cast<std::size_t>(len));
  OPENSSL_free(der);
  if (spec.break_signature) bytes.back() = static_cast<char>(bytes.back() ^ 0x01);
  // PEM by hand (the DER may have been changed): base64 in 64-column lines.
  std::string b64(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  b64.resize(static_cast<std::size_t>(n));
  std::string pem = "-----BEGIN CERTIFICATE REQUEST-----\n";
  for (std::size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\n";
  return pem + "-----END CERTIFICATE REQUEST-----\n";
}

}  // namespace ekco::pki::testing
