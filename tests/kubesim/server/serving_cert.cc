#include "tests/kubesim/server/serving_cert.h"

#include <openssl/err.h>
#include <openssl/pem.h>

#include <fstream>
#include <iterator>

namespace ekco::kubesim {

namespace {

bool readText(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

}  // namespace

FileServingCert::FileServingCert(std::string cert_file, std::string key_file)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)) {}

FileServingCert::~FileServingCert() {
  X509_free(cert_);
  EVP_PKEY_free(key_);
}

base::Result<std::unique_ptr<FileServingCert>> FileServingCert::open(std::string cert_file,
                                                                     std::string key_file) {
  std::unique_ptr<FileServingCert> served(
      new FileServingCert(std::move(cert_file), std::move(key_file)));
  EKCO_TRY(served->refresh());
  return served;
}

base::Status FileServingCert::refresh() {
  std::string cert_text;
  std::string key_text;
  if (!readText(cert_file_, cert_text)) {
    return base::Error("kubesim: cannot read " + cert_file_, base::ErrorCode::kInvalidArgument);
  }
  if (!readText(key_file_, key_text)) {
    return base::Error("kubesim: cannot read " + key_file_, base::ErrorCode::kInvalidArgument);
  }
  std::lock_guard lock(mu_);
  if (cert_ != nullptr && cert_text == cert_text_ && key_text == key_text_) return base::ok();
  BIO* cert_bio = BIO_new_mem_buf(cert_text.data(), static_cast<int>(cert_text.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  BIO_free(cert_bio);
  BIO* key_bio = BIO_new_mem_buf(key_text.data(), static_cast<int>(key_text.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  const bool ok = cert != nullptr && key != nullptr && X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  if (!ok) {
    X509_free(cert);
    EVP_PKEY_free(key);
    return base::Error("kubesim: " + cert_file_ + " and " + key_file_ + " are not a matching pair",
                       base::ErrorCode::kInvalidArgument);
  }
  X509_free(cert_);
  EVP_PKEY_free(key_);
  cert_ = cert;
  key_ = key;
  cert_text_ = std::move(cert_text);
  key_text_ = std::move(key_text);
  return base::ok();
}

int FileServingCert::onHandshake(SSL* ssl, void* arg) {
  auto* self = static_cast<FileServingCert*>(arg);
  (void)self->refresh();  // a pair caught mid-write: the previous one is served
  std::lock_guard lock(self->mu_);
  if (SSL_use_certificate(ssl, self->cert_) != 1 || SSL_use_PrivateKey(ssl, self->key_) != 1) {
    ERR_clear_error();
    return 0;
  }
  return 1;
}

void FileServingCert::install(SSL_CTX* ctx) { SSL_CTX_set_cert_cb(ctx, &onHandshake, this); }

}  // namespace ekco::kubesim
