#include "tests/kubesim/server/pki.h"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "tests/kubesim/server/openssl_ptr.h"

namespace ekco::kubesim {
namespace {

using base::Error;
using base::Result;

Error sslError(std::string_view what) {
  return Error(std::string("openssl: ") + std::string(what));
}

Result<std::string> keyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return sslError("write private key");
  }
  return bioText(bio.get());
}

Result<std::string> certPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return sslError("write certificate");
  return bioText(bio.get());
}

Result<KeyPtr> newKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return sslError("generate EC P-256 key");
  return key;
}

bool addExt(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

struct CertSpec {
  std::string cn{};
  std::string org{};
  bool is_ca = false;
  std::string san{};  // "IP:127.0.0.1,DNS:localhost"
  std::string ext_key_usage{};
};

// Issues a certificate for `key`; self-signed when issuer is null.
Result<CertPtr> issue(const CertSpec& spec, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                      long serial) {
  CertPtr cert(X509_new());
  if (!cert) return sslError("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (!spec.org.empty()) {
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(spec.org.c_str()), -1, -1, 0);
  }
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(spec.cn.c_str()), -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  bool ok = true;
  if (spec.is_ca) {
    ok = ok && addExt(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    ok = ok &&
         addExt(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
  } else {
    ok = ok && addExt(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    ok = ok &&
         addExt(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment");
  }
  ok = ok && addExt(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer != nullptr)
    ok = ok && addExt(cert.get(), signer, NID_authority_key_identifier, "keyid");
  if (!spec.san.empty())
    ok = ok && addExt(cert.get(), signer, NID_subject_alt_name, spec.san.c_str());
  if (!spec.ext_key_usage.empty()) {
    ok = ok && addExt(cert.get(), signer, NID_ext_key_usage, spec.ext_key_usage.c_str());
  }
  if (!ok) return sslError("add certificate extension for " + spec.cn);
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) return sslError("sign " + spec.cn);
  return cert;
}

}  // namespace

Result<Pki> generatePki() {
  Pki pki;
  auto ca_key = newKey();
  EKCO_TRY(ca_key);
  auto ca = issue({.cn = "kubesim-ca", .org = "", .is_ca = true, .san = "", .ext_key_usage = ""},
                  ca_key->get(), nullptr, ca_key->get(), 1);
  EKCO_TRY(ca);
  auto server_key = newKey();
  EKCO_TRY(server_key);
  auto server = issue({.cn = "kube-apiserver",
                       .org = "",
                       .is_ca = false,
                       .san = "IP:127.0.0.1,DNS:localhost",
                       .ext_key_usage = "serverAuth"},
                      server_key->get(), ca->get(), ca_key->get(), 2);
  EKCO_TRY(server);
  auto client_key = newKey();
  EKCO_TRY(client_key);
  auto client = issue({.cn = "kubernetes-admin",
                       .org = "system:masters",
                       .is_ca = false,
                       .san = "",
                       .ext_key_usage = "clientAuth"},
                      client_key->get(), ca->get(), ca_key->get(), 3);
  EKCO_TRY(client);

  auto set = [](std::string& out, Result<std::string> pem) -> base::Status {
    EKCO_TRY(pem);
    out = std::move(*pem);
    return base::ok();
  };
  EKCO_TRY(set(pki.ca_cert_pem, certPem(ca->get())));
  EKCO_TRY(set(pki.ca_key_pem, keyPem(ca_key->get())));
  EKCO_TRY(set(pki.server_cert_pem, certPem(server->get())));
  EKCO_TRY(set(pki.server_key_pem, keyPem(server_key->get())));
  EKCO_TRY(set(pki.client_cert_pem, certPem(client->get())));
  EKCO_TRY(set(pki.client_key_pem, keyPem(client_key->get())));
  return pki;
}

std::string base64Encode(std::string_view data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(data.data()),
                          static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string renderKubeconfig(const Pki& pki, std::string_view server_url) {
  std::string out;
  out += "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n    server: ";
  out += server_url;
  out += "\n    certificate-authority-data: " + base64Encode(pki.ca_cert_pem) + "\n";
  out +=
      "contexts:\n- name: kubernetes-admin@kubesim\n  context:\n    cluster: kubesim\n"
      "    user: kubernetes-admin\n";
  out += "current-context: kubernetes-admin@kubesim\npreferences: {}\n";
  out += "users:\n- name: kubernetes-admin\n  user:\n";
  out += "    client-certificate-data: " + base64Encode(pki.client_cert_pem) + "\n";
  out += "    client-key-data: " + base64Encode(pki.client_key_pem) + "\n";
  return out;
}

std::string renderTokenKubeconfig(const Pki& pki, std::string_view server_url,
                                  std::string_view user_name, std::string_view token) {
  std::string user(user_name);
  std::string out;
  out += "apiVersion: v1\nkind: Config\nclusters:\n- name: kubesim\n  cluster:\n    server: ";
  out += server_url;
  out += "\n    certificate-authority-data: " + base64Encode(pki.ca_cert_pem) + "\n";
  out += "contexts:\n- name: \"" + user + "@kubesim\"\n  context:\n    cluster: kubesim\n";
  out += "    user: \"" + user + "\"\n";
  out += "current-context: \"" + user + "@kubesim\"\npreferences: {}\n";
  out += "users:\n- name: \"" + user + "\"\n  user:\n";
  out += "    token: \"" + std::string(token) + "\"\n";
  return out;
}

}  // namespace ekco::kubesim
